// The two copies of a strided WTConv2d that runs the stride-1 kernels on the full grid
// (plan.h, WtconvRun): the forward's y is the full-resolution result subsampled, and the
// backward's full-resolution output gradient D is dy spread onto the full grid, zero elsewhere.
// Both are bandwidth-bound passes: one warp per full-grid row (its lanes along the row), so a
// row's index decomposition is done once for all its elements.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "wtconv_kernels.cuh"

namespace winconv {
namespace wtconv_detail {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block, one row each per step

// y[plane][i][j] = full[plane][s i][s j] for the rows i of the output grid.
template <typename T>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    subsample_kernel(const T* __restrict__ full, T* __restrict__ y, int64_t rows, int64_t Ho, int Wo, int64_t H,
                     int W, int s) {
  const int lane = threadIdx.x % 32;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    const int64_t plane = row / Ho, i = row - plane * Ho;
    const T* src = full + (plane * H + i * s) * W;
    T* dst = y + row * Wo;
    for (int j = lane; j < Wo; j += 32) dst[j] = src[int64_t(j) * s];
  }
}

// full[plane][p][q] = dy[plane][p / s][q / s] where s divides p and q, else 0, for every row p.
template <typename T>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    spread_kernel(const T* __restrict__ dy, T* __restrict__ full, int64_t rows, int64_t Ho, int Wo, int64_t H, int W,
                  int s) {
  const int lane = threadIdx.x % 32;
  const T zero = T(0.0f);
  // Column q = lane + 32 t as q / s and q % s, stepped without a division per element.
  const int step_div = 32 / s, step_mod = 32 % s;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32; row < rows;
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    const int64_t plane = row / H, p = row - plane * H;
    T* dst = full + row * W;
    if (p % s != 0) {
      for (int q = lane; q < W; q += 32) dst[q] = zero;
      continue;
    }
    const T* src = dy + (plane * Ho + p / s) * Wo;
    int q_div = lane / s, q_mod = lane % s;
    for (int q = lane; q < W; q += 32) {
      dst[q] = q_mod == 0 ? src[q_div] : zero;
      q_div += step_div;
      q_mod += step_mod;
      if (q_mod >= s) q_mod -= s, ++q_div;
    }
  }
}

// Launches a row kernel over `rows` rows: at most the grid the other WTConv kernels aim at
// (plan.h: kTargetBlocks, several waves on the GPU), each block looping over its rows.
template <typename T>
cudaError_t launch_rows(void (*kernel)(const T*, T*, int64_t, int64_t, int, int64_t, int, int), const T* in, T* out,
                        int64_t rows, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int s, cudaStream_t stream) {
  if (rows == 0 || Wo == 0) return cudaSuccess;
  const int64_t need = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const unsigned blocks = unsigned(need < kTargetBlocks ? need : kTargetBlocks);
  kernel<<<blocks, kRowsPerBlock * 32, 0, stream>>>(in, out, rows, Ho, int(Wo), H, int(W), s);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t launch_subsample(const T* full, T* y, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int s,
                             cudaStream_t stream) {
  return launch_rows<T>(subsample_kernel<T>, full, y, planes * Ho, H, W, Ho, Wo, s, stream);
}

template <typename T>
cudaError_t launch_spread(const T* dy, T* full, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int s,
                          cudaStream_t stream) {
  return launch_rows<T>(spread_kernel<T>, dy, full, planes * H, H, W, Ho, Wo, s, stream);
}

#define WTCONV_FULL_GRID_INSTANCES(T)                                                                            \
  template cudaError_t launch_subsample<T>(const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t, int,       \
                                           cudaStream_t);                                                        \
  template cudaError_t launch_spread<T>(const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t, int, cudaStream_t);
WTCONV_FULL_GRID_INSTANCES(float)
WTCONV_FULL_GRID_INSTANCES(__half)
WTCONV_FULL_GRID_INSTANCES(__nv_bfloat16)
#undef WTCONV_FULL_GRID_INSTANCES

}  // namespace wtconv_detail
}  // namespace winconv
