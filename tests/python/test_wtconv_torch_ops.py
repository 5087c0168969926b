"""The C++ operator winconv::wtconv2d_eager (src/torch/) against the ctypes binding it replaces.

Both run the same kernels with the same arguments, so forward and every gradient must agree bit
for bit. The GPU tests skip, with the reason, when the operator library is not built for this
torch; scripts/gpu-check sets WINCONV_REQUIRE_TORCH_OPS=1 so that there they fail instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import winconv
from winconv import _native, _torch_ops, ops
from gpu_required import gpu_missing


def _library_for_this_torch():
    """The operator library file built for this torch next to libwinconv, loaded; else skip."""
    if _native._load() is None:
        gpu_missing(f"libwinconv not loadable: {_native._reason}")
    paths = [p for p in _torch_ops._candidates(_native) if p.is_file()]
    if not paths:
        gpu_missing(f"operator library not built for torch {torch.__version__} (scripts/build-torch-ops)")
    torch.ops.load_library(str(paths[0]))
    return torch.ops.winconv.wtconv2d_eager


def _meta_args(b, c, h, w, k, levels):
    m = lambda *shape: torch.empty(*shape, device="meta")  # noqa: E731
    return (m(b, c, h, w), m(c, 1, k, k), m(c), m(1, c, 1, 1), [m(4 * c, 1, k, k)] * levels,
            [m(1, 4 * c, 1, 1)] * levels)


@pytest.mark.parametrize("hw,stride", [((9, 7), 1), ((9, 7), 2), ((1, 1), 3), ((16, 15), 4)])
def test_meta_kernel_gives_the_output_shape(hw, stride):
    op = _library_for_this_torch()
    y = op(*_meta_args(2, 8, *hw, 5, 2), stride)
    assert y.device.type == "meta"
    assert tuple(y.shape) == (2, 8, -(-hw[0] // stride), -(-hw[1] // stride))


def test_cpu_tensors_are_refused_not_misread():
    op = _library_for_this_torch()
    c, k = 4, 3
    with pytest.raises(NotImplementedError, match="CPU"):
        op(torch.randn(1, c, 5, 5), torch.randn(c, 1, k, k), None, torch.randn(1, c, 1, 1),
           [torch.randn(4 * c, 1, k, k)], [torch.randn(1, 4 * c, 1, 1)], 1)


def test_status_is_a_reason_or_empty():
    status = winconv.torch_ops_status()
    assert isinstance(status, str)
    assert (status == "") == (_torch_ops.eager_op() is not None)


# ------------------------------------------------------------------------------------------
# GPU

def _gpu_op():
    if not torch.cuda.is_available():
        gpu_missing("no CUDA device available")
    if winconv.native_status():
        gpu_missing(f"fused WTConv kernels unavailable: {winconv.native_status()}")
    op = _torch_ops.eager_op()
    if op is None:
        if os.environ.get("WINCONV_REQUIRE_TORCH_OPS") == "1":
            pytest.fail(f"operator library required but unavailable: {winconv.torch_ops_status()}")
        gpu_missing(f"operator library unavailable: {winconv.torch_ops_status()}")
    return op


def _params(c, k, levels, bias, seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g).cuda().requires_grad_(True)  # noqa: E731
    return (r(c, 1, k, k), r(c) if bias else None, r(1, c, 1, 1), [r(4 * c, 1, k, k) for _ in range(levels)],
            [r(1, 4 * c, 1, 1) for _ in range(levels)])


def _run(path, x, grad_y, params, stride):
    w0, b0, s0, wl, sl = params
    leaves = [t for t in (w0, b0, s0, *wl, *sl) if t is not None]
    for t in leaves:
        t.grad = None
    xi = x.clone().requires_grad_(True)
    if path == "op":
        y = _torch_ops.eager_op()(xi, w0, b0, s0, wl, sl, stride)
    else:
        y = ops._NativeWtconv2d.apply(_native, stride, b0 is not None, len(wl), xi, w0, b0, s0, *wl, *sl)
    y.backward(grad_y)
    return [y, xi.grad] + [t.grad for t in leaves]


CASES = [  # (B, C, H, W, k, levels, stride, bias)
    (2, 8, 7, 10, 5, 2, 1, True),
    (1, 3, 5, 3, 7, 3, 2, False),
    (2, 6, 33, 17, 9, 2, 3, True),
    (4, 16, 28, 28, 5, 4, 1, True),
    (1, 2, 1, 1, 3, 5, 2, True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_operator_matches_ctypes_binding_bit_for_bit(case, dtype):
    _gpu_op()
    b, c, h, w, k, levels, stride, bias = case
    params = _params(c, k, levels, bias, seed=h * w + k)
    x = torch.randn(b, c, h, w, device="cuda", dtype=dtype)
    grad_y = torch.randn(b, c, -(-h // stride), -(-w // stride), device="cuda", dtype=dtype)
    via_op = _run("op", x, grad_y, params, stride)
    via_ctypes = _run("ctypes", x, grad_y, params, stride)
    assert len(via_op) == len(via_ctypes)
    for a, b_ in zip(via_op, via_ctypes):
        assert a.dtype == b_.dtype and a.shape == b_.shape
        assert torch.isfinite(a.float()).all()
        assert torch.equal(a, b_)


def test_parameter_gradients_accumulate_and_do_not_overlap():
    """The operator hands the parameter gradients back as views of one buffer (src/torch/): each
    .grad must still hold its own values, so two backward passes add up and writing one .grad
    leaves every other alone."""
    _gpu_op()
    layer = winconv.WTConv2d(6, 6, kernel_size=3, wt_levels=3).cuda()
    x = torch.randn(2, 6, 13, 9, device="cuda")
    grad_y = torch.randn(2, 6, 13, 9, device="cuda")
    params = {n: p for n, p in layer.named_parameters() if p.requires_grad}
    layer(x).backward(grad_y)
    first = {n: p.grad.clone() for n, p in params.items()}
    assert all(torch.isfinite(g).all() and g.abs().sum() > 0 for g in first.values())
    layer(x).backward(grad_y)
    for n, p in params.items():
        assert torch.equal(p.grad, 2 * first[n]), n
    names = list(params)
    params[names[0]].grad.fill_(float("nan"))
    for n in names[1:]:
        assert torch.equal(params[n].grad, 2 * first[n]), n


def test_module_uses_the_operator_and_inference_mode_works():
    _gpu_op()
    layer = winconv.WTConv2d(8, 8, kernel_size=5, wt_levels=2).cuda()
    x = torch.randn(2, 8, 12, 11, device="cuda")
    y = layer(x)
    assert y.grad_fn is not None and "WtconvFunction" in y.grad_fn.name()
    with torch.inference_mode():
        y_inf = layer(x)
    assert torch.equal(y.detach(), y_inf)


@pytest.mark.parametrize("bad,error", [
    ("level_shape", ValueError), ("stride0", ValueError), ("levels_mismatch", ValueError),
    ("channels", ValueError), ("even_kernel", ValueError), ("scale_on_cpu", ValueError),
    ("level_not_tensor", TypeError), ("bool_stride", ValueError), ("bias_shape", ValueError),
])
def test_bad_arguments_raise_the_python_errors(bad, error):
    """The operator is called first and checks the parameters itself; when it refuses a call, the
    Python checks must still name the fault with the same error as every other path."""
    _gpu_op()
    c, k = 4, 5
    x = torch.randn(1, c, 8, 8, device="cuda")
    w0, b0, s0 = torch.randn(c, 1, k, k, device="cuda"), None, torch.randn(1, c, 1, 1, device="cuda")
    wl, sl = [torch.randn(4 * c, 1, k, k, device="cuda")], [torch.randn(1, 4 * c, 1, 1, device="cuda")]
    stride = 1
    if bad == "level_shape":
        wl = [torch.randn(4 * c, 1, k, k - 2, device="cuda")]
    elif bad == "stride0":
        stride = 0
    elif bad == "levels_mismatch":
        sl = sl * 2
    elif bad == "channels":
        x = torch.randn(1, c + 1, 8, 8, device="cuda")
    elif bad == "even_kernel":
        w0 = torch.randn(c, 1, 4, 4, device="cuda")
        wl = [torch.randn(4 * c, 1, 4, 4, device="cuda")]
    elif bad == "scale_on_cpu":
        s0 = torch.randn(1, c, 1, 1)
    elif bad == "level_not_tensor":
        wl = [[0.0] * 4]
    elif bad == "bool_stride":
        stride = True
    elif bad == "bias_shape":
        b0 = torch.randn(c + 1, device="cuda")
    with pytest.raises(error):
        winconv.wtconv2d(x, w0, b0, s0, wl, sl, stride)


OPERATOR_ERRORS = r"""
import torch, winconv
from winconv import _torch_ops
op = _torch_ops.eager_op()
assert op is not None, winconv.torch_ops_status()
c = lambda *s: torch.zeros(*s, device="cuda")
args = [c(2, 8, 9, 7), c(8, 1, 5, 5), c(8), c(1, 8, 1, 1), [c(32, 1, 5, 5)], [c(1, 32, 1, 1)]]
cases = [(args, 0, "stride must be >= 1, got 0"),
         (args[:4] + [[c(32, 1, 5, 3)], args[5]], 1, "level_weights[0] must have shape"),
         ([c(2, 9, 9, 7)] + args[1:], 1, "base_weight must have shape")]
for bad, stride, expect in cases:
    for grad_mode in (True, False):
        with torch.set_grad_enabled(grad_mode):
            try:
                op(*bad, stride)
                raise SystemExit("no error for: " + expect)
            except RuntimeError as exc:
                assert expect in str(exc), exc
print("ok")
"""


def test_operator_argument_errors_reach_python():
    """Called directly, the operator's own checks raise RuntimeError with the message. Run in a
    separate process, so that a crash on this path is reported as a failure."""
    _gpu_op()
    python_dir = str(Path(__file__).resolve().parents[2] / "python")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [python_dir, os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-c", OPERATOR_ERRORS], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and "ok" in run.stdout, (run.returncode, run.stdout[-1000:], run.stderr[-3000:])

