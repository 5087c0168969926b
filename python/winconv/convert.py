"""Conversion of models built with the original WTConv2d to winconv.nn.WTConv2d.

Recognises original layers by their structure (attributes wt_filter, iwt_filter, base_conv,
base_scale, wavelet_convs, wavelet_scale), so neither the original package nor pywt need to
be importable here.
"""

from __future__ import annotations

from torch import nn

from .nn import WTConv2d

_ORIGINAL_ATTRIBUTES = ("wt_filter", "iwt_filter", "base_conv", "base_scale", "wavelet_convs", "wavelet_scale")


def is_original_wtconv(module: nn.Module) -> bool:
    """True for modules laid out like the original WTConv2d (and not already ours)."""
    return (
        not isinstance(module, WTConv2d)
        and all(hasattr(module, name) for name in _ORIGINAL_ATTRIBUTES)
        and isinstance(module.base_conv, nn.Conv2d)  # not the original WTConv1d (same attribute names)
    )


def from_original(module: nn.Module) -> WTConv2d:
    """A new WTConv2d holding copies of `module`'s parameters, on its device and dtype."""
    base_conv = module.base_conv
    channels = base_conv.in_channels
    converted = WTConv2d(
        channels,
        channels,
        kernel_size=base_conv.kernel_size[0],
        stride=int(getattr(module, "stride", 1)),
        bias=base_conv.bias is not None,
        wt_levels=len(module.wavelet_convs),
    )
    converted.to(device=base_conv.weight.device, dtype=base_conv.weight.dtype)
    converted.load_state_dict(module.state_dict())
    converted.train(module.training)
    return converted


def convert_wtconv(model: nn.Module) -> nn.Module:
    """Replace every original WTConv2d inside `model` (or `model` itself) by winconv's.

    Returns the converted model; sub-modules are replaced in place.
    """
    if is_original_wtconv(model):
        return from_original(model)
    for name, child in list(model.named_children()):
        if is_original_wtconv(child):
            setattr(model, name, from_original(child))
        else:
            convert_wtconv(child)
    return model
