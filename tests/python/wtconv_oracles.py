"""Two independent float64 oracles of WTConv2d used by the tests.

- `one_pass`: DESIGN.md's closed form, every level's output indexed by output-coordinate bits.
- `level_by_level`: the original algorithm step by step: pad to even, Haar analysis as a
  stride-2 conv with the Haar filter bank, per-level depthwise conv and scale, inverse
  cascade with conv_transpose2d, crop, base conv, then the stride subsampling.

Neither uses winconv's own Haar code, so agreement between them and winconv is meaningful.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import torch
import torch.nn.functional as F


@dataclass
class WTParams:
    base_weight: torch.Tensor
    base_bias: Optional[torch.Tensor]
    base_scale: torch.Tensor
    level_weights: List[torch.Tensor]
    level_scales: List[torch.Tensor]

    def as_args(self):
        return (self.base_weight, self.base_bias, self.base_scale, self.level_weights, self.level_scales)

    def tensors(self) -> List[torch.Tensor]:
        bias = [] if self.base_bias is None else [self.base_bias]
        return [self.base_weight, *bias, self.base_scale, *self.level_weights, *self.level_scales]

    def to(self, **kwargs) -> "WTParams":
        conv = lambda t: None if t is None else t.to(**kwargs)  # noqa: E731
        return WTParams(
            conv(self.base_weight),
            conv(self.base_bias),
            conv(self.base_scale),
            [conv(w) for w in self.level_weights],
            [conv(s) for s in self.level_scales],
        )


def random_params(channels: int, k: int, levels: int, bias: bool = True, seed: int = 0,
                  dtype=torch.float64, device="cpu") -> WTParams:
    """Random parameters of every kind, scales included (never the 1 / 0.1 defaults)."""
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    params = WTParams(
        base_weight=rnd(channels, 1, k, k) / k,
        base_bias=rnd(channels) if bias else None,
        base_scale=1 + 0.5 * rnd(1, channels, 1, 1),
        level_weights=[rnd(4 * channels, 1, k, k) / k for _ in range(levels)],
        level_scales=[0.3 * rnd(1, 4 * channels, 1, 1) for _ in range(levels)],
    )
    return params.to(dtype=dtype, device=device)


def exact_haar_bank(channels: int, dtype=torch.float64) -> torch.Tensor:
    """(4C,1,2,2) Haar filters with exact halves, sub-band order LL, S1, S2, HH."""
    bank = 0.5 * torch.tensor(
        [[[1, 1], [1, 1]], [[1, 1], [-1, -1]], [[1, -1], [1, -1]], [[1, -1], [-1, 1]]], dtype=dtype
    )
    return bank[:, None].repeat(channels, 1, 1, 1)


def _base(x: torch.Tensor, p: WTParams) -> torch.Tensor:
    k = p.base_weight.shape[-1]
    return p.base_scale * F.conv2d(x, p.base_weight, p.base_bias, padding=k // 2, groups=x.shape[1])


def _level_conv(coeffs: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    b, c, _, h, w = coeffs.shape
    k = weight.shape[-1]
    z = F.conv2d(coeffs.reshape(b, 4 * c, h, w), weight, padding=k // 2, groups=4 * c) * scale
    return z.reshape(b, c, 4, h, w)


def level_by_level(x: torch.Tensor, p: WTParams, stride: int = 1) -> torch.Tensor:
    b, c, _, _ = x.shape
    bank = exact_haar_bank(c, x.dtype)
    shapes, filtered = [], []
    low = x
    for weight, scale in zip(p.level_weights, p.level_scales):
        shapes.append(low.shape[-2:])
        low = F.pad(low, (0, low.shape[-1] % 2, 0, low.shape[-2] % 2))
        coeffs = F.conv2d(low, bank, stride=2, groups=c)
        coeffs = coeffs.reshape(b, c, 4, coeffs.shape[-2], coeffs.shape[-1])
        low = coeffs[:, :, 0]
        filtered.append(_level_conv(coeffs, weight, scale))
    carry = None
    for z, (h, w) in zip(reversed(filtered), reversed(shapes)):
        if carry is not None:
            z = torch.cat([(z[:, :, 0] + carry).unsqueeze(2), z[:, :, 1:]], dim=2)
        up = F.conv_transpose2d(z.reshape(b, 4 * c, z.shape[-2], z.shape[-1]), bank, stride=2, groups=c)
        carry = up[:, :, :h, :w]
    out = _base(x, p) + carry
    return out[:, :, ::stride, ::stride]


def _haar_blocks(x: torch.Tensor) -> torch.Tensor:
    x = F.pad(x, (0, x.shape[-1] % 2, 0, x.shape[-2] % 2))
    a, b = x[..., 0::2, 0::2], x[..., 0::2, 1::2]
    c, d = x[..., 1::2, 0::2], x[..., 1::2, 1::2]
    return torch.stack([a + b + c + d, a + b - c - d, a - b + c - d, a - b - c + d], dim=2) / 2


def one_pass(x: torch.Tensor, p: WTParams, stride: int = 1) -> torch.Tensor:
    _, _, height, width = x.shape
    out = _base(x, p)
    rows = torch.arange(height)
    cols = torch.arange(width)
    low = x
    for level, (weight, scale) in enumerate(zip(p.level_weights, p.level_scales), start=1):
        coeffs = _haar_blocks(low)
        low = coeffs[:, :, 0]
        z = _level_conv(coeffs, weight, scale)
        z = z[:, :, :, rows >> level][:, :, :, :, cols >> level]  # (B, C, 4, H, W)
        sign_y = (1 - 2 * ((rows >> (level - 1)) & 1)).to(x.dtype)[:, None]
        sign_x = (1 - 2 * ((cols >> (level - 1)) & 1)).to(x.dtype)[None, :]
        out = out + 2.0 ** -level * (
            z[:, :, 0] + sign_y * z[:, :, 1] + sign_x * z[:, :, 2] + sign_y * sign_x * z[:, :, 3]
        )
    return out[:, :, ::stride, ::stride]


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative L2 error of a against b; NaN never passes a bound, a wrong shape never broadcasts."""
    assert a.shape == b.shape, f"shape {tuple(a.shape)} compared with {tuple(b.shape)}"
    a = a.double()
    b = b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()
