// Host-side entry to the direct FP32 kernel for NCHW layers with a shallow reduction
// (shallow_select.h says which layers take it and why).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/im2win/shallow_select.h"

namespace winconv::im2win {

struct ShallowConvParams {
  const float* x = nullptr;  // N x C x H x W
  const float* w = nullptr;  // K x C x R x S, as given (no repack)
  float* y = nullptr;        // N x K x P x Q
  int64_t n = 0;
  int c = 0, h = 0, w_in = 0, k = 0, r = 0, s = 0, p = 0, q = 0;
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// Output pixels of one warp job (lane l takes pixels l, l + 32, l + 64, l + 96 of it).
constexpr int64_t kShallowJobPixels = 128;

// Whether the kernel can take the problem: a reduction C*R*S of 1 to kShallowMaxDepth, and
// every index it keeps in 32 bits in range (offsets inside one image of x, up to a window past
// it; pixels of one output plane; the count of jobs, which FastDivmod divides).
inline bool shallow_kernel_fits(const ShallowConvParams& a) {
  const int64_t depth = int64_t(a.c) * a.r * a.s, pq = int64_t(a.p) * a.q;
  const int64_t jobs = a.n * ((pq + kShallowJobPixels - 1) / kShallowJobPixels);
  return depth >= 1 && depth <= kShallowMaxDepth && a.n >= 1 && pq >= 1 && a.k >= 1 &&
         int64_t(a.c) * a.h * a.w_in + a.w_in + a.s < INT32_MAX && pq + kShallowJobPixels < INT32_MAX &&
         jobs < INT32_MAX;
}

// Launches the kernel; cudaErrorInvalidValue, with nothing launched, where shallow_kernel_fits
// does not hold.
cudaError_t launch_conv_fp32_shallow_nchw(const ShallowConvParams& a, int num_sms, cudaStream_t stream);

}  // namespace winconv::im2win
