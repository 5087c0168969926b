// What the conv2d dev tools share (conv_tile_sweep.cu, conv_alloc_probe.cu): the CUDA error check
// (strip_bench_common.cuh's), the deterministic input fill, the output hash and the mean time of
// back-to-back launches. Dev tools only, not part of the library.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "strip_bench_common.cuh"

// The dev benches' error check (exits on a CUDA error, naming the line).
#define CHECK_CUDA(e) STRIP_BENCH_CHECK(e)

namespace conv_dev {

// Values in [-1, 1) from a hash of the index: the same inputs in every build and process.
__global__ void fill_uniform(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = float(h & 0xffff) / 32768.f - 1.f;
  }
}

inline void fill(float* p, int64_t n, uint32_t seed) { fill_uniform<<<1024, 256>>>(p, n, seed); }

// FNV-1a of the output's bytes: equal across builds whose kernels sum in the same order.
inline uint64_t output_hash(const std::vector<float>& y) {
  uint64_t hash = 1469598103934665603ull;
  for (float v : y) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    hash = (hash ^ bits) * 1099511628211ull;
  }
  return hash;
}

// Mean milliseconds of `iters` back-to-back calls of run() (CUDA events around all of them).
template <class Run>
float mean_ms(cudaEvent_t e0, cudaEvent_t e1, int iters, Run run) {
  CHECK_CUDA(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) run();
  CHECK_CUDA(cudaEventRecord(e1));
  CHECK_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  return ms / iters;
}

}  // namespace conv_dev
