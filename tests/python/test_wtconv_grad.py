"""Backward: the explicit formulas against autograd, and the registered ops by gradcheck."""

from __future__ import annotations

import pytest
import torch

import winconv
from winconv import functional
from wtconv_oracles import WTParams, level_by_level, random_params, rel_l2


def _autograd_reference(x, p, stride, grad_y):
    """Gradients of the literal level-by-level oracle, by autograd, in float64."""
    x = x.detach().requires_grad_(True)
    leaves = [t.detach().requires_grad_(True) for t in p.tensors()]
    it = iter(leaves)
    base_weight = next(it)
    base_bias = next(it) if p.base_bias is not None else None
    base_scale = next(it)
    level_weights = [next(it) for _ in p.level_weights]
    level_scales = [next(it) for _ in p.level_scales]
    q = WTParams(base_weight, base_bias, base_scale, level_weights, level_scales)
    level_by_level(x, q, stride).backward(grad_y)
    return x.grad, base_weight.grad, None if base_bias is None else base_bias.grad, base_scale.grad, [
        w.grad for w in level_weights
    ], [s.grad for s in level_scales]


@pytest.mark.parametrize(
    "height,width,levels,k,stride,bias",
    [
        (7, 10, 1, 3, 1, True),
        (13, 9, 3, 5, 1, True),
        (5, 3, 4, 3, 2, False),
        (1, 6, 2, 1, 1, True),
        (2, 2, 5, 7, 2, True),
        (1, 1, 3, 3, 1, False),
        (16, 12, 3, 5, 3, True),
    ],
)
def test_explicit_backward_matches_autograd(height, width, levels, k, stride, bias):
    channels = 3
    x = torch.randn(2, channels, height, width, dtype=torch.float64)
    p = random_params(channels, k, levels, bias=bias, seed=height + width)
    grad_y = torch.randn(2, channels, -(-height // stride), -(-width // stride), dtype=torch.float64)
    expected = _autograd_reference(x, p, stride, grad_y)
    got = functional.wtconv2d_backward(grad_y, x, *p.as_args(), stride)
    names = ["grad_x", "grad_base_weight", "grad_base_bias", "grad_base_scale"]
    for name, g, e in zip(names, got[:4], expected[:4]):
        if e is None:
            assert g is None, name
            continue
        assert g.shape == e.shape, name
        assert rel_l2(g, e) < 1e-12, name
    for level in range(levels):
        assert rel_l2(got[4][level], expected[4][level]) < 1e-12, f"grad_level_weight[{level}]"
        assert rel_l2(got[5][level], expected[5][level]) < 1e-12, f"grad_level_scale[{level}]"


@pytest.mark.parametrize("height,width,levels,k,stride,bias", [(5, 7, 2, 3, 1, True), (6, 3, 3, 3, 2, False)])
def test_op_gradcheck_and_gradgradcheck_float64(height, width, levels, k, stride, bias):
    channels = 2
    x = torch.randn(1, channels, height, width, dtype=torch.float64, requires_grad=True)
    p = random_params(channels, k, levels, bias=bias, seed=3)
    for t in p.tensors():
        t.requires_grad_(True)

    def layer(x, base_weight, base_bias, base_scale, *levels_flat):
        n = len(levels_flat) // 2
        return winconv.wtconv2d(x, base_weight, base_bias, base_scale, levels_flat[:n], levels_flat[n:], stride)

    inputs = (x, p.base_weight, p.base_bias, p.base_scale, *p.level_weights, *p.level_scales)
    assert torch.autograd.gradcheck(layer, inputs, eps=1e-6, atol=1e-7, rtol=1e-6)
    assert torch.autograd.gradgradcheck(layer, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)  # second derivatives


def test_module_backward_float32_matches_float64():
    layer = winconv.WTConv2d(4, 4, kernel_size=5, wt_levels=3)
    x = torch.randn(2, 4, 11, 14, requires_grad=True)
    layer(x).square().sum().backward()
    layer64 = winconv.WTConv2d(4, 4, kernel_size=5, wt_levels=3).double()
    layer64.load_state_dict(layer.state_dict())
    x64 = x.detach().double().requires_grad_(True)
    layer64(x64).square().sum().backward()
    assert rel_l2(x.grad, x64.grad) < 1e-5
    for (name, p32), p64 in zip(layer.named_parameters(), layer64.parameters()):
        if p32.requires_grad:
            assert rel_l2(p32.grad, p64.grad) < 1e-5, name
        else:
            assert p32.grad is None, name


def _penalty_grads(layer_fn, x, params):
    """Gradients of a gradient penalty, sum((d sum(y^2) / dx)^2), w.r.t. x and every parameter:
    second derivatives through the layer (backward with create_graph=True, then backward)."""
    y = layer_fn(x, *params)
    (gx,) = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    return torch.autograd.grad(gx.square().sum(), (x, *params), allow_unused=True)


@pytest.mark.parametrize(
    "height,width,levels,k,stride,bias",
    [(7, 10, 2, 3, 1, True), (5, 3, 3, 3, 2, False), (1, 6, 1, 1, 1, True), (13, 9, 3, 5, 3, True)],
)
def test_second_order_gradients_match_the_oracle(height, width, levels, k, stride, bias):
    channels = 3
    x = torch.randn(2, channels, height, width, dtype=torch.float64, requires_grad=True)
    p = random_params(channels, k, levels, bias=bias, seed=height * width)
    params = [t.detach().requires_grad_(True) for t in p.tensors()]

    def split(flat):
        it = iter(flat)
        w0 = next(it)
        b0 = next(it) if bias else None
        s0 = next(it)
        return w0, b0, s0, [next(it) for _ in range(levels)], [next(it) for _ in range(levels)]

    def ours(x, *flat):
        w0, b0, s0, lw, ls = split(flat)
        return winconv.wtconv2d(x, w0, b0, s0, lw, ls, stride)

    def oracle(x, *flat):
        return level_by_level(x, WTParams(*split(flat)), stride)

    got = _penalty_grads(ours, x, params)
    expected = _penalty_grads(oracle, x, params)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g is not None and e is not None, i
        assert rel_l2(g, e) < 1e-10, i


def test_third_order_derivatives_match_the_oracle():
    """The double backward is itself differentiable: d/dx of sum(d^2 (sum y^2) / dx^2 . 1)."""
    p = random_params(2, 3, 2, bias=True, seed=11)
    x0 = torch.randn(1, 2, 6, 5, dtype=torch.float64)

    def third(layer_fn):
        x = x0.clone().requires_grad_(True)
        (g1,) = torch.autograd.grad(layer_fn(x).square().sum(), x, create_graph=True)
        (g2,) = torch.autograd.grad(g1.square().sum(), x, create_graph=True)
        (g3,) = torch.autograd.grad(g2.sin().sum(), x)
        return g3

    got = third(lambda x: winconv.wtconv2d(x, *p.as_args(), 1))
    expected = third(lambda x: level_by_level(x, p, 1))
    assert rel_l2(got, expected) < 1e-10
