"""Single-level 2-D Haar (db1) analysis and synthesis on (B, C, H, W) tensors.

Sub-band order and signs follow the original WTConv2d: for each 2x2 block [a b; c d]

    LL = (a+b+c+d)/2   S1 = (a+b-c-d)/2   S2 = (a-b+c-d)/2   HH = (a-b-c+d)/2

The 4x4 matrix of these coefficients is symmetric and orthogonal, so synthesis uses the
same coefficients; the adjoint of analysis is synthesis and vice versa, which is what the
backward pass relies on.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# 1/sqrt(2) rounded to float32, as the original module's pywt-derived filters hold it.
_HAAR_TAP_F32 = torch.tensor(1.0 / math.sqrt(2.0), dtype=torch.float32)


def haar_filter_bank(channels: int) -> torch.Tensor:
    """The (4*channels, 1, 2, 2) float32 filter bank the original stores as wt_filter/iwt_filter.

    Built as outer products of float32 taps so that the values are bit-identical to the
    original (which multiplies float32 1/sqrt(2) taps, giving +-0.49999997 rather than 0.5).
    Only stored for state_dict compatibility; the computation uses exact halves.
    """
    lo = torch.stack([_HAAR_TAP_F32, _HAAR_TAP_F32])
    hi = torch.stack([_HAAR_TAP_F32, -_HAAR_TAP_F32])
    # [row, col]: rows select the vertical tap, columns the horizontal tap.
    bank = torch.stack(
        [
            torch.outer(lo, lo),  # LL
            torch.outer(hi, lo),  # S1: top rows minus bottom rows
            torch.outer(lo, hi),  # S2: left columns minus right columns
            torch.outer(hi, hi),  # HH
        ]
    )
    return bank[:, None].repeat(channels, 1, 1, 1)


def pad_to_even(x: torch.Tensor) -> torch.Tensor:
    """Zero-pad the last two dims at the bottom/right up to even sizes."""
    pad_h = x.shape[-2] % 2
    pad_w = x.shape[-1] % 2
    if pad_h == 0 and pad_w == 0:
        return x
    return F.pad(x, (0, pad_w, 0, pad_h))


def haar_analysis(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) -> (B, C, 4, ceil(H/2), ceil(W/2)) after zero padding to even size."""
    x = pad_to_even(x)
    b, c, h, w = x.shape
    blocks = x.reshape(b, c, h // 2, 2, w // 2, 2)
    a = blocks[:, :, :, 0, :, 0]
    bb = blocks[:, :, :, 0, :, 1]
    cc = blocks[:, :, :, 1, :, 0]
    d = blocks[:, :, :, 1, :, 1]
    top, bottom = a + bb, cc + d
    left_minus_right_top, left_minus_right_bottom = a - bb, cc - d
    ll = (top + bottom) * 0.5
    s1 = (top - bottom) * 0.5
    s2 = (left_minus_right_top + left_minus_right_bottom) * 0.5
    hh = (left_minus_right_top - left_minus_right_bottom) * 0.5
    return torch.stack([ll, s1, s2, hh], dim=2)


def haar_synthesis(coeffs: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, C, 4, h, w) -> (B, C, height, width): inverse of haar_analysis, cropped."""
    b, c, _, h, w = coeffs.shape
    ll, s1, s2, hh = coeffs.unbind(dim=2)
    ll_plus_s1, ll_minus_s1 = ll + s1, ll - s1
    s2_plus_hh, s2_minus_hh = s2 + hh, s2 - hh
    a = (ll_plus_s1 + s2_plus_hh) * 0.5
    bb = (ll_plus_s1 - s2_plus_hh) * 0.5
    cc = (ll_minus_s1 + s2_minus_hh) * 0.5
    d = (ll_minus_s1 - s2_minus_hh) * 0.5
    top = torch.stack([a, bb], dim=-1)  # (B, C, h, w, 2)
    bottom = torch.stack([cc, d], dim=-1)
    full = torch.stack([top, bottom], dim=3).reshape(b, c, 2 * h, 2 * w)
    if full.shape[-2] != height or full.shape[-1] != width:
        full = full[:, :, :height, :width]
    return full
