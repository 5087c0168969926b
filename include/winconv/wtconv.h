// WTConv2d (wavelet convolution, Haar/db1): public C++ API, forward and backward.
//
// Semantics (DESIGN.md, "WTConv: semantics"): x (B,C,H,W) NCHW, odd kernel size k, L levels.
//   out = s0*(W0 conv x + b) + sum_{l=1..L} 2^-l * synthesis of Z_l at (y >> l, x >> l),
//   Z_l[s] = s_l[4c+s] * (W_l[4c+s] conv Y_l[s]),  Y_l = Haar(zero-pad(X_{l-1})),  X_l = Y_l[LL],
// then y = out[..., ::stride, ::stride], shape (B, C, ceil(H/stride), ceil(W/stride)).
// Activations (x, y, dy, dx) are fp32, fp16 or bf16; parameters and their gradients are always fp32
// with the original module's shapes: W0 (C,1,k,k), b (C), s0 (1,C,1,1), W_l (4C,1,k,k), s_l (1,4C,1,1).
// Pointers are device pointers; every call is asynchronous on the given stream, allocates nothing
// and never synchronises. Every argument is checked before anything is launched.
#pragma once

#include <cstddef>
#include <cstdint>

#include "winconv/conv2d.h"  // Precision, cudaStream_t
#include "winconv/status.h"

namespace winconv {

constexpr int kWtconvMaxLevels = 8;
constexpr int kWtconvMaxKernelSize = 15;

struct WtconvProblem {
  int64_t batch = 1, channels = 1, height = 1, width = 1;
  int64_t kernel_size = 5;  // odd, 1..15
  int64_t levels = 1;       // 1..8
  int64_t stride = 1;       // >= 1
  Precision precision = Precision::kFP32;  // activations; parameters are fp32

  // ceil(extent / stride), written so that no stride overflows it.
  int64_t out_height() const { return height < 1 ? 0 : (height - 1) / stride + 1; }
  int64_t out_width() const { return width < 1 ? 0 : (width - 1) / stride + 1; }
  int64_t x_elements() const { return batch * channels * height * width; }
  int64_t y_elements() const { return batch * channels * out_height() * out_width(); }
};

// Parameters (device, fp32). base_bias may be null (a module built with bias=False).
// level_weight[l-1] / level_scale[l-1] belong to level l; entries >= levels are ignored.
struct WtconvParams {
  const float* base_weight = nullptr;  // (C,1,k,k)
  const float* base_bias = nullptr;    // (C) or null
  const float* base_scale = nullptr;   // (C)
  const float* level_weight[kWtconvMaxLevels] = {};  // (4C,1,k,k), channel 4c+s = subband s of c
  const float* level_scale[kWtconvMaxLevels] = {};   // (4C)
};

// Parameter gradients (device, fp32), same shapes as WtconvParams. base_bias may be null:
// then the bias gradient is not written (it is also not needed when the module has no bias).
struct WtconvParamGrads {
  float* base_weight = nullptr;
  float* base_bias = nullptr;
  float* base_scale = nullptr;
  float* level_weight[kWtconvMaxLevels] = {};
  float* level_scale[kWtconvMaxLevels] = {};
};

// Checks the problem (sizes, kernel size, levels, stride, index ranges). Host-only.
Status wtconv_validate(const WtconvProblem& problem);

// Bytes of device workspace the forward / backward need (fp32 LL chains, residuals, per-block
// partial sums). Deterministic in the problem alone.
Status wtconv_forward_workspace_size(const WtconvProblem& problem, size_t* bytes);
Status wtconv_backward_workspace_size(const WtconvProblem& problem, size_t* bytes);

// HBM bytes the fused forward and backward move for this problem (the I/O model of
// docs/wtconv.md), for reporting achieved bandwidth.
Status wtconv_io_bytes(const WtconvProblem& problem, uint64_t* forward_bytes, uint64_t* backward_bytes);

// y = WTConv2d(x). x, y: activations in problem.precision; workspace of at least
// wtconv_forward_workspace_size bytes, 16-byte aligned (may be null when that size is 0).
Status wtconv_forward(const WtconvProblem& problem, const void* x, const WtconvParams& params,
                      void* y, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// dx and every parameter gradient from dy = dL/dy. Gradients are overwritten, not accumulated.
// Deterministic: the same inputs give bit-identical outputs (no floating-point atomics).
Status wtconv_backward(const WtconvProblem& problem, const void* dy, const void* x,
                       const WtconvParams& params, void* dx, const WtconvParamGrads& grads,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace winconv
