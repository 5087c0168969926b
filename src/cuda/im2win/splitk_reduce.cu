#include "cuda/im2win/splitk_reduce.h"

#include <cstdint>

namespace winconv::im2win {
namespace {

// One output element per thread, in y order, over the elements of rows [m_begin, m): NHWC y is
// the [m][n] layout of the partials; NCHW y[img][n][pq] walks whole images from the one holding
// row m_begin (its rows before m_begin are skipped) and reads the partials n apart, which stay in
// L2 (they are small: split-K runs only for GEMMs, or tails of GEMMs, too small to fill the GPU).
// first: the first element of y the walk covers.
template <bool kOutNchw>
__global__ void splitk_reduce_kernel(const ConvGemmParams p, const SplitKParams sk, int64_t first) {
  const int64_t total = int64_t(p.m) * p.n - first;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = first + i;
    int64_t src = e - int64_t(sk.m_begin) * p.n;
    if (kOutNchw) {
      const int64_t img = e / (int64_t(p.n) * p.pq), rem = e - img * int64_t(p.n) * p.pq;
      const int64_t n = rem / p.pq, row = img * p.pq + (rem - n * p.pq);
      if (row < sk.m_begin) continue;
      src = (row - sk.m_begin) * p.n + n;
    }
    float sum = 0.f;
    for (int s = 0; s < sk.k_splits; ++s) sum += sk.partial[s * sk.partial_stride + src];
    p.y[e] = sum;
  }
}

}  // namespace

cudaError_t launch_splitk_reduce(const ConvGemmParams& p, const SplitKParams& sk, bool out_nchw, cudaStream_t stream) {
  // NCHW: from the start of the image that holds row m_begin; NHWC: from row m_begin.
  const int64_t first = out_nchw ? int64_t(sk.m_begin / p.pq) * p.pq * p.n : int64_t(sk.m_begin) * p.n;
  const int64_t total = int64_t(p.m) * p.n - first;
  constexpr int kThreads = 256;
  const int64_t want = (total + kThreads - 1) / kThreads;
  const unsigned blocks = unsigned(want < 65535 ? want : 65535);  // grid-stride beyond
  if (out_nchw) splitk_reduce_kernel<true><<<blocks, kThreads, 0, stream>>>(p, sk, first);
  else splitk_reduce_kernel<false><<<blocks, kThreads, 0, stream>>>(p, sk, first);
  return cudaGetLastError();
}

}  // namespace winconv::im2win
