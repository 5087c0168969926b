"""Finds the fused CUDA kernels (python/winconv/_native.py over libwinconv.so), once.

The native module is optional: without it (no build, no GPU, a build without CUDA) every
device runs the pure-PyTorch path and `native_status()` says why.
"""

from __future__ import annotations

import functools
import warnings
from types import ModuleType
from typing import Optional, Tuple


@functools.lru_cache(maxsize=None)
def _load() -> Tuple[Optional[ModuleType], str]:
    try:
        from . import _native  # noqa: WPS433 (import deferred so `import winconv` never fails)
    except ImportError as exc:
        return None, f"winconv._native could not be imported: {exc}"
    try:
        if _native.available():
            return _native, ""
        return None, _native.unavailable_reason()
    except Exception as exc:  # a broken library must not break the CPU path
        return None, f"winconv._native failed to initialise: {exc}"


def native_module() -> Optional[ModuleType]:
    """The loaded native module, or None when the fused kernels cannot run here."""
    return _load()[0]


def native_status() -> str:
    """'' when the fused kernels are usable, else the reason they are not."""
    return _load()[1]


@functools.lru_cache(maxsize=None)
def warn_fallback_once() -> None:
    """CUDA input without the fused kernels still works, but slowly: say so once."""
    warnings.warn(
        "winconv: fused WTConv CUDA kernels unavailable (" + native_status() + "); "
        "using the pure-PyTorch implementation on CUDA tensors",
        RuntimeWarning,
        stacklevel=3,
    )
