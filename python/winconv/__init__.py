"""winconv: memory-efficient, I/O-aware convolutions; the PyTorch package.

    import winconv
    layer = winconv.WTConv2d(64, 64, kernel_size=5, wt_levels=3)   # the original's API
    model = winconv.convert_wtconv(model)                          # swap original layers

Importing registers the operators winconv::wtconv2d_fwd and winconv::wtconv2d_bwd.
CUDA tensors use the fused kernels of libwinconv when it is built (see `native_status()`),
every other case the pure-PyTorch implementation in winconv.functional. Eager CUDA calls go
through the C++ operator winconv::wtconv2d_eager when it is built for this torch (see
`torch_ops_status()`), else through the ctypes binding; both run the same kernels.
"""

from . import functional, nn, ops
from ._native_loader import native_status
from ._torch_ops import torch_ops_status
from .convert import convert_wtconv
from .nn import WTConv2d
from .ops import wtconv2d

__version__ = "0.1.0"

__all__ = ["WTConv2d", "convert_wtconv", "functional", "native_status", "nn", "ops", "torch_ops_status", "wtconv2d"]
