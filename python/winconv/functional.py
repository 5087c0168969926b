"""Pure-PyTorch WTConv2d forward and backward with the original module's exact semantics.

Used for CPU tensors, for float64, and as the fallback when the compiled library is not
available. Everything is vectorised over batch, channels and pixels; the only Python loop
runs over the (at most 8) wavelet levels.

Notation (see DESIGN.md): X_0 = x, Y_l = Haar(pad(X_{l-1})) with sub-bands [LL, S1, S2, HH],
X_l = Y_l[LL], Z_l = s_l * (W_l conv Y_l). The wavelet branch is the inverse cascade
R_{L+1} = 0, R_l = crop(Synth(Z_l + R_{l+1} at LL)), and

    y = (s_0 * (W_0 conv x + b) + R_1)[..., ::stride, ::stride]

Compute precision: float64 inputs are computed in float64, everything else in float32 (the
fused kernels also accumulate in float32); the result has the input's dtype. Parameter
gradients have the parameters' dtype.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from .haar import haar_analysis, haar_synthesis


def output_size(size: int, stride: int) -> int:
    """Spatial output size for a stride: ceil(size / stride), as out[::stride] gives."""
    return (size + stride - 1) // stride


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _depthwise_conv(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """'same' zero-padded depthwise convolution with an odd square kernel."""
    pad = int(weight.shape[-1]) // 2  # a kernel size is static: concrete even under symbolic tracing
    return F.conv2d(x, weight, bias, stride=1, padding=pad, groups=x.shape[1])


def _depthwise_conv_backward(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, with_bias: bool
) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """Gradients of _depthwise_conv w.r.t. (input, weight, bias) in one aten call."""
    pad = int(weight.shape[-1]) // 2  # a kernel size is static: concrete even under symbolic tracing
    grad_x, grad_w, grad_b = torch.ops.aten.convolution_backward(
        grad_out,
        x,
        weight,
        [weight.shape[0]] if with_bias else None,
        [1, 1],
        [pad, pad],
        [1, 1],
        False,
        [0, 0],
        x.shape[1],
        [True, True, with_bias],
    )
    return grad_x, grad_w, grad_b


def _as_compute(t: Optional[torch.Tensor], dtype: torch.dtype) -> Optional[torch.Tensor]:
    return None if t is None else t.to(dtype)


def _analysis_chain(x: torch.Tensor, levels: int) -> List[torch.Tensor]:
    """Y_1..Y_L, each (B, C, 4, h_l, w_l): the Haar cascade of the raw LL bands."""
    coeffs = []
    current = x
    for _ in range(levels):
        y_l = haar_analysis(current)
        coeffs.append(y_l)
        current = y_l[:, :, 0]
    return coeffs


def _level_conv(y_l: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """W_l conv Y_l on the (B, 4C, h, w) view, channel 4c+s = sub-band s of channel c."""
    b, c, _, h, w = y_l.shape
    return _depthwise_conv(y_l.reshape(b, 4 * c, h, w), weight)


def wtconv2d_forward(
    x: torch.Tensor,
    base_weight: torch.Tensor,
    base_bias: Optional[torch.Tensor],
    base_scale: torch.Tensor,
    level_weights: Sequence[torch.Tensor],
    level_scales: Sequence[torch.Tensor],
    stride: int = 1,
) -> torch.Tensor:
    """WTConv2d forward. Differentiable by autograd as well (used to cross-check backward)."""
    out_dtype = x.dtype
    dtype = compute_dtype(x.dtype)
    x = x.to(dtype)
    b, c, h, w = x.shape

    residual = None  # R_{l+1}: synthesis of the levels below the current one
    coeffs = _analysis_chain(x, len(level_weights))
    for level in range(len(level_weights) - 1, -1, -1):
        y_l = coeffs[level]
        z_l = _level_conv(y_l, level_weights[level].to(dtype)) * level_scales[level].to(dtype)
        z_l = z_l.reshape(y_l.shape)
        if residual is not None:
            # z_l is a fresh tensor; adding in place avoids copying all four sub-bands.
            z_l[:, :, 0] += residual
        parent = x if level == 0 else coeffs[level - 1][:, :, 0]
        residual = haar_synthesis(z_l, parent.shape[-2], parent.shape[-1])

    out = _depthwise_conv(x, base_weight.to(dtype), _as_compute(base_bias, dtype)) * base_scale.to(dtype)
    if residual is not None:
        out = out + residual
    if stride > 1:
        out = out[:, :, ::stride, ::stride]
    return out.to(out_dtype)


def _unstride(grad_y: torch.Tensor, height: int, width: int, stride: int) -> torch.Tensor:
    """Adjoint of out[..., ::stride, ::stride]: scatter into a zero full-resolution map."""
    if stride == 1:
        return grad_y
    full = grad_y.new_zeros(grad_y.shape[0], grad_y.shape[1], height, width)
    full[:, :, ::stride, ::stride] = grad_y
    return full


def wtconv2d_backward(
    grad_y: torch.Tensor,
    x: torch.Tensor,
    base_weight: torch.Tensor,
    base_bias: Optional[torch.Tensor],
    base_scale: torch.Tensor,
    level_weights: Sequence[torch.Tensor],
    level_scales: Sequence[torch.Tensor],
    stride: int = 1,
) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], torch.Tensor, List[torch.Tensor], List[torch.Tensor]]:
    """Explicit WTConv2d backward (DESIGN.md's formulas), recomputing what forward made.

    Returns (grad_x, grad_base_weight, grad_base_bias or None, grad_base_scale,
    [grad_level_weight_l], [grad_level_scale_l]).
    """
    x_dtype = x.dtype
    dtype = compute_dtype(x.dtype)
    x = x.to(dtype)
    _, c, h, w = x.shape
    g = _unstride(grad_y.to(dtype), h, w, stride)
    levels = len(level_weights)

    # Base branch: y_base = s0 * (W0 conv x + b).
    w0 = base_weight.to(dtype)
    s0 = base_scale.to(dtype)
    base_pre_scale = _depthwise_conv(x, w0, _as_compute(base_bias, dtype))
    grad_base_scale = (base_pre_scale * g).sum(dim=(0, 2, 3)).reshape(base_scale.shape)
    grad_x, grad_w0, grad_b0 = _depthwise_conv_backward(g * s0, x, w0, base_bias is not None)

    # The gradient reaching Z_l is the forward Haar cascade of g: G_1 = Haar(g), G_l = Haar(G_{l-1}[LL]).
    grad_z = _analysis_chain(g, levels)
    coeffs = _analysis_chain(x, levels)

    grad_level_weights: List[torch.Tensor] = [None] * levels  # type: ignore[list-item]
    grad_level_scales: List[torch.Tensor] = [None] * levels  # type: ignore[list-item]
    grad_ll = None  # dX_l arriving from level l+1, added to the LL band of dY_l
    for level in range(levels - 1, -1, -1):
        y_l = coeffs[level]
        bsz, _, _, hl, wl = y_l.shape
        y_flat = y_l.reshape(bsz, 4 * c, hl, wl)
        g_flat = grad_z[level].reshape(bsz, 4 * c, hl, wl)
        w_l = level_weights[level].to(dtype)
        s_l = level_scales[level].to(dtype)
        conv_l = _depthwise_conv(y_flat, w_l)
        grad_level_scales[level] = (conv_l * g_flat).sum(dim=(0, 2, 3)).reshape(level_scales[level].shape)
        grad_y_l, grad_w_l, _ = _depthwise_conv_backward(g_flat * s_l, y_flat, w_l, False)
        grad_level_weights[level] = grad_w_l
        grad_y_l = grad_y_l.reshape(y_l.shape)
        if grad_ll is not None:
            grad_y_l[:, :, 0] += grad_ll
        parent = x if level == 0 else coeffs[level - 1][:, :, 0]
        grad_ll = haar_synthesis(grad_y_l, parent.shape[-2], parent.shape[-1])

    if grad_ll is not None:
        grad_x = grad_x + grad_ll

    return (
        grad_x.to(x_dtype),
        grad_w0.to(base_weight.dtype),
        None if base_bias is None else grad_b0.to(base_bias.dtype),
        grad_base_scale.to(base_scale.dtype),
        [gw.to(wl.dtype) for gw, wl in zip(grad_level_weights, level_weights)],
        [gs.to(sl.dtype) for gs, sl in zip(grad_level_scales, level_scales)],
    )
