// What the im2win GEMM kernels need to know about one conv2d call, precomputed on the host.
// The GEMM view (DESIGN.md): M = N*P*Q output pixels, N_gemm = K output channels,
// K_gemm = C*R*S; A is the window matrix (gathered), B the filter, repacked k-major with its
// rows padded to whole BK stages (kg_pad), so the filter tiles need no reduction tail test.
#pragma once

#include <cstdint>

namespace winconv::im2win {

constexpr int kBK = 16;  // reduction depth of one pipeline stage

struct ConvGemmParams {
  const float* a_src = nullptr;  // x (on-chip variants) or the window tensor (materialized)
  const float* b = nullptr;      // filter repacked k-major: b[kk * n_pad + k], zero for k >= K or kk >= kg
  float* y = nullptr;
  // The unpadded on-chip gathers' reduction table (reduction_table.h): for each reduction index
  // kk < kg_pad, the element's offset from the window origin.
  const int* k_table = nullptr;

  int m = 0, n = 0, kg = 0, n_pad = 0;  // GEMM extents; n_pad = K rounded up to 4
  int kg_pad = 0;                       // kg rounded up to BK: the filter's rows and the table's length
  int c = 0, h = 0, w = 0, p = 0, q = 0, r = 0, s = 0;
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, w_padded = 0;
  int pq = 0, rs = 0;
  int64_t a_image_stride = 0;  // elements of one image in a_src (x: C*H*W, window: C*P*W'*R)
  int64_t y_image_stride = 0;  // K*P*Q
  int m_tiles = 0, n_tiles = 0;
};

// Split-K: blockIdx.y = split; each split runs k_tiles_per_split BK-deep steps of the reduction.
// With k_splits > 1 the split launch covers tiles [tile_begin, m_tiles * n_tiles), whose rows are
// [m_begin, m) (tile_begin > 0: the tiles before it ran unsplit in a launch of their own); the
// splits write row-major [m - m_begin][n] partial tiles, split s at partial + s * partial_stride,
// and splitk_reduce sums them in split order into rows [m_begin, m) of y.
// A separate kernel argument (conv_fp32_simt_kernel.cuh says why).
struct SplitKParams {
  int k_splits = 1, k_tiles_per_split = 0;
  int tile_begin = 0, m_begin = 0;
  float* partial = nullptr;
  int64_t partial_stride = 0;  // (m - m_begin) * n rounded up to 4 (16-byte aligned partial tiles)
};

}  // namespace winconv::im2win
