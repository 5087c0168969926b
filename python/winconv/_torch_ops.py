"""Finds and loads the PyTorch operator library (winconv::wtconv2d_eager, src/torch/), once.

The library holds the eager CUDA path with its autograd formula in C++: the same kernels as the
ctypes binding (python/winconv/_native.py), at a fraction of the host time per call. PyTorch's C++
ABI changes between versions, so it is built per version by scripts/build-torch-ops into
<folder of libwinconv.so>/torch_ops/torch-<version>/. $WINCONV_TORCH_OPS names another file, or
`off` to use the ctypes binding. When it is missing, everything still works through ctypes and
`torch_ops_status()` says why.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable, Optional, Tuple

import torch

from ._native_loader import native_module, native_status

LIBRARY_NAME = "winconv_torch_ops.so"


def _candidates(native) -> list:
    env = os.environ.get("WINCONV_TORCH_OPS", "")
    if env:
        return [Path(env)]
    version_dir = f"torch-{torch.__version__}"
    found = []
    lib = native.library_path()
    if lib is not None:
        found.append(Path(lib).resolve().parent / "torch_ops" / version_dir / LIBRARY_NAME)
    found.append(Path(__file__).resolve().parent / "torch_ops" / version_dir / LIBRARY_NAME)
    return found


@functools.lru_cache(maxsize=None)
def _load() -> Tuple[Optional[Callable], str]:
    if os.environ.get("WINCONV_TORCH_OPS", "").lower() == "off":
        return None, "disabled by WINCONV_TORCH_OPS=off"
    native = native_module()  # loads libwinconv.so, which the operator library links against
    if native is None:
        return None, native_status()
    tried = _candidates(native)
    for path in tried:
        if not path.is_file():
            continue
        try:
            torch.ops.load_library(str(path))
        except (OSError, RuntimeError) as exc:  # a build for another torch: report, do not crash
            return None, f"could not load {path}: {exc}"
        return torch.ops.winconv.wtconv2d_eager.default, ""  # the overload: no overload resolution per call
    return None, (
        f"{LIBRARY_NAME} for torch {torch.__version__} not found (tried: " + ", ".join(map(str, tried)) +
        "); build it with scripts/build-torch-ops"
    )


def eager_op() -> Optional[Callable]:
    """torch.ops.winconv.wtconv2d_eager when the library loaded, else None."""
    return _load()[0]


def torch_ops_status() -> str:
    """'' when the operator library is in use, else the reason it is not."""
    return _load()[1]
