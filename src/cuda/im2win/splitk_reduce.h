// The second pass of split-K: sums the row-major partial tiles of the reduction splits (rows
// [m_begin, m) of the GEMM) in split order (bit-identical on every run), and writes y in the
// output layout.
#pragma once

#include <cuda_runtime.h>

#include "cuda/im2win/conv_gemm_params.h"

namespace winconv::im2win {

// Reads sk and p.m, p.n, p.y; for NCHW also p.pq.
cudaError_t launch_splitk_reduce(const ConvGemmParams& p, const SplitKParams& sk, bool out_nchw, cudaStream_t stream);

}  // namespace winconv::im2win
