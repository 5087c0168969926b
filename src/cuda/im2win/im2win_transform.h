// The im2win transforms on the GPU: the window tensor (materialized variant) and the filter
// repacked k-major in the reduction order each GEMM variant reads.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "winconv/conv2d.h"

namespace winconv::im2win {

// Reduction orders of window_gather.cuh, which the repacked filter must follow.
enum class ReductionOrder {
  kCUV,  // on-chip NCHW: kk = (c, u, v)  (the natural KCRS order)
  kCVU,  // materialized NCHW: kk = (c, v, u)
  kUVC,  // on-chip NHWC: kk = (u, v, c)  (the natural KRSC order)
  kVUC,  // materialized NHWC: kk = (v, u, c)
};

// I_hat of DESIGN.md from x (zero padding included), written in full.
cudaError_t launch_im2win_window(const Conv2dConfig& config, const float* x, float* window, cudaStream_t stream);

// b[kk * n_pad + k] = w[k, kk in `order`] for kk < kg_pad rows, zero for K <= k < n_pad or
// kk >= C*R*S. With a non-null table, also the on-chip reduction table of `order`
// (reduction_table.h), with tap_bits its second run: the tap bits of the padded gathers.
cudaError_t launch_filter_repack(const Conv2dConfig& config, ReductionOrder order, const float* w, float* b,
                                 int n_pad, int kg_pad, int* table, bool tap_bits, cudaStream_t stream);

}  // namespace winconv::im2win
