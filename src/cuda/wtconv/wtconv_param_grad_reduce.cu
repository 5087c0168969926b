// Parameter gradients from the per-block correlation partials: one warp per (channel, filter)
// sums the splits in a fixed order (in double), so gradients are bit-identical run to run.
//   dW0 = s0 * C0, db = s0 * sum(D), ds0 = sum(W0 * C0) + b * sum(D),
//   dW_l = s_l * C_l, ds_l = sum(W_l * C_l).
#include "wtconv_kernels.cuh"

namespace winconv {
namespace wtconv_detail {

// Sum of a warp's doubles in a fixed shuffle tree (same order every run), result in lane 0.
__device__ __forceinline__ double warp_sum_fixed(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

// One warp per (channel, filter): lane e sums the splits of entries e, e + 32, ... in split order
// (a thread per filter left ~kk * splits dependent-latency loads on one thread).
__global__ void param_grad_reduce_kernel(ParamGradArgs a) {
  const int filters = 1 + 4 * a.L;
  const int64_t w = ((int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= int64_t(a.C) * filters) return;  // whole warps leave together
  const int c = int(w / filters), f = int(w % filters);
  const int kk = a.k * a.k;
  if (f == 0) {
    const int n = a.splits[1], stride = 5 * kk + 1;
    const float* src = a.partial[1] + int64_t(c) * n * stride;
    const double s0 = a.s0[c];
    double ds = 0.0;
    for (int e = lane; e < kk; e += 32) {
      double sum = 0.0;
      for (int q = 0; q < n; ++q) sum += src[int64_t(q) * stride + e];
      a.gw0[int64_t(c) * kk + e] = float(s0 * sum);
      ds += double(a.w0[int64_t(c) * kk + e]) * sum;
    }
    ds = warp_sum_fixed(ds);
    if (lane == 0) {
      double dsum = 0.0;
      for (int q = 0; q < n; ++q) dsum += src[int64_t(q) * stride + kk];
      if (a.b0) ds += double(a.b0[c]) * dsum;
      if (a.gb0) a.gb0[c] = float(s0 * dsum);
      a.gs0[c] = float(ds);
    }
    return;
  }
  const int l = 1 + (f - 1) / 4, sb = (f - 1) % 4;
  // A level l >= 2 ran at the central kl x kl taps (plan.h, level_kernel_size): the others met
  // only padding, and their gradients are zero.
  const int kl = l == 1 ? a.k : a.kl[l], off = (a.k - kl) / 2, kkl = kl * kl;
  const float* src;
  int n, stride;
  if (l == 1) {
    n = a.splits[1]; stride = 5 * kk + 1;
    src = a.partial[1] + int64_t(c) * n * stride + kk + 1 + sb * kk;
  } else {
    n = a.splits[l]; stride = 4 * kkl;
    src = a.partial[l] + int64_t(c) * n * stride + sb * kkl;
  }
  const int64_t ch = 4 * int64_t(c) + sb;
  const double sl = a.sl[l - 1][ch];
  double ds = 0.0;
  for (int e = lane; e < kk; e += 32) {
    const int i = e / a.k - off, j = e % a.k - off;
    double sum = 0.0;
    if (i >= 0 && i < kl && j >= 0 && j < kl)
      for (int q = 0; q < n; ++q) sum += src[int64_t(q) * stride + i * kl + j];
    a.gwl[l - 1][ch * kk + e] = float(sl * sum);
    ds += double(a.wl[l - 1][ch * kk + e]) * sum;
  }
  ds = warp_sum_fixed(ds);
  if (lane == 0) a.gsl[l - 1][ch] = float(ds);
}

cudaError_t launch_param_grad_reduce(const ParamGradArgs& a, cudaStream_t stream) {
  const int64_t threads = int64_t(a.C) * (1 + 4 * a.L) * 32;
  const int block = 128;
  // Up to ~2.2e9 blocks (C = 2^28 - 1 at L = 8): a 2-D grid keeps each dimension in range.
  const int64_t blocks = (threads + block - 1) / block;
  const dim3 grid(unsigned(std::min<int64_t>(blocks, 65535)), unsigned((blocks + 65534) / 65535));
  param_grad_reduce_kernel<<<grid, block, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace wtconv_detail
}  // namespace winconv
