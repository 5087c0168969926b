"""ctypes binding of the winconv shared library's WTConv C surface (include/winconv/winconv_c.h).

Library search order: $WINCONV_LIBRARY, libwinconv.so next to this file, <repo>/build/libwinconv.so.
Outputs and workspaces are allocated with torch on x's device and every call runs on
torch.cuda.current_stream(), so the ops work under CUDA-graph capture and torch.compile.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from pathlib import Path

import torch

_DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_I64 = ctypes.c_int64
_lib = None
_path = None
_reason = ""


def _candidates():
    env = os.environ.get("WINCONV_LIBRARY")
    if env:
        yield Path(env)
    here = Path(__file__).resolve().parent
    yield here / "libwinconv.so"
    yield here.parent.parent / "build" / "libwinconv.so"


def _load():
    global _lib, _path, _reason
    if _lib is not None or _reason:
        return _lib
    tried = []
    for path in _candidates():
        tried.append(str(path))
        if not path.is_file():
            continue
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as exc:  # a broken or foreign build: report it, do not crash
            _reason = f"could not load {path}: {exc}"
            return None
        if not hasattr(lib, "winconv_wtconv_forward"):
            _reason = f"{path} has no WTConv C surface (winconv_wtconv_forward)"
            return None
        _declare(lib)
        _lib, _path = lib, path
        return _lib
    _reason = "libwinconv.so not found (tried: " + ", ".join(tried) + "); set WINCONV_LIBRARY"
    return None


def _declare(lib):
    dims = [_I64] * 7 + [ctypes.c_int]
    pp = ctypes.POINTER(ctypes.c_void_p)
    for name in ("winconv_wtconv_forward_workspace_size", "winconv_wtconv_backward_workspace_size"):
        fn = getattr(lib, name)
        fn.argtypes = dims + [ctypes.POINTER(ctypes.c_size_t)]
        fn.restype = ctypes.c_int
    vp = ctypes.c_void_p
    lib.winconv_wtconv_forward.argtypes = dims + [vp, vp, vp, vp, pp, pp, vp, vp, ctypes.c_size_t, vp]
    lib.winconv_wtconv_forward.restype = ctypes.c_int
    lib.winconv_wtconv_backward.argtypes = dims + [vp, vp, vp, vp, vp, pp, pp, vp, vp, vp, vp, pp, pp, vp,
                                                   ctypes.c_size_t, vp]
    lib.winconv_wtconv_backward.restype = ctypes.c_int
    u64p = ctypes.POINTER(ctypes.c_uint64)
    lib.winconv_wtconv_io_bytes.argtypes = dims + [u64p, u64p]
    lib.winconv_wtconv_io_bytes.restype = ctypes.c_int
    lib.winconv_wtconv_last_error.argtypes = []
    lib.winconv_wtconv_last_error.restype = ctypes.c_char_p


def library_path():
    """The path of the loaded libwinconv.so, or None."""
    return _path if _load() is not None else None


def available() -> bool:
    """True when the shared library with the WTConv C surface loaded and CUDA is usable."""
    return _load() is not None and torch.cuda.is_available()


def unavailable_reason() -> str:
    if _load() is None:
        return _reason
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    return ""


def _check_rc(rc: int, what: str):
    if rc != 0:
        msg = _lib.winconv_wtconv_last_error().decode(errors="replace")
        raise RuntimeError(f"winconv {what} failed: {msg}")


def _ptrs(tensors):
    arr = (ctypes.c_void_p * max(1, len(tensors)))()
    for i, t in enumerate(tensors):
        arr[i] = t.data_ptr()
    return arr


def _check_act(name, t, shape=None):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_cuda:
        raise ValueError(f"{name} must be a CUDA tensor, got device {t.device}")
    if t.dtype not in _DTYPE_CODE:
        raise TypeError(f"{name} must be float32, float16 or bfloat16, got {t.dtype}")
    if t.dim() != 4:
        raise ValueError(f"{name} must be 4-D (B, C, H, W), got shape {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous NCHW")
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")


def _check_param(name, t, shape, device):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise TypeError(f"{name} must be float32, got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{name} must be on {device}, got {t.device}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous")


def _validate(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride):
    _check_act("x", x)
    if isinstance(stride, bool) or not isinstance(stride, int):
        raise TypeError(f"stride must be an int, got {type(stride).__name__}")
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    B, C, H, W = x.shape
    if not isinstance(base_weight, torch.Tensor) or base_weight.dim() != 4:
        raise ValueError("base_weight must be a 4-D tensor (C, 1, k, k)")
    k = int(base_weight.shape[-1])
    if k < 1 or k > 15 or k % 2 == 0:
        raise ValueError(f"kernel size must be odd and in [1, 15], got {k}")
    if not isinstance(level_weights, (list, tuple)) or not isinstance(level_scales, (list, tuple)):
        raise TypeError("level_weights and level_scales must be lists of tensors")
    L = len(level_weights)
    if L < 1 or L > 8:
        raise ValueError(f"the number of levels must be in [1, 8], got {L}")
    if len(level_scales) != L:
        raise ValueError(f"level_scales has {len(level_scales)} entries, level_weights has {L}")
    dev = x.device
    _check_param("base_weight", base_weight, (C, 1, k, k), dev)
    if base_bias is not None:
        _check_param("base_bias", base_bias, (C,), dev)
    _check_param("base_scale", base_scale, (1, C, 1, 1), dev)
    for l in range(L):
        _check_param(f"level_weights[{l}]", level_weights[l], (4 * C, 1, k, k), dev)
        _check_param(f"level_scales[{l}]", level_scales[l], (1, 4 * C, 1, 1), dev)
    return B, C, H, W, k, L


def _require():
    if _load() is None:
        raise RuntimeError("winconv native library unavailable: " + _reason)


@functools.lru_cache(maxsize=256)
def _workspace_bytes(direction: str, dims) -> int:
    # The size depends on the problem only; caching it saves a library call per step.
    fn = _lib.winconv_wtconv_forward_workspace_size if direction == "forward" else \
        _lib.winconv_wtconv_backward_workspace_size
    nbytes = ctypes.c_size_t(0)
    _check_rc(fn(*dims, ctypes.byref(nbytes)), "workspace query")
    return nbytes.value


def _workspace(direction, dims, device):
    nbytes = _workspace_bytes(direction, dims)
    return torch.empty(max(1, nbytes), dtype=torch.uint8, device=device), nbytes


def _dims_of(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride, checked):
    """(B, C, H, W, k, L); `checked` means the caller has already validated every argument (the
    eager autograd path does, with the same rules), so only the sizes are read."""
    if not checked:
        return _validate(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride)
    B, C, H, W = x.shape
    return B, C, H, W, int(base_weight.shape[-1]), len(level_weights)


def wtconv2d_io_bytes(batch: int, channels: int, height: int, width: int, kernel_size: int, levels: int,
                      stride: int, dtype: torch.dtype):
    """HBM bytes (forward, backward) the fused kernels move for this problem (docs/wtconv.md)."""
    _require()
    if dtype not in _DTYPE_CODE:
        raise TypeError(f"dtype must be float32, float16 or bfloat16, got {dtype}")
    fwd, bwd = ctypes.c_uint64(0), ctypes.c_uint64(0)
    rc = _lib.winconv_wtconv_io_bytes(batch, channels, height, width, kernel_size, levels, stride,
                                      _DTYPE_CODE[dtype], ctypes.byref(fwd), ctypes.byref(bwd))
    _check_rc(rc, "wtconv2d_io_bytes")
    return fwd.value, bwd.value


def _on_device(device: torch.device):
    """The library launches on the current CUDA device (and sizes its plans by it): make it the
    tensors' device for the call when it is not already (a no-op context otherwise, as the
    switch costs host time on the small shapes)."""
    if device.index is None or device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def wtconv2d_forward(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride: int,
                     checked: bool = False):
    _require()
    B, C, H, W, k, L = _dims_of(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride, checked)
    dims = (B, C, H, W, k, L, stride, _DTYPE_CODE[x.dtype])
    y = torch.empty((B, C, -(-H // stride), -(-W // stride)), dtype=x.dtype, device=x.device)
    ws, nbytes = _workspace("forward", dims, x.device)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    with _on_device(x.device):
        rc = _lib.winconv_wtconv_forward(
            *dims, x.data_ptr(), base_weight.data_ptr(), base_bias.data_ptr() if base_bias is not None else None,
            base_scale.data_ptr(), _ptrs(level_weights), _ptrs(level_scales), y.data_ptr(), ws.data_ptr(), nbytes,
            stream)
    _check_rc(rc, "wtconv2d_forward")
    return y


def wtconv2d_backward(grad_y, x, base_weight, base_bias, base_scale, level_weights, level_scales, stride: int,
                      checked: bool = False):
    _require()
    B, C, H, W, k, L = _dims_of(x, base_weight, base_bias, base_scale, level_weights, level_scales, stride, checked)
    _check_act("grad_y", grad_y, (B, C, -(-H // stride), -(-W // stride)))
    if grad_y.dtype != x.dtype:
        raise TypeError(f"grad_y must have x's dtype {x.dtype}, got {grad_y.dtype}")
    if grad_y.device != x.device:
        raise ValueError(f"grad_y must be on {x.device}, got {grad_y.device}")
    dims = (B, C, H, W, k, L, stride, _DTYPE_CODE[x.dtype])
    dev = x.device
    grad_x = torch.empty_like(x)
    g_w0 = torch.empty_like(base_weight)
    g_b0 = torch.empty_like(base_bias) if base_bias is not None else None
    g_s0 = torch.empty_like(base_scale)
    g_wl = [torch.empty_like(w) for w in level_weights]
    g_sl = [torch.empty_like(s) for s in level_scales]
    ws, nbytes = _workspace("backward", dims, dev)
    stream = torch.cuda.current_stream(dev).cuda_stream
    with _on_device(dev):
        rc = _lib.winconv_wtconv_backward(
            *dims, grad_y.data_ptr(), x.data_ptr(), base_weight.data_ptr(),
            base_bias.data_ptr() if base_bias is not None else None, base_scale.data_ptr(), _ptrs(level_weights),
            _ptrs(level_scales), grad_x.data_ptr(), g_w0.data_ptr(), g_b0.data_ptr() if g_b0 is not None else None,
            g_s0.data_ptr(), _ptrs(g_wl), _ptrs(g_sl), ws.data_ptr(), nbytes, stream)
    _check_rc(rc, "wtconv2d_backward")
    return grad_x, g_w0, g_b0, g_s0, g_wl, g_sl
