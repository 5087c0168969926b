"""WTConv2d as registered PyTorch operators: winconv::wtconv2d_fwd and winconv::wtconv2d_bwd.

Each op has a real implementation per device (the fused kernels for CUDA, the pure-PyTorch
path everywhere else), a fake kernel for shape propagation (torch.compile, meta tensors) and
an autograd formula, so the layer traces with torch.compile(fullgraph=True) and captures into
CUDA graphs. Parameters are passed the way the original module holds them: base weight
(C,1,k,k), bias (C,) or None, base scale (1,C,1,1), and one (4C,1,k,k) weight and one
(1,4C,1,1) scale per level as Tensor[] lists.

`wtconv2d(...)` is the user-facing function: it validates, applies autocast to the input
only (parameters stay as they are, normally float32) and calls the forward op.
"""

from __future__ import annotations

import contextlib
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import functional
from ._checks import check_parameters
from ._native_loader import native_module, warn_fallback_once
from ._torch_ops import eager_op

_NATIVE_INPUT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _native_for(x: Tensor):
    """The native module when the fused kernels can take this input, else None."""
    if x.dtype not in _NATIVE_INPUT_DTYPES or x.numel() == 0:
        return None  # float64 and empty batches use the reference path by design
    native = native_module()
    if native is None:
        warn_fallback_once()
    return native


def _fp32_contiguous(t: Optional[Tensor]) -> Optional[Tensor]:
    # The kernels take float32 parameters; a module converted with .half() still works.
    return None if t is None else t.to(torch.float32).contiguous()


def _empty_bias_grad(like: Tensor) -> Tensor:
    # Tensor? is not a supported custom-op return type: "no bias" travels as a 0-element tensor.
    return like.new_empty((0,))


def _autocast_off(device_type: str):
    """The reference path chooses its own precision (float32 accumulation): autocast, still
    active inside an op's implementation, must not recast its convolutions."""
    if device_type in ("cpu", "cuda"):
        return torch.autocast(device_type=device_type, enabled=False)
    return contextlib.nullcontext()


def _reference_fwd(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride):
    with _autocast_off(x.device.type):
        return functional.wtconv2d_forward(
            x, base_weight, base_bias, base_scale, level_weights, level_scales, stride
        ).contiguous()


def _reference_bwd(grad_y, x, base_weight, base_bias, base_scale, level_weights, level_scales, stride):
    with _autocast_off(x.device.type):
        gx, gw0, gb0, gs0, gws, gss = functional.wtconv2d_backward(
            grad_y, x, base_weight, base_bias, base_scale, level_weights, level_scales, stride
        )
    return gx.contiguous(), gw0, (_empty_bias_grad(gw0) if gb0 is None else gb0), gs0, gws, gss


# ---------------------------------------------------------------------------------------
# Forward op


@torch.library.custom_op("winconv::wtconv2d_fwd", mutates_args=())
def wtconv2d_fwd(
    x: Tensor,
    base_weight: Tensor,
    base_bias: Optional[Tensor],
    base_scale: Tensor,
    level_weights: List[Tensor],
    level_scales: List[Tensor],
    stride: int,
) -> Tensor:
    """Reference implementation, used for every device without a dedicated kernel."""
    return _reference_fwd(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride)


@wtconv2d_fwd.register_kernel("cuda")
def _wtconv2d_fwd_cuda(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride):
    native = _native_for(x)
    if native is None:
        return _reference_fwd(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride)
    return native.wtconv2d_forward(
        x.contiguous(),
        _fp32_contiguous(base_weight),
        _fp32_contiguous(base_bias),
        _fp32_contiguous(base_scale),
        [_fp32_contiguous(w) for w in level_weights],
        [_fp32_contiguous(s) for s in level_scales],
        stride,
    )


@wtconv2d_fwd.register_fake
def _wtconv2d_fwd_fake(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride):
    b, c, h, w = x.shape
    return x.new_empty((b, c, functional.output_size(h, stride), functional.output_size(w, stride)))


# ---------------------------------------------------------------------------------------
# Backward op


@torch.library.custom_op("winconv::wtconv2d_bwd", mutates_args=())
def wtconv2d_bwd(
    grad_y: Tensor,
    x: Tensor,
    base_weight: Tensor,
    base_bias: Optional[Tensor],
    base_scale: Tensor,
    level_weights: List[Tensor],
    level_scales: List[Tensor],
    stride: int,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, List[Tensor], List[Tensor]]:
    """Returns (grad_x, grad_base_weight, grad_base_bias or a 0-element tensor when there is
    no bias, grad_base_scale, grad_level_weights, grad_level_scales)."""
    return _reference_bwd(grad_y, x, base_weight, base_bias, base_scale, level_weights, level_scales, stride)


@wtconv2d_bwd.register_kernel("cuda")
def _wtconv2d_bwd_cuda(grad_y, x, base_weight, base_bias, base_scale, level_weights, level_scales, stride):
    native = _native_for(x)
    if native is None or grad_y.dtype != x.dtype:
        return _reference_bwd(grad_y, x, base_weight, base_bias, base_scale, level_weights, level_scales, stride)
    gx, gw0, gb0, gs0, gws, gss = native.wtconv2d_backward(
        grad_y.contiguous(),
        x.contiguous(),
        _fp32_contiguous(base_weight),
        _fp32_contiguous(base_bias),
        _fp32_contiguous(base_scale),
        [_fp32_contiguous(w) for w in level_weights],
        [_fp32_contiguous(s) for s in level_scales],
        stride,
    )
    # Parameter gradients come back in float32; hand them back in each parameter's dtype.
    gb0 = _empty_bias_grad(gw0) if gb0 is None else gb0.to(base_bias.dtype)
    return (
        gx,
        gw0.to(base_weight.dtype),
        gb0,
        gs0.to(base_scale.dtype),
        [g.to(w.dtype) for g, w in zip(gws, level_weights)],
        [g.to(s.dtype) for g, s in zip(gss, level_scales)],
    )


@wtconv2d_bwd.register_fake
def _wtconv2d_bwd_fake(grad_y, x, base_weight, base_bias, base_scale, level_weights, level_scales, stride):
    return (
        x.new_empty(x.shape),
        base_weight.new_empty(base_weight.shape),
        base_weight.new_empty((0,)) if base_bias is None else base_bias.new_empty(base_bias.shape),
        base_scale.new_empty(base_scale.shape),
        [w.new_empty(w.shape) for w in level_weights],
        [s.new_empty(s.shape) for s in level_scales],
    )


# ---------------------------------------------------------------------------------------
# Autograd: forward saves its inputs, backward is one call of the backward op.


def _setup_context(ctx, inputs, output):
    x, base_weight, base_bias, base_scale, level_weights, level_scales, stride = inputs
    ctx.levels = len(level_weights)
    ctx.stride = stride
    ctx.has_bias = base_bias is not None
    ctx.save_for_backward(x, base_weight, base_bias, base_scale, *level_weights, *level_scales)


def _backward(ctx, grad_y):
    x, base_weight, base_bias, base_scale, *levels = ctx.saved_tensors
    level_weights, level_scales = levels[: ctx.levels], levels[ctx.levels :]
    gx, gw0, gb0, gs0, gws, gss = wtconv2d_bwd(
        grad_y.contiguous(), x, base_weight, base_bias, base_scale, level_weights, level_scales, ctx.stride
    )
    return gx, gw0, (gb0 if ctx.has_bias else None), gs0, list(gws), list(gss), None


wtconv2d_fwd.register_autograd(_backward, setup_context=_setup_context)


# ---------------------------------------------------------------------------------------
# Second derivatives (backward with create_graph=True, e.g. a gradient penalty). The backward op
# is differentiated by recomputing the reference backward, which is built from differentiable
# PyTorch ops and is the same function of its inputs as the kernels: its vector-Jacobian product
# at the saved inputs. Every path's backward reaches this op when the graph is being recorded.


def _setup_bwd_context(ctx, inputs, output):
    grad_y, x, base_weight, base_bias, base_scale, level_weights, level_scales, stride = inputs
    ctx.levels = len(level_weights)
    ctx.stride = stride
    ctx.save_for_backward(grad_y, x, base_weight, base_bias, base_scale, *level_weights, *level_scales)


def _double_backward(ctx, *output_grads):
    grad_y, x, base_weight, base_bias, base_scale, *levels = ctx.saved_tensors
    n = ctx.levels
    has_bias = base_bias is not None
    ggx, ggw0, ggb0, ggs0, ggws, ggss = output_grads

    def backward_outputs(gy, x, w0, s0, *rest):
        b0 = rest[-1] if has_bias else None
        gx, gw0, gb0, gs0, gws, gss = functional.wtconv2d_backward(gy, x, w0, b0, s0, rest[:n], rest[n : 2 * n],
                                                                     ctx.stride)
        return (gx, gw0, gs0, *gws, *gss) + ((gb0,) if has_bias else ())

    # torch.func.vjp takes the partial derivatives in each input (grad_y depends on x in the
    # caller's graph; that path is autograd's, not this op's), and its result is itself recorded
    # by autograd when a graph is being built, so third and higher orders work as well.
    primals = (grad_y, x, base_weight, base_scale, *levels) + ((base_bias,) if has_bias else ())
    with _autocast_off(x.device.type):
        outputs, vjp = torch.func.vjp(backward_outputs, *primals)
        given = (ggx, ggw0, ggs0, *(ggws or [None] * n), *(ggss or [None] * n)) + ((ggb0,) if has_bias else ())
        cotangents = tuple(torch.zeros_like(o) if g is None else g for o, g in zip(outputs, given))
        grads = vjp(cotangents)
    d_gy, d_x, d_w0, d_s0 = grads[:4]
    return (d_gy, d_x, d_w0, grads[-1] if has_bias else None, d_s0, list(grads[4 : 4 + n]),
            list(grads[4 + n : 4 + 2 * n]), None)


wtconv2d_bwd.register_autograd(_double_backward, setup_context=_setup_bwd_context)


# ---------------------------------------------------------------------------------------
# Eager fast paths. Outside torch.compile, a CUDA call with the fused kernels skips the custom-op
# dispatch layers above, whose host overhead would dominate the small WTConvNeXt shapes:
# 1. torch.ops.winconv.wtconv2d_eager (src/torch/), whose checks, allocations, launches and
#    autograd node are all C++, when the operator library for this torch is built;
# 2. otherwise the autograd.Function below, straight to the ctypes binding.
# Both run the same kernels with the same arguments. torch.compile traces the ops above.


class _NativeWtconv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, native, stride, has_bias, levels, x, base_weight, base_bias, base_scale, *level_params):
        level_weights, level_scales = list(level_params[:levels]), list(level_params[levels:])
        ctx.native, ctx.stride, ctx.has_bias, ctx.levels = native, stride, has_bias, levels
        x = x.contiguous()  # the kernels read NCHW: a channels-last x is converted, never misread
        ctx.save_for_backward(x, base_weight, base_bias, base_scale, *level_params)
        # wtconv2d() validated every argument with check_parameters just before.
        return native.wtconv2d_forward(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride,
                                       checked=True)

    @staticmethod
    def backward(ctx, grad_y):
        x, base_weight, base_bias, base_scale, *level_params = ctx.saved_tensors
        levels = ctx.levels
        if torch.is_grad_enabled():  # create_graph=True: the backward op, whose own derivative autograd records
            gx, gw0, gb0, gs0, gws, gss = wtconv2d_bwd(
                grad_y.contiguous(), x, base_weight, base_bias, base_scale, list(level_params[:levels]),
                list(level_params[levels:]), ctx.stride)
            return (None, None, None, None, gx, gw0, gb0 if ctx.has_bias else None, gs0, *gws, *gss)
        gx, gw0, gb0, gs0, gws, gss = ctx.native.wtconv2d_backward(
            grad_y.contiguous(), x, base_weight, base_bias, base_scale, list(level_params[:levels]),
            list(level_params[levels:]), ctx.stride, checked=True)
        return (None, None, None, None, gx, gw0, gb0 if ctx.has_bias else None, gs0, *gws, *gss)


def _eager_eligible(x, params) -> bool:
    """Whether the fused kernels can take this call eagerly: a CUDA input of a kernel dtype,
    contiguous float32 parameters, not under torch.compile or TorchScript tracing (checked first:
    torch.compile must not trace into the library loaders). Safe on unchecked arguments (anything
    that is not a tensor makes the call ineligible)."""
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False
    if not isinstance(x, Tensor) or not x.is_cuda or x.dtype not in _NATIVE_INPUT_DTYPES or x.numel() == 0:
        return False
    return all(p is None or (isinstance(p, Tensor) and p.dtype == torch.float32 and p.is_contiguous())
               for p in params)


# ---------------------------------------------------------------------------------------
# User-facing entry point


def _autocast_dtype(device_type: str) -> Optional[torch.dtype]:
    """The autocast dtype active for this device type, or None."""
    try:
        if torch.is_autocast_enabled(device_type):
            return torch.get_autocast_dtype(device_type)
        return None
    except RuntimeError:  # a device type without autocast (meta, ...)
        return None
    except TypeError:  # PyTorch < 2.4 has only the per-device getters
        if device_type == "cuda" and torch.is_autocast_enabled():
            return torch.get_autocast_gpu_dtype()
        if device_type == "cpu" and torch.is_autocast_cpu_enabled():
            return torch.get_autocast_cpu_dtype()
        return None


def _autocast_input(x: Tensor) -> Tensor:
    """The activation in the autocast dtype when autocast is on (float64 stays float64)."""
    cast_to = _autocast_dtype(x.device.type)
    if cast_to is not None and x.dtype != torch.float64 and x.dtype != cast_to:
        return x.to(cast_to)
    return x


def _eager_operator_call(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride):
    """The common eager call straight to the C++ operator, or None when this call is not it.

    The common call: a CUDA activation of a kernel dtype, contiguous float32 parameters, the
    operator library loaded, not under torch.compile or TorchScript tracing. At the WTConvNeXt
    shapes a training step's host time exceeds its GPU time, and checking every parameter in
    Python first was a tenth of that host time (docs/wtconv.md, note 43). The operator validates
    every argument itself before it allocates or launches, so here only what decides the path is
    looked at; when the operator refuses the call, check_parameters names the fault with the same
    ValueError / TypeError as every other path (and the operator's error stands if it finds none).
    """
    if isinstance(stride, bool) or not isinstance(stride, int):  # check_parameters' rule, not the schema's
        return None
    if not _eager_eligible(x, (base_weight, base_bias, base_scale, *level_weights, *level_scales)):
        return None
    op = eager_op()
    if op is None:
        return None
    x = _autocast_input(x).contiguous()
    try:
        return op(x, base_weight, base_bias, base_scale, list(level_weights), list(level_scales), stride)
    except (RuntimeError, TypeError):
        check_parameters(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride)
        raise


def wtconv2d(
    x: Tensor,
    base_weight: Tensor,
    base_bias: Optional[Tensor],
    base_scale: Tensor,
    level_weights: Sequence[Tensor],
    level_scales: Sequence[Tensor],
    stride: int = 1,
) -> Tensor:
    """WTConv2d with explicit parameters (shapes as in the original module), differentiable.

    Under torch.autocast the activation runs in the autocast dtype, as a convolution would,
    while the parameters and the kernels' accumulation stay in float32.
    """
    y = _eager_operator_call(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride)
    if y is not None:
        return y
    # Checked here, in Python, for every other path: the operators then only ever see valid
    # arguments, and every path raises the same ValueError / TypeError for a bad one.
    check_parameters(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride)
    x = _autocast_input(x).contiguous()
    # An eligible call reaches here only without the operator library (_eager_operator_call took
    # it otherwise): the ctypes binding runs the same kernels.
    if _eager_eligible(x, (base_weight, base_bias, base_scale, *level_weights, *level_scales)):
        native = native_module()
        if native is not None:
            return _NativeWtconv2d.apply(native, stride, base_bias is not None, len(level_weights), x, base_weight,
                                         base_bias, base_scale, *level_weights, *level_scales)
    return wtconv2d_fwd(x, base_weight, base_bias, base_scale, list(level_weights), list(level_scales), stride)
