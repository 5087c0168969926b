"""gpu_missing: a skip by default, a failure under WINCONV_REQUIRE_GPU=1 (scripts/gpu-check)."""

from __future__ import annotations

import pytest

from gpu_required import gpu_missing


def test_skips_by_default(monkeypatch):
    monkeypatch.delenv("WINCONV_REQUIRE_GPU", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no device here"):
        gpu_missing("no device here")


def test_fails_where_a_gpu_is_required(monkeypatch):
    monkeypatch.setenv("WINCONV_REQUIRE_GPU", "1")
    with pytest.raises(pytest.fail.Exception, match="no device here"):
        gpu_missing("no device here")
