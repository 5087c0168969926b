"""Skips of GPU tests, which fail instead under WINCONV_REQUIRE_GPU=1.

scripts/gpu-check sets it: there a missing device, kernel library or operator library is an
error, so a run that tested nothing cannot read as passed. Elsewhere (CI without a GPU) such
tests skip, saying why.
"""

from __future__ import annotations

import os

import pytest


def gpu_missing(reason: str, *, module: bool = False) -> None:
    """Skips the calling test (or module) with `reason`, or fails it where a GPU is required."""
    if os.environ.get("WINCONV_REQUIRE_GPU") == "1":
        pytest.fail(f"{reason} (and WINCONV_REQUIRE_GPU=1)", pytrace=False)
    pytest.skip(reason, allow_module_level=module)
