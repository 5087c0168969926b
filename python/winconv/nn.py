"""WTConv2d: a drop-in for the original WTConv2d module (Finder et al., ECCV 2024).

Same constructor, same parameter initialisation (the same nn.Conv2d sub-modules are built in
the same order, so a given seed gives the same weights), same parameters and state_dict keys:

    wt_filter, iwt_filter                       (4C,1,2,2) Haar filters, requires_grad=False
    base_conv.weight (C,1,k,k), base_conv.bias (C,)
    base_scale.weight (1,C,1,1)                 initialised to 1
    wavelet_convs.{l}.weight (4C,1,k,k)
    wavelet_scale.{l}.weight (1,4C,1,1)         initialised to 0.1

so a checkpoint saved from the original loads unchanged. The forward runs the fused kernels
on CUDA (eagerly through the C++ operator winconv::wtconv2d_eager or the ctypes binding, under
torch.compile through the winconv::wtconv2d_fwd/bwd operators) and the pure-PyTorch
implementation elsewhere. The stored Haar filters are not read by the computation: only
db1 is supported and it is computed in closed form, so loading checks they are Haar.
"""

from __future__ import annotations

import torch
from torch import nn

from . import ops
from ._checks import check_module_arguments
from .haar import haar_filter_bank

# Loaded wt_filter/iwt_filter must match the Haar bank this close (the original stores
# float32 products of 1/sqrt(2), i.e. 0.49999997 instead of 0.5).
HAAR_FILTER_ATOL = 1e-6


class ChannelScale(nn.Module):
    """Per-channel multiplicative scale with a single `weight` parameter of shape `dims`."""

    def __init__(self, dims, init_scale: float = 1.0):
        super().__init__()
        self.dims = list(dims)
        self.weight = nn.Parameter(torch.ones(*dims) * init_scale)
        self.bias = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x


class WTConv2d(nn.Module):
    """Wavelet convolution: a depthwise k x k conv plus per-level depthwise convs on Haar bands.

    Args:
        in_channels: channels C of input and output.
        out_channels: must equal in_channels.
        kernel_size: odd, 1..15 (default 5).
        stride: output stride >= 1; the output is the stride-1 result subsampled, of size
            ceil(H / stride) x ceil(W / stride).
        bias: whether the base conv has a bias.
        wt_levels: number of wavelet levels, 1..8.
        wt_type: only 'db1' (Haar).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 5,
        stride: int = 1,
        bias: bool = True,
        wt_levels: int = 1,
        wt_type: str = "db1",
    ):
        super().__init__()
        check_module_arguments(in_channels, out_channels, kernel_size, stride, wt_levels, wt_type)
        in_channels, out_channels, kernel_size, stride, wt_levels = map(
            int, (in_channels, out_channels, kernel_size, stride, wt_levels)
        )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.wt_levels = wt_levels
        self.wt_type = wt_type
        self.stride = stride
        self.dilation = 1

        # Registered first and in this order so that state_dict keys come out as in the original.
        self.wt_filter = nn.Parameter(haar_filter_bank(in_channels), requires_grad=False)
        self.iwt_filter = nn.Parameter(haar_filter_bank(in_channels), requires_grad=False)

        self.base_conv = nn.Conv2d(
            in_channels, in_channels, kernel_size, padding="same", stride=1, dilation=1,
            groups=in_channels, bias=bias,
        )
        self.base_scale = ChannelScale([1, in_channels, 1, 1])
        self.wavelet_convs = nn.ModuleList(
            [
                nn.Conv2d(
                    in_channels * 4, in_channels * 4, kernel_size, padding="same", stride=1,
                    dilation=1, groups=in_channels * 4, bias=False,
                )
                for _ in range(wt_levels)
            ]
        )
        self.wavelet_scale = nn.ModuleList(
            [ChannelScale([1, in_channels * 4, 1, 1], init_scale=0.1) for _ in range(wt_levels)]
        )
        self._register_load_state_dict_pre_hook(self._check_loaded_haar_filters)

    def _check_loaded_haar_filters(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        expected = haar_filter_bank(self.in_channels)
        for name in ("wt_filter", "iwt_filter"):
            key = prefix + name
            loaded = state_dict.get(key)
            if not isinstance(loaded, torch.Tensor) or loaded.is_meta or loaded.shape != expected.shape:
                continue  # missing keys and shape mismatches get load_state_dict's own errors
            deviation = (loaded.detach().to("cpu", torch.float64) - expected.double()).abs().max().item()
            if not deviation <= HAAR_FILTER_ATOL:
                raise ValueError(
                    f"WTConv2d: '{key}' in the state_dict is not the Haar (db1) filter bank "
                    f"(max abs deviation {deviation:.3g} > {HAAR_FILTER_ATOL:g}); this layer computes "
                    "only wt_type='db1' and cannot load other wavelets"
                )

    @property
    def level_weights(self):
        return [conv.weight for conv in self.wavelet_convs]

    @property
    def level_scales(self):
        return [scale.weight for scale in self.wavelet_scale]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # ops.wtconv2d checks x against the parameters (channel count, device) on every path that
        # could accept a bad one.
        return ops.wtconv2d(
            x,
            self.base_conv.weight,
            self.base_conv.bias,
            self.base_scale.weight,
            self.level_weights,
            self.level_scales,
            self.stride,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, bias={self.base_conv.bias is not None}, "
            f"wt_levels={self.wt_levels}, wt_type={self.wt_type!r}"
        )

    @classmethod
    def from_original(cls, module: nn.Module) -> "WTConv2d":
        """A WTConv2d with the parameters (copied) of an original WTConv2d instance."""
        from .convert import from_original

        return from_original(module)
