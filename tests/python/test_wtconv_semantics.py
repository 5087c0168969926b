"""Forward semantics: the two float64 oracles agree with each other and with winconv."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from winconv import functional
from winconv.haar import haar_analysis, haar_filter_bank, haar_synthesis
from wtconv_oracles import exact_haar_bank, level_by_level, one_pass, random_params, rel_l2

SIZES = [(1, 6), (5, 3), (7, 10), (13, 9), (2, 2), (1, 1)]
LEVELS = [1, 2, 3, 4, 5]
KERNELS = [1, 3, 5, 7]
STRIDES = [1, 2]


@pytest.mark.parametrize("height,width", SIZES)
@pytest.mark.parametrize("stride", STRIDES)
def test_oracles_and_functional_agree(height, width, stride):
    channels = 2
    x = torch.randn(2, channels, height, width, dtype=torch.float64, generator=torch.Generator().manual_seed(height * 31 + width))
    for levels, k in itertools.product(LEVELS, KERNELS):
        p = random_params(channels, k, levels, seed=levels * 7 + k)
        literal = level_by_level(x, p, stride)
        closed_form = one_pass(x, p, stride)
        ours = functional.wtconv2d_forward(x, *p.as_args(), stride)
        case = f"{height}x{width} L={levels} k={k} stride={stride}"
        assert literal.shape == (2, channels, -(-height // stride), -(-width // stride)), case
        assert rel_l2(closed_form, literal) < 1e-13, case
        assert rel_l2(ours, literal) < 1e-13, case


def test_without_bias_and_many_levels():
    x = torch.randn(1, 3, 11, 6, dtype=torch.float64)
    p = random_params(3, 3, 8, bias=False)
    assert rel_l2(functional.wtconv2d_forward(x, *p.as_args(), 3), level_by_level(x, p, 3)) < 1e-13


def test_float32_and_half_inputs_compute_in_float32():
    x = torch.randn(2, 4, 9, 12, dtype=torch.float64)
    p = random_params(4, 5, 3)
    expected = one_pass(x, p)
    y32 = functional.wtconv2d_forward(x.float(), *p.to(dtype=torch.float32).as_args())
    assert y32.dtype == torch.float32 and rel_l2(y32, expected) < 1e-6
    for dtype in (torch.float16, torch.bfloat16):
        y = functional.wtconv2d_forward(x.to(dtype), *p.to(dtype=torch.float32).as_args())
        assert y.dtype == dtype
        assert rel_l2(y, one_pass(x.to(dtype).double(), p)) < 1e-2


def test_haar_filter_bank_values():
    bank = haar_filter_bank(3)
    assert bank.shape == (12, 1, 2, 2) and bank.dtype == torch.float32
    assert torch.allclose(bank.double(), exact_haar_bank(3), atol=1e-7, rtol=0)
    # The original's float32 taps: 1/sqrt(2) in float32, squared in float32.
    tap = torch.tensor(0.7071067811865476, dtype=torch.float32)
    assert bank.abs().unique().tolist() == [(tap * tap).item()]


def test_haar_filter_bank_equals_original_construction():
    pywt = pytest.importorskip("pywt", reason="pywt (PyWavelets) not installed")
    wavelet = pywt.Wavelet("db1")
    lo = torch.tensor(wavelet.dec_lo[::-1], dtype=torch.float)
    hi = torch.tensor(wavelet.dec_hi[::-1], dtype=torch.float)
    rec_lo = torch.tensor(wavelet.rec_lo, dtype=torch.float)
    rec_hi = torch.tensor(wavelet.rec_hi, dtype=torch.float)
    # Outer products as the original builds them: element [i, j] = vertical[i] * horizontal[j].
    dec = torch.stack([torch.outer(lo, lo), torch.outer(hi, lo), torch.outer(lo, hi), torch.outer(hi, hi)])
    rec = torch.stack(
        [torch.outer(rec_lo, rec_lo), torch.outer(rec_hi, rec_lo), torch.outer(rec_lo, rec_hi), torch.outer(rec_hi, rec_hi)]
    )
    assert torch.equal(haar_filter_bank(2), dec[:, None].repeat(2, 1, 1, 1))
    assert torch.equal(haar_filter_bank(2), rec[:, None].repeat(2, 1, 1, 1))


@pytest.mark.parametrize("height,width", [(6, 8), (5, 3), (1, 1)])
def test_haar_analysis_matches_strided_conv_and_synthesis_inverts(height, width):
    x = torch.randn(2, 3, height, width, dtype=torch.float64)
    bank = exact_haar_bank(3)
    padded = F.pad(x, (0, width % 2, 0, height % 2))
    via_conv = F.conv2d(padded, bank, stride=2, groups=3).reshape(2, 3, 4, -(-height // 2), -(-width // 2))
    coeffs = haar_analysis(x)
    assert torch.allclose(coeffs, via_conv, atol=1e-14)
    assert torch.allclose(haar_synthesis(coeffs, height, width), x, atol=1e-14)
    via_transpose = F.conv_transpose2d(coeffs.reshape(2, 12, *coeffs.shape[-2:]), bank, stride=2, groups=3)
    assert torch.allclose(haar_synthesis(coeffs, height, width), via_transpose[:, :, :height, :width], atol=1e-14)
