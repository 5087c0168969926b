"""The fused CUDA kernels through the module: accuracy, determinism, compile, graphs, autocast.

Skipped (with the reason) when there is no CUDA device or libwinconv's kernels are not loaded;
failed instead under WINCONV_REQUIRE_GPU=1 (gpu_required.py).
"""

from __future__ import annotations

import pytest
import torch

import winconv
from winconv import functional
from gpu_required import gpu_missing
from wtconv_oracles import rel_l2

if not torch.cuda.is_available():
    gpu_missing("no CUDA device available", module=True)
if winconv.native_status():
    gpu_missing(f"fused WTConv kernels unavailable: {winconv.native_status()}", module=True)

TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 1e-2}
DTYPES = list(TOLERANCE)


@pytest.fixture(autouse=True)
def _uninitialised_memory_is_nan():
    """Outputs poisoned: with deterministic algorithms on, torch.empty (and at::empty in the C++
    operator) fills float memory with NaN, so an element no kernel wrote cannot pass as a value
    that happened to be there. warn_only: other ops without a deterministic form only warn."""
    was, was_warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield
    torch.use_deterministic_algorithms(was, warn_only=was_warn)

# (B, C, H, W, kernel_size, wt_levels, stride): odd sizes, deep cascades, strides, the WTConvNeXt kernel.
CASES = [
    (2, 8, 7, 10, 5, 2, 1),
    (2, 4, 13, 9, 3, 4, 1),
    (1, 3, 5, 3, 7, 3, 2),
    (3, 16, 32, 32, 5, 3, 1),
    (2, 8, 56, 56, 5, 5, 1),
    (1, 2, 1, 6, 1, 2, 1),
    (1, 2, 1, 1, 3, 5, 2),
    (2, 6, 33, 17, 9, 2, 3),
]


def _randomised_layer(c, k, levels, stride, bias=True, seed=0):
    torch.manual_seed(seed)
    layer = winconv.WTConv2d(c, c, kernel_size=k, wt_levels=levels, stride=stride, bias=bias)
    with torch.no_grad():  # scales away from their defaults so every parameter is exercised
        layer.base_scale.weight.add_(0.5 * torch.randn_like(layer.base_scale.weight))
        for scale in layer.level_scales:
            scale.add_(0.2 * torch.randn_like(scale))
    return layer


def _float64_reference(layer, x, grad_y):
    """Forward and gradients of the float64 reference on CPU for the same (rounded) inputs."""
    params = (
        layer.base_conv.weight.detach().double().cpu(),
        None if layer.base_conv.bias is None else layer.base_conv.bias.detach().double().cpu(),
        layer.base_scale.weight.detach().double().cpu(),
        [w.detach().double().cpu() for w in layer.level_weights],
        [s.detach().double().cpu() for s in layer.level_scales],
    )
    x64 = x.detach().double().cpu()
    y = functional.wtconv2d_forward(x64, *params, layer.stride)
    grads = functional.wtconv2d_backward(grad_y.detach().double().cpu(), x64, *params, layer.stride)
    return y, grads


def _module_grads(layer):
    return [
        layer.base_conv.weight.grad,
        layer.base_conv.bias.grad if layer.base_conv.bias is not None else None,
        layer.base_scale.weight.grad,
        *[w.grad for w in layer.level_weights],
        *[s.grad for s in layer.level_scales],
    ]


def _flat_reference_grads(grads):
    _, gw0, gb0, gs0, gws, gss = grads
    return [gw0, gb0, gs0, *gws, *gss]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_forward_and_backward_against_float64(case, dtype):
    b, c, h, w, k, levels, stride = case
    layer = _randomised_layer(c, k, levels, stride, bias=(h % 2 == 1)).cuda()
    x = torch.randn(b, c, h, w, device="cuda").to(dtype).requires_grad_(True)
    y = layer(x)
    assert y.dtype == dtype and y.shape == (b, c, -(-h // stride), -(-w // stride))
    grad_y = torch.randn_like(y)
    y.backward(grad_y)

    y_ref, grads_ref = _float64_reference(layer, x, grad_y)
    tol = TOLERANCE[dtype]
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()
    assert rel_l2(y.cpu(), y_ref) <= tol, "forward"
    assert x.grad.dtype == dtype
    assert rel_l2(x.grad.cpu(), grads_ref[0]) <= tol, "grad_x"
    for i, (got, ref) in enumerate(zip(_module_grads(layer), _flat_reference_grads(grads_ref))):
        if ref is None:
            assert got is None
            continue
        assert got.dtype == torch.float32
        assert rel_l2(got.cpu(), ref) <= tol, f"parameter gradient {i}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
def test_deterministic_bit_identical(dtype):
    layer = _randomised_layer(32, 5, 3, 1).cuda()
    x = torch.randn(4, 32, 45, 38, device="cuda", dtype=dtype)
    grad_y = torch.randn_like(x)

    def run():
        layer.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_(True)
        y = layer(xi)
        y.backward(grad_y)
        return [y, xi.grad, *_module_grads(layer)]

    first, second = run(), run()
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_torch_compile_fullgraph_on_cuda(dtype):
    torch._dynamo.reset()
    layer = _randomised_layer(8, 5, 3, 2).cuda()
    x = torch.randn(2, 8, 29, 31, device="cuda", dtype=dtype, requires_grad=True)
    grad_y = torch.randn(2, 8, 15, 16, device="cuda", dtype=dtype)
    eager = layer(x)
    eager.backward(grad_y)
    grads_eager = [x.grad.clone()] + [g.clone() for g in _module_grads(layer)]
    x.grad = None
    layer.zero_grad(set_to_none=True)

    compiled = torch.compile(layer, fullgraph=True)
    y = compiled(x)
    y.backward(grad_y)
    # The same kernels on the same inputs: the compiled graph changes nothing but the dispatch.
    assert torch.equal(y, eager)
    for got, ref in zip([x.grad] + _module_grads(layer), grads_eager):
        assert torch.equal(got, ref)
    y_ref, grads_ref = _float64_reference(layer, x, grad_y)
    assert rel_l2(y.cpu(), y_ref) <= TOLERANCE[dtype]
    assert rel_l2(x.grad.cpu(), grads_ref[0]) <= TOLERANCE[dtype]


def _penalty_grads(call, layer, x):
    """Gradients of sum((d sum(y^2) / dx)^2) w.r.t. x and every trained parameter: the backward
    runs with create_graph=True, so its own derivative is taken."""
    params = [p for p in layer.parameters() if p.requires_grad]
    (gx,) = torch.autograd.grad(call(layer, x).square().sum(), x, create_graph=True)
    return torch.autograd.grad(gx.square().sum(), [x, *params])


def _call_module(layer, x):
    return layer(x)  # the C++ operator when built for this torch, else the ctypes binding


def _call_ctypes(layer, x):
    from winconv import _native, ops

    return ops._NativeWtconv2d.apply(_native, layer.stride, layer.base_conv.bias is not None, layer.wt_levels, x,
                                     layer.base_conv.weight, layer.base_conv.bias, layer.base_scale.weight,
                                     *layer.level_weights, *layer.level_scales)


def _call_custom_op(layer, x):  # the path torch.compile traces
    return torch.ops.winconv.wtconv2d_fwd(x, layer.base_conv.weight, layer.base_conv.bias, layer.base_scale.weight,
                                          list(layer.level_weights), list(layer.level_scales), layer.stride)


@pytest.mark.parametrize("call", [_call_module, _call_ctypes, _call_custom_op], ids=["module", "ctypes", "custom_op"])
@pytest.mark.parametrize("bias,stride", [(True, 1), (False, 2)])
def test_second_order_gradients(call, bias, stride):
    """backward(create_graph=True) on every CUDA path: the first backward runs the kernels and
    must be recorded, else the penalty's gradient silently loses its second-order terms."""
    layer = _randomised_layer(6, 5, 3, stride, bias=bias).cuda()
    x = torch.randn(2, 6, 19, 22, device="cuda", requires_grad=True)
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        got = _penalty_grads(call, layer, x)
    layer64 = _randomised_layer(6, 5, 3, stride, bias=bias).double()
    layer64.load_state_dict(layer.state_dict())
    expected = _penalty_grads(_call_module, layer64, x.detach().cpu().double().requires_grad_(True))
    for i, (g, e) in enumerate(zip(got, expected)):
        assert rel_l2(g.cpu(), e) <= 1e-5, i


@pytest.mark.parametrize("call", [_call_module, _call_ctypes, _call_custom_op], ids=["module", "ctypes", "custom_op"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_channels_last_tensors_give_the_contiguous_bits(call, dtype):
    """A channels-last x, and a channels-last gradient from the next layer, are converted, never
    read as NCHW: every path gives the bits of the contiguous tensors."""
    layer = _randomised_layer(8, 5, 2, 1).cuda()
    x = torch.randn(2, 8, 13, 18, device="cuda", dtype=dtype)
    grad_y = torch.randn(2, 8, 13, 18, device="cuda", dtype=dtype)

    def run(xi, gi):
        xi = xi.clone().requires_grad_(True)
        y = call(layer, xi)
        params = [p for p in layer.parameters() if p.requires_grad]
        return [y, *torch.autograd.grad(y, [xi, *params], gi)]

    expected = run(x, grad_y)
    cl = torch.channels_last
    for xi, gi in ((x.to(memory_format=cl), grad_y), (x, grad_y.to(memory_format=cl)),
                   (x.to(memory_format=cl), grad_y.to(memory_format=cl))):
        assert not (xi.is_contiguous() and gi.is_contiguous())
        for got, want in zip(run(xi, gi), expected):
            assert torch.equal(got, want)


def test_strides_past_the_plane_act_as_the_plane_extent():
    """Any stride >= max(H, W) keeps the output pixel (0, 0) alone: one past the kernels' index
    range runs as stride max(H, W), with the same bits."""
    layer = _randomised_layer(4, 3, 2, 5).cuda()
    x = torch.randn(2, 4, 3, 5, device="cuda", requires_grad=True)
    grad_y = torch.randn(2, 4, 1, 1, device="cuda")

    def run(stride):
        layer.stride = stride
        y = layer(x)
        params = [p for p in layer.parameters() if p.requires_grad]
        return [y, *torch.autograd.grad(y, [x, *params], grad_y)]

    expected = run(5)
    for stride in (2**25, 2**40):
        for got, want in zip(run(stride), expected):
            assert torch.equal(got, want), stride


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
@pytest.mark.parametrize("call", [_call_module, _call_ctypes, _call_custom_op], ids=["module", "ctypes", "custom_op"])
def test_tensors_on_a_device_that_is_not_current(call):
    """Every path runs on the tensors' device, whichever is current: the same bits as there."""
    layer0 = _randomised_layer(8, 5, 2, 1).cuda(0)
    layer1 = _randomised_layer(8, 5, 2, 1).cuda(1)
    x = torch.randn(2, 8, 21, 18, device="cuda:0")
    outputs = []
    for layer, xi in ((layer0, x), (layer1, x.to("cuda:1"))):
        with torch.cuda.device(0):  # cuda:0 current for both
            xi = xi.clone().requires_grad_(True)
            y = call(layer, xi)
            (gx,) = torch.autograd.grad(y.square().sum(), xi)
        outputs.append((y.cpu(), gx.cpu()))
    for a, b in zip(*outputs):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_cuda_graph_capture_and_replay(dtype):
    layer = _randomised_layer(16, 5, 3, 1).cuda()
    static_x = torch.randn(2, 16, 40, 36, device="cuda", dtype=dtype, requires_grad=True)
    static_grad_y = torch.randn(2, 16, 40, 36, device="cuda", dtype=dtype)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture, as graph capture requires
        for _ in range(2):
            layer(static_x).backward(static_grad_y)
    torch.cuda.current_stream().wait_stream(side)
    layer.zero_grad(set_to_none=False)
    static_x.grad = None

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = layer(static_x)
        static_y.backward(static_grad_y)

    for seed in range(3):
        torch.manual_seed(100 + seed)
        new_x = torch.randn_like(static_x)
        new_grad = torch.randn_like(static_grad_y)
        with torch.no_grad():
            static_x.copy_(new_x)
            static_grad_y.copy_(new_grad)
            static_x.grad.zero_()
            for g in _module_grads(layer):
                g.zero_()
        graph.replay()
        torch.cuda.synchronize()
        y_ref, grads_ref = _float64_reference(layer, new_x, new_grad)
        tol = TOLERANCE[dtype]
        assert rel_l2(static_y.cpu(), y_ref) <= tol
        assert rel_l2(static_x.grad.cpu(), grads_ref[0]) <= tol
        for got, ref in zip(_module_grads(layer), _flat_reference_grads(grads_ref)):
            assert rel_l2(got.cpu(), ref) <= tol


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_autocast(dtype):
    """Under autocast the float32 input runs in the autocast dtype: y in that dtype, the input's
    gradient in float32 (autograd casts it back), the parameters' in float32; all against the
    float64 reference of the rounded input."""
    layer = _randomised_layer(16, 5, 2, 1).cuda()
    x = torch.randn(2, 16, 30, 30, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=dtype):
        y = layer(x)
    assert y.dtype == dtype
    assert layer.base_conv.weight.dtype == torch.float32
    grad_y = torch.randn_like(y)
    y.backward(grad_y)
    assert x.grad.dtype == torch.float32 and layer.base_conv.weight.grad.dtype == torch.float32
    y_ref, grads_ref = _float64_reference(layer, x.detach().to(dtype), grad_y)
    assert rel_l2(y.cpu(), y_ref) <= 1e-2
    assert rel_l2(x.grad.cpu(), grads_ref[0]) <= 1e-2
    for i, (got, ref) in enumerate(zip(_module_grads(layer), _flat_reference_grads(grads_ref))):
        assert rel_l2(got.cpu(), ref) <= 1e-2, f"parameter gradient {i}"


def test_opcheck_on_cuda():
    layer = _randomised_layer(4, 3, 2, 2).cuda()
    x = torch.randn(2, 4, 11, 9, device="cuda", requires_grad=True)
    args = (x, layer.base_conv.weight, layer.base_conv.bias, layer.base_scale.weight,
            layer.level_weights, layer.level_scales, 2)
    torch.library.opcheck(torch.ops.winconv.wtconv2d_fwd.default, args)


def test_half_precision_module_parameters():
    layer = _randomised_layer(8, 5, 2, 1).cuda()
    reference = _randomised_layer(8, 5, 2, 1).cuda()
    layer.half()
    x = torch.randn(2, 8, 21, 19, device="cuda", dtype=torch.float16, requires_grad=True)
    y = layer(x)
    y.float().sum().backward()
    assert y.dtype == torch.float16 and layer.base_conv.weight.grad.dtype == torch.float16
    y_ref = reference(x.detach().float())
    assert rel_l2(y, y_ref) <= 1e-2


def test_tensors_past_2_to_31_elements():
    """x, y, dy and dx past 2^31 elements through the module (fp16, 64-bit offsets from the
    operator down to the kernels): the planes on both sides of element 2^31 and one far below,
    with their channels' parameter gradients, against the float64 reference of one-channel
    problems; no non-finite value anywhere. Skipped where the device lacks the memory."""
    b, c, h, w = 1, 2049, 1024, 1024  # channel 2048 starts at element 2^31
    need = 6 * b * c * h * w * 2 + (2 << 30)  # x, y, dy, dx and the backward's temporaries
    free, _ = torch.cuda.mem_get_info()
    if free < need:
        pytest.skip(f"needs {need >> 30} GiB of device memory, {free >> 30} GiB free")
    layer = _randomised_layer(c, 5, 2, 1).cuda()
    x = torch.randn(b, c, h, w, device="cuda", dtype=torch.float16).requires_grad_(True)
    assert x.numel() > 2**31
    y = layer(x)
    grad_y = torch.randn_like(y)
    y.backward(grad_y)
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()
    tol = TOLERANCE[torch.float16]
    for ch in (0, 2047, 2048):
        one, four = slice(ch, ch + 1), slice(4 * ch, 4 * ch + 4)
        params = (
            layer.base_conv.weight[one].detach().double().cpu(),
            layer.base_conv.bias[one].detach().double().cpu(),
            layer.base_scale.weight[:, one].detach().double().cpu(),
            [wl[four].detach().double().cpu() for wl in layer.level_weights],
            [sl[:, four].detach().double().cpu() for sl in layer.level_scales],
        )
        x64 = x[:, one].detach().double().cpu()
        y_ref = functional.wtconv2d_forward(x64, *params, 1)
        grads_ref = functional.wtconv2d_backward(grad_y[:, one].double().cpu(), x64, *params, 1)
        assert rel_l2(y[:, one].detach().cpu(), y_ref) <= tol, f"forward, channel {ch}"
        assert rel_l2(x.grad[:, one].cpu(), grads_ref[0]) <= tol, f"grad_x, channel {ch}"
        gw0, gb0, gs0, *level = _module_grads(layer)
        gws, gss = level[: len(level) // 2], level[len(level) // 2 :]
        got = [gw0[one], gb0[one], gs0[:, one], *[g[four] for g in gws], *[g[:, four] for g in gss]]
        for i, (g, ref) in enumerate(zip(got, _flat_reference_grads(grads_ref))):
            assert rel_l2(g.cpu(), ref) <= tol, f"parameter gradient {i}, channel {ch}"
