"""The registered operators on CPU: schema/fake/autograd checks, torch.compile, autocast."""

from __future__ import annotations

import pytest
import torch

import winconv
from winconv import functional
from wtconv_oracles import one_pass, random_params, rel_l2


def _op_args(x, p, stride):
    return (x, p.base_weight, p.base_bias, p.base_scale, list(p.level_weights), list(p.level_scales), stride)


@pytest.mark.parametrize("bias,stride", [(True, 1), (False, 2)])
def test_opcheck_forward_and_backward_ops(bias, stride):
    x = torch.randn(2, 3, 7, 6, requires_grad=True)
    p = random_params(3, 3, 2, bias=bias, dtype=torch.float32)
    for t in p.tensors():
        t.requires_grad_(True)
    torch.library.opcheck(torch.ops.winconv.wtconv2d_fwd.default, _op_args(x, p, stride))
    # The backward op has an autograd formula of its own (second derivatives): inputs with grad.
    grad_y = torch.randn(2, 3, -(-7 // stride), -(-6 // stride), requires_grad=True)
    bwd_args = (grad_y, *_op_args(x, p, stride))
    dynamic = "test_aot_dispatch_dynamic"
    try:
        torch.library.opcheck(torch.ops.winconv.wtconv2d_bwd.default, bwd_args)
    except Exception as exc:  # noqa: BLE001 - only the one known failure is excused, below
        # PyTorch 2.11's autograd engine calls numel() on a symbolic tensor when AOT autograd
        # traces the second derivative with dynamic shapes (seen on the GPU machine; 2.15 passes).
        # Every other check must pass, and any other failure fails the test.
        if dynamic not in str(exc) or "Cannot call numel() on tensor with symbolic sizes" not in str(exc):
            raise
        torch.library.opcheck(torch.ops.winconv.wtconv2d_bwd.default, bwd_args,
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
        pytest.xfail(f"torch {torch.__version__}: {dynamic} of the second derivative (numel on a symbolic tensor)")


def test_fake_kernels_give_real_shapes_and_dtypes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    c, k, levels = 3, 5, 3
    with FakeTensorMode():
        x = torch.empty(2, c, 13, 9, dtype=torch.bfloat16)
        params = (
            torch.empty(c, 1, k, k),
            torch.empty(c),
            torch.empty(1, c, 1, 1),
            [torch.empty(4 * c, 1, k, k) for _ in range(levels)],
            [torch.empty(1, 4 * c, 1, 1) for _ in range(levels)],
        )
        y = torch.ops.winconv.wtconv2d_fwd(x, *params, 2)
        assert y.shape == (2, c, 7, 5) and y.dtype == torch.bfloat16
        grads = torch.ops.winconv.wtconv2d_bwd(y, x, *params, 2)
        assert grads[0].shape == x.shape and grads[0].dtype == torch.bfloat16
        assert grads[1].dtype == torch.float32 and grads[2].shape == (c,)
        assert [g.shape for g in grads[4]] == [(4 * c, 1, k, k)] * levels


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph_forward_and_backward(backend):
    torch._dynamo.reset()
    layer = winconv.WTConv2d(3, 3, kernel_size=3, wt_levels=2, stride=2)
    reference = winconv.WTConv2d(3, 3, kernel_size=3, wt_levels=2, stride=2)
    reference.load_state_dict(layer.state_dict())
    x = torch.randn(2, 3, 9, 10)
    x_ref = x.clone().requires_grad_(True)
    x = x.requires_grad_(True)

    # fullgraph covers the forward; AOTAutograd builds the backward graph from the op's
    # registered autograd formula and the backward op's fake kernel.
    compiled = torch.compile(layer, fullgraph=True, backend=backend)
    y = compiled(x)
    y.square().mean().backward()
    y_ref = reference(x_ref)
    y_ref.square().mean().backward()
    assert rel_l2(y, y_ref) < 1e-6
    assert rel_l2(x.grad, x_ref.grad) < 1e-6
    for p, q in zip(layer.parameters(), reference.parameters()):
        if p.requires_grad:
            assert rel_l2(p.grad, q.grad) < 1e-6


def test_torch_compile_graph_contains_the_custom_ops():
    torch._dynamo.reset()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    layer = winconv.WTConv2d(2, 2, wt_levels=1)
    torch.compile(layer, fullgraph=True, backend=backend)(torch.randn(1, 2, 6, 6))
    assert any("wtconv2d_fwd" in target for target in seen), seen


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cpu_autocast_runs_activations_in_autocast_dtype(dtype):
    layer = winconv.WTConv2d(4, 4, kernel_size=5, wt_levels=2)
    x = torch.randn(2, 4, 10, 7, requires_grad=True)
    with torch.autocast("cpu", dtype=dtype):
        y = layer(x)
    assert y.dtype == dtype
    assert layer.base_conv.weight.dtype == torch.float32
    expected = functional.wtconv2d_forward(x.detach().to(dtype).double(), *[
        t for t in (layer.base_conv.weight.double(), layer.base_conv.bias.double(), layer.base_scale.weight.double())
    ], [w.double() for w in layer.level_weights], [s.double() for s in layer.level_scales])
    assert rel_l2(y, expected) < 1e-2
    y.float().sum().backward()
    assert x.grad.dtype == torch.float32 and layer.base_conv.weight.grad.dtype == torch.float32


def test_float64_module_and_params_in_half_precision():
    x = torch.randn(1, 2, 6, 5, dtype=torch.float64)
    p = random_params(2, 3, 2)
    expected = one_pass(x, p)
    y = winconv.wtconv2d(x.float(), *p.to(dtype=torch.bfloat16).as_args())
    assert y.dtype == torch.float32
    assert rel_l2(y, one_pass(x, p.to(dtype=torch.bfloat16).to(dtype=torch.float64))) < 1e-6
    assert rel_l2(winconv.wtconv2d(x, *p.as_args()), expected) < 1e-14


def test_autocast_does_not_recast_inside_the_op():
    """Under autocast the result equals running on the autocast-dtype input without autocast,
    eagerly and compiled: only the input is cast, the computation keeps float32 accumulation."""
    torch._dynamo.reset()
    layer = winconv.WTConv2d(3, 3, kernel_size=3, wt_levels=2)
    x = torch.randn(2, 3, 9, 8)
    expected = layer(x.to(torch.bfloat16))
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager = layer(x)
        traced = compiled(x)
    assert torch.equal(eager, expected) and torch.equal(traced, expected)


def test_half_precision_inputs_are_computed_in_float32():
    x = torch.randn(2, 3, 9, 7, generator=torch.Generator().manual_seed(0))
    p = random_params(3, 5, 3, dtype=torch.float32)
    for dtype in (torch.float16, torch.bfloat16):
        xh = x.to(dtype)
        y = functional.wtconv2d_forward(xh, *p.as_args(), 1)
        assert torch.equal(y, functional.wtconv2d_forward(xh.float(), *p.as_args(), 1).to(dtype))


def test_backward_returns_gradients_in_each_parameters_dtype():
    """The backward op's outputs match its fake kernel's dtypes (the input's for dx, each
    parameter's for its gradient), which autograd would otherwise hide by casting."""
    x = torch.randn(1, 2, 7, 5)
    p = random_params(2, 3, 2, bias=True, dtype=torch.bfloat16)
    gx, gw0, gb0, gs0, gws, gss = functional.wtconv2d_backward(torch.randn(1, 2, 7, 5), x, *p.as_args(), 1)
    assert gx.dtype == torch.float32
    assert gw0.dtype == gb0.dtype == gs0.dtype == torch.bfloat16
    assert all(g.dtype == torch.bfloat16 for g in gws + gss)


def test_cuda_kernel_glue_with_a_stub_native_module(monkeypatch):
    """The CUDA implementations hand the native module float32 contiguous parameters, map a
    missing bias gradient to the op's 0-element convention and return gradients in each
    parameter's dtype. Exercised on CPU with a stand-in for the native module."""
    import types

    from winconv import ops

    calls = []

    def forward(x, w0, b0, s0, ws, ss, stride):
        for t in (w0, s0, *ws, *ss) + (() if b0 is None else (b0,)):
            assert t.dtype == torch.float32 and t.is_contiguous()
        calls.append("fwd")
        return functional.wtconv2d_forward(x, w0, b0, s0, ws, ss, stride)

    def backward(gy, x, w0, b0, s0, ws, ss, stride):
        calls.append("bwd")
        gx, gw0, gb0, gs0, gws, gss = functional.wtconv2d_backward(gy, x, w0, b0, s0, ws, ss, stride)
        # The kernels return every parameter gradient in float32.
        return gx, gw0.float(), None if gb0 is None else gb0.float(), gs0.float(), [g.float() for g in gws], [
            g.float() for g in gss]

    monkeypatch.setattr(ops, "native_module", lambda: types.SimpleNamespace(
        wtconv2d_forward=forward, wtconv2d_backward=backward))
    p = random_params(2, 3, 2, bias=False, dtype=torch.float16)
    x = torch.randn(1, 2, 7, 5, dtype=torch.bfloat16)
    y = ops._wtconv2d_fwd_cuda(*_op_args(x, p, 2))
    assert y.dtype == torch.bfloat16 and y.shape == (1, 2, 4, 3)
    gx, gw0, gb0, gs0, gws, gss = ops._wtconv2d_bwd_cuda(torch.randn_like(y), *_op_args(x, p, 2))
    assert calls == ["fwd", "bwd"]
    assert gx.dtype == torch.bfloat16 and gw0.dtype == torch.float16 and gb0.numel() == 0
    assert all(g.dtype == torch.float16 for g in gws + gss)
    # float64 never reaches the native module.
    ops._wtconv2d_fwd_cuda(*_op_args(x.double(), p.to(dtype=torch.float64), 1))
    assert calls == ["fwd", "bwd"]
    # With a bias: its gradient in the bias's dtype and shape.
    pb = random_params(2, 3, 2, bias=True, dtype=torch.float16)
    grads = ops._wtconv2d_bwd_cuda(torch.randn_like(y), *_op_args(x, pb, 2))
    assert calls == ["fwd", "bwd", "bwd"]
    assert grads[2].dtype == torch.float16 and grads[2].shape == (2,)
    # An output gradient of another dtype than x is not handed to the kernels (they take x's).
    ops._wtconv2d_bwd_cuda(torch.randn(y.shape), *_op_args(x, pb, 2))
    assert calls == ["fwd", "bwd", "bwd"]
