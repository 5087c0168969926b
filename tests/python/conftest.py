"""Shared setup: import winconv from the source tree and locate the optional original WTConv.

The original WTConv repository (for comparison tests) is looked up in $WTCONV_REPO, else in
third_party_checkouts/WTConv under the repository root; tests that need it skip otherwise.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The CPU tests use tiny tensors: extra intra-op threads only add synchronisation, and on a
# busy 2-core machine they make the suite an order of magnitude slower.
torch.set_num_threads(1)


def original_repo_path() -> Path:
    return Path(os.environ.get("WTCONV_REPO", REPO_ROOT / "third_party_checkouts" / "WTConv"))


@pytest.fixture(scope="session")
def original_wtconv2d():
    """The original WTConv2d class, or a clean skip naming what is missing."""
    repo = original_repo_path()
    if not (repo / "wtconv" / "wtconv2d.py").is_file():
        pytest.skip(f"original WTConv repository not found at {repo} (set WTCONV_REPO)")
    pytest.importorskip("pywt", reason="the original WTConv2d needs pywt (PyWavelets)")
    sys.path.insert(0, str(repo))
    try:
        module = importlib.import_module("wtconv.wtconv2d")
    finally:
        sys.path.remove(str(repo))
    return module.WTConv2d
