#include "cuda/im2win/splitk_reduce.h"

#include <cstdint>

namespace winconv::im2win {
namespace {

// One output element per thread, in y order: NHWC y is the [m][n] layout of the partials; NCHW
// y[img][n][pq] reads the partials n apart, which stay in L2 (they are small: split-K runs only
// for GEMMs too small to fill the GPU).
template <bool kOutNchw>
__global__ void splitk_reduce_kernel(const ConvGemmParams p, const SplitKParams sk) {
  const int64_t total = int64_t(p.m) * p.n;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t src = e;
    if (kOutNchw) {
      const int64_t img = e / (int64_t(p.n) * p.pq), rem = e - img * int64_t(p.n) * p.pq;
      const int64_t n = rem / p.pq, pix = rem - n * p.pq;
      src = (img * p.pq + pix) * p.n + n;
    }
    float sum = 0.f;
    for (int s = 0; s < sk.k_splits; ++s) sum += sk.partial[s * sk.partial_stride + src];
    p.y[e] = sum;
  }
}

}  // namespace

cudaError_t launch_splitk_reduce(const ConvGemmParams& p, const SplitKParams& sk, bool out_nchw, cudaStream_t stream) {
  const int64_t total = int64_t(p.m) * p.n;
  constexpr int kThreads = 256;
  const int64_t want = (total + kThreads - 1) / kThreads;
  const unsigned blocks = unsigned(want < 65535 ? want : 65535);  // grid-stride beyond
  if (out_nchw) splitk_reduce_kernel<true><<<blocks, kThreads, 0, stream>>>(p, sk);
  else splitk_reduce_kernel<false><<<blocks, kThreads, 0, stream>>>(p, sk);
  return cudaGetLastError();
}

}  // namespace winconv::im2win
