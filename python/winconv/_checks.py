"""Argument validation shared by the module and the functional entry point.

Every check names the argument, what was expected and what was given, and runs before any
kernel is launched.
"""

from __future__ import annotations

import numbers
from typing import Optional, Sequence

import torch

MAX_KERNEL_SIZE = 15
MAX_WT_LEVELS = 8
SUPPORTED_WAVELETS = ("db1", "haar")  # pywt's "haar" is the same filter bank as "db1"
INPUT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def check_module_arguments(in_channels, out_channels, kernel_size, stride, wt_levels, wt_type) -> None:
    """Constructor arguments of WTConv2d; raises ValueError (TypeError for non-integers)."""
    for name, value in (
        ("in_channels", in_channels),
        ("out_channels", out_channels),
        ("kernel_size", kernel_size),
        ("stride", stride),
        ("wt_levels", wt_levels),
    ):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # numpy ints too, as nn.Conv2d
            raise TypeError(f"WTConv2d: {name} must be an int, got {type(value).__name__} {value!r}")
    if in_channels < 1:
        raise ValueError(f"WTConv2d: in_channels must be >= 1, got {in_channels}")
    if out_channels != in_channels:
        raise ValueError(
            "WTConv2d: out_channels must equal in_channels (the layer is depthwise), "
            f"got in_channels={in_channels}, out_channels={out_channels}"
        )
    if not 1 <= kernel_size <= MAX_KERNEL_SIZE or kernel_size % 2 == 0:
        raise ValueError(
            f"WTConv2d: kernel_size must be odd and in [1, {MAX_KERNEL_SIZE}], got {kernel_size}"
        )
    if not 1 <= wt_levels <= MAX_WT_LEVELS:
        raise ValueError(f"WTConv2d: wt_levels must be in [1, {MAX_WT_LEVELS}], got {wt_levels}")
    if wt_type not in SUPPORTED_WAVELETS:
        raise ValueError(f"WTConv2d: wt_type must be 'db1' (or its alias 'haar'), the only wavelet supported, got {wt_type!r}")
    if stride < 1:
        raise ValueError(f"WTConv2d: stride must be >= 1, got {stride}")


def check_input(x, channels: int, device: torch.device) -> None:
    """The activation given to forward: a float (B, C, H, W) tensor on the parameters' device."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"WTConv2d: input must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in INPUT_DTYPES:
        raise TypeError(
            "WTConv2d: input dtype must be float32, float16, bfloat16 or float64, " f"got {x.dtype}"
        )
    if x.dim() != 4:
        raise ValueError(f"WTConv2d: input must be 4-D (B, C, H, W), got shape {tuple(x.shape)}")
    if x.shape[1] != channels:
        raise ValueError(
            f"WTConv2d: input has {x.shape[1]} channels, expected {channels} (shape {tuple(x.shape)})"
        )
    if x.shape[2] < 1 or x.shape[3] < 1:
        raise ValueError(f"WTConv2d: input height and width must be >= 1, got shape {tuple(x.shape)}")
    if x.device != device:
        raise ValueError(
            f"WTConv2d: input is on {x.device} but the parameters are on {device}; "
            "move the module or the input so that both are on the same device"
        )


def _check_param(name: str, t: torch.Tensor, shape, device: torch.device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"wtconv2d: {name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"wtconv2d: {name} must be a floating-point tensor, got {t.dtype}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"wtconv2d: {name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"wtconv2d: {name} is on {t.device} but the input is on {device}")


def check_parameters(
    x: torch.Tensor,
    base_weight: torch.Tensor,
    base_bias: Optional[torch.Tensor],
    base_scale: torch.Tensor,
    level_weights: Sequence[torch.Tensor],
    level_scales: Sequence[torch.Tensor],
    stride: int,
) -> None:
    """Shapes of the parameters against the input, as the original module lays them out."""
    if not isinstance(base_weight, torch.Tensor) or base_weight.dim() != 4 or base_weight.shape[1] != 1 or (
        base_weight.shape[2] != base_weight.shape[3]
    ):
        got = tuple(base_weight.shape) if isinstance(base_weight, torch.Tensor) else type(base_weight).__name__
        raise ValueError(f"wtconv2d: base_weight must be a (C, 1, k, k) tensor, got {got}")
    c, k = base_weight.shape[0], base_weight.shape[-1]
    check_input(x, c, base_weight.device)
    if not 1 <= k <= MAX_KERNEL_SIZE or k % 2 == 0:
        raise ValueError(f"wtconv2d: kernel size must be odd and in [1, {MAX_KERNEL_SIZE}], got {k}")
    _check_param("base_weight", base_weight, (c, 1, k, k), x.device)
    if base_bias is not None:
        _check_param("base_bias", base_bias, (c,), x.device)
    _check_param("base_scale", base_scale, (1, c, 1, 1), x.device)
    if len(level_weights) != len(level_scales):
        raise ValueError(
            f"wtconv2d: got {len(level_weights)} level weights but {len(level_scales)} level scales"
        )
    if not 1 <= len(level_weights) <= MAX_WT_LEVELS:
        raise ValueError(f"wtconv2d: number of levels must be in [1, {MAX_WT_LEVELS}], got {len(level_weights)}")
    for i, (w, s) in enumerate(zip(level_weights, level_scales)):
        _check_param(f"level_weights[{i}]", w, (4 * c, 1, k, k), x.device)
        _check_param(f"level_scales[{i}]", s, (1, 4 * c, 1, 1), x.device)
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"wtconv2d: stride must be an int >= 1, got {stride!r}")
