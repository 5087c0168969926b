// The two copies of a strided WTConv2d that runs the stride-1 kernels on the full grid
// (plan.h, WtconvRun): the forward's y is the full-resolution result subsampled, and the
// backward's full-resolution output gradient D is dy spread onto the full grid, zero elsewhere.
// Both are bandwidth-bound passes over runs of consecutive elements (kRun below), a run's
// (plane, row, column) from multiply-high divisions (FastDivmod). Planes go in slabs of fewer than
// 2^31 full-grid elements, one slab per grid row (blockIdx.y), so every index inside a slab is
// 32-bit. A warp per row, as first written, left most lanes idle on narrow planes and paid a
// 64-bit division per row: on 64 x 512 x 14 x 14 at stride 2 the spread took 98 us for 32 MB
// (docs/wtconv.md, perf note 110).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/fast_divmod.cuh"
#include "wtconv_kernels.cuh"

namespace winconv {
namespace wtconv_detail {
namespace {

constexpr int kCopyThreads = 256;
constexpr unsigned kMaxCopyBlocksPerSlab = 4096;  // then each thread loops over several elements

// The planes of one slab and where they start: slab s holds planes [s * per_slab, ...).
struct Slab {
  int64_t plane0;
  uint32_t planes;
};
__device__ __forceinline__ Slab slab_of(int64_t planes, uint32_t per_slab) {
  const int64_t plane0 = int64_t(blockIdx.y) * per_slab;
  const int64_t left = planes - plane0;
  return {plane0, uint32_t(left < per_slab ? left : per_slab)};
}

// A thread's run of kRun consecutive elements of the grid it writes: one index decomposition per
// run, then column steps (a row or plane turn where the run crosses one), and one store of the run
// (two 16-byte stores in fp32, one in 16-bit types) where it is whole and aligned. Decomposing
// every element (four multiply-high divisions) made the spread of a 64e6-element fp16 grid
// issue-bound, slower than the warp-per-row kernel before it (perf note 110).
constexpr int kRun = 8;

template <typename T>
__device__ __forceinline__ void store_run(T* dst, const T (&v)[kRun], uint32_t count) {
  static_assert(kRun * sizeof(T) % 16 == 0, "a run is whole 16-byte vectors");
  if (count == kRun && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
#pragma unroll
    for (int q = 0; q < int(kRun * sizeof(T) / 16); ++q) {
      uint4 u;
      memcpy(&u, reinterpret_cast<const char*>(v) + 16 * q, 16);
      reinterpret_cast<uint4*>(dst)[q] = u;
    }
  } else {
#pragma unroll
    for (int t = 0; t < kRun; ++t)
      if (t < int(count)) dst[t] = v[t];
  }
}

// y[plane][i][j] = full[plane][s i][s j] for every element of y.
template <typename T>
__global__ void __launch_bounds__(kCopyThreads)
    subsample_kernel(const T* __restrict__ full, T* __restrict__ y, int64_t planes, uint32_t per_slab,
                     FastDivmod out_plane, FastDivmod out_row, uint32_t H, uint32_t W, uint32_t s) {
  const Slab sl = slab_of(planes, per_slab);
  const uint32_t n = sl.planes * out_plane.divisor, Ho = out_plane.divisor / out_row.divisor, Wo = out_row.divisor;
  const T* src = full + sl.plane0 * H * W;
  T* dst = y + sl.plane0 * out_plane.divisor;
  for (uint32_t e0 = (blockIdx.x * blockDim.x + threadIdx.x) * kRun; e0 < n; e0 += gridDim.x * blockDim.x * kRun) {
    uint32_t p, rem, i, j;
    out_plane.divmod(e0, p, rem);
    out_row.divmod(rem, i, j);
    uint32_t at = (p * H + i * s) * W + j * s;  // full-grid offset of output (p, i, j)
    const uint32_t count = n - e0 < kRun ? n - e0 : kRun;
    T v[kRun];
#pragma unroll
    for (int t = 0; t < kRun; ++t) {
      v[t] = t < int(count) ? src[at] : T(0.0f);
      at += s;
      if (++j == Wo) {  // the next output row, or the next plane's first
        j = 0;
        if (++i == Ho) i = 0, ++p;
        at = (p * H + i * s) * W;
      }
    }
    store_run(dst + e0, v, count);
  }
}

// full[plane][p][q] = dy[plane][p / s][q / s] where s divides p and q, else 0, for every element
// of the full grid.
template <typename T>
__global__ void __launch_bounds__(kCopyThreads)
    spread_kernel(const T* __restrict__ dy, T* __restrict__ full, int64_t planes, uint32_t per_slab,
                  FastDivmod full_plane, FastDivmod full_row, FastDivmod stride, uint32_t Ho, uint32_t Wo) {
  const Slab sl = slab_of(planes, per_slab);
  const uint32_t n = sl.planes * full_plane.divisor, H = full_plane.divisor / full_row.divisor, W = full_row.divisor;
  const uint32_t s = stride.divisor;
  const T* src = dy + sl.plane0 * Ho * Wo;
  T* dst = full + sl.plane0 * full_plane.divisor;
  for (uint32_t e0 = (blockIdx.x * blockDim.x + threadIdx.x) * kRun; e0 < n; e0 += gridDim.x * blockDim.x * kRun) {
    uint32_t p, rem, row, col, i, ri, j, rj;
    full_plane.divmod(e0, p, rem);
    full_row.divmod(rem, row, col);
    stride.divmod(row, i, ri);  // row = s i + ri
    stride.divmod(col, j, rj);  // col = s j + rj
    uint32_t src_row = (p * Ho + i) * Wo;  // dy's row i of plane p (read where ri == 0)
    const uint32_t count = n - e0 < kRun ? n - e0 : kRun;
    T v[kRun];
#pragma unroll
    for (int t = 0; t < kRun; ++t) {
      v[t] = (ri | rj) == 0 && t < int(count) ? src[src_row + j] : T(0.0f);
      if (++rj == s) rj = 0, ++j;
      if (++col == W) {  // the next row, or the next plane's first
        col = 0, rj = 0, j = 0;
        if (++ri == s) ri = 0, ++i;
        if (++row == H) row = 0, ri = 0, i = 0, ++p;
        src_row = (p * Ho + i) * Wo;
      }
    }
    store_run(dst + e0, v, count);
  }
}

// Planes per slab (fewer than 2^31 elements of the full grid, whose planes are the larger) and the
// launch grid over `elements_per_plane` elements of each plane; false when the slabs would not fit
// in a grid column (more than 2^47 elements: the API allows 2^40).
bool copy_grid(int64_t planes, int64_t H, int64_t W, int64_t elements_per_plane, uint32_t* per_slab, dim3* grid) {
  const int64_t hw = H * W;
  if (hw < 1 || hw > INT32_MAX) return false;
  const int64_t each = std::max<int64_t>(1, std::min<int64_t>(planes, INT32_MAX / hw));
  const int64_t slabs = (planes + each - 1) / each;
  if (slabs > 65535) return false;
  const int64_t blocks = (each * elements_per_plane + int64_t(kCopyThreads) * kRun - 1) / (int64_t(kCopyThreads) * kRun);
  *per_slab = uint32_t(each);
  *grid = dim3(unsigned(std::min<int64_t>(blocks, kMaxCopyBlocksPerSlab)), unsigned(slabs));
  return true;
}

}  // namespace

template <typename T>
cudaError_t launch_subsample(const T* full, T* y, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int s,
                             cudaStream_t stream) {
  if (planes == 0 || Ho == 0 || Wo == 0) return cudaSuccess;
  uint32_t per_slab;
  dim3 grid;
  if (!copy_grid(planes, H, W, Ho * Wo, &per_slab, &grid)) return cudaErrorInvalidValue;
  subsample_kernel<T><<<grid, kCopyThreads, 0, stream>>>(full, y, planes, per_slab, FastDivmod(uint32_t(Ho * Wo)),
                                                         FastDivmod(uint32_t(Wo)), uint32_t(H), uint32_t(W),
                                                         uint32_t(s));
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_spread(const T* dy, T* full, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int s,
                          cudaStream_t stream) {
  if (planes == 0 || H == 0 || W == 0) return cudaSuccess;
  uint32_t per_slab;
  dim3 grid;
  if (!copy_grid(planes, H, W, H * W, &per_slab, &grid)) return cudaErrorInvalidValue;
  spread_kernel<T><<<grid, kCopyThreads, 0, stream>>>(dy, full, planes, per_slab, FastDivmod(uint32_t(H * W)),
                                                      FastDivmod(uint32_t(W)), FastDivmod(uint32_t(s)), uint32_t(Ho),
                                                      uint32_t(Wo));
  return cudaGetLastError();
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
