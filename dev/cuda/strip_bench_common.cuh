// What the dev benches share (dwconv_strip_bench.cu, corr_strip_bench.cu, conv_corr_block_bench.cu,
// wtconv_dw_bench.cu, wtconv_tile_sweep.cu; fma_mma_overlap_bench.cu, wave_tail_probe.cu and
// conv_dev_common.cuh take the error check and the device timer alone):
// the CUDA error check, the device's nanosecond timer, the opaque pass offset, the median of
// CUDA-event timings of a launch, the arguments (planes, H, W) and the result table with its
// float64 check. Dev tools only, not part of the library.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define STRIP_BENCH_CHECK(x)                                                             \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace strip_bench {

struct Result {
  const char* name;
  double ms, tflops, err;
  int regs, blocks_per_sm;
};

// A kernel's registers and resident blocks, and the grid: planes x splits blocks, the splits of a
// plane taking its tiles in turn, enough blocks for every resident slot and at most one per tile.
struct Geometry {
  int regs, blocks_per_sm, splits;
  unsigned blocks;
};
template <typename Kernel>
Geometry geometry(Kernel kernel, int threads, int planes, int tiles) {
  cudaFuncAttributes attr{};
  STRIP_BENCH_CHECK(cudaFuncGetAttributes(&attr, kernel));
  int bps = 0, sms = 0;
  STRIP_BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kernel, threads, 0));
  STRIP_BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int splits = std::max(1, std::min(tiles, (sms * bps + planes - 1) / planes));
  return {attr.numRegs, bps, splits, unsigned(planes) * unsigned(splits)};
}

// n floats uniform in [-1, 1), on the host and in a fresh device buffer (*dev).
inline std::vector<float> random_floats(size_t n, unsigned seed, float** dev) {
  std::vector<float> v(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& e : v) e = dist(rng);
  STRIP_BENCH_CHECK(cudaMalloc(dev, n * 4));
  STRIP_BENCH_CHECK(cudaMemcpy(*dev, v.data(), n * 4, cudaMemcpyHostToDevice));
  return v;
}

// The device's global nanosecond timer (%globaltimer), the same on every SM.
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// 0, read afresh from device memory on every call: the offset that makes each timed pass over a
// staged tile reload its rows and redo its work, as every phase of the WTConv kernels does. An
// empty asm statement on the offset, used before, is invisible to ptxas, which could then hoist
// loop-invariant loads, or a whole pass whose result is overwritten, out of the pass loop.
__device__ int g_zero_word;
__device__ __forceinline__ int opaque_zero() { return *static_cast<volatile int*>(&g_zero_word); }

// Median of `runs` timings of launch() (CUDA events around each).
template <typename Launch>
double median_ms(Launch launch, int runs = 9) {
  cudaEvent_t a, b;
  STRIP_BENCH_CHECK(cudaEventCreate(&a));
  STRIP_BENCH_CHECK(cudaEventCreate(&b));
  std::vector<float> times;
  for (int rep = 0; rep < runs; ++rep) {
    STRIP_BENCH_CHECK(cudaEventRecord(a));
    launch();
    STRIP_BENCH_CHECK(cudaEventRecord(b));
    STRIP_BENCH_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    STRIP_BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
    times.push_back(ms);
  }
  STRIP_BENCH_CHECK(cudaEventDestroy(a));
  STRIP_BENCH_CHECK(cudaEventDestroy(b));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// planes, H, W from argv (default: big_L2's 2048 planes of 512 x 512); false on a bad argument.
inline bool parse_shape(int argc, char** argv, int w_multiple, int* planes, int* H, int* W) {
  *planes = argc > 1 ? std::atoi(argv[1]) : 2048;
  *H = argc > 2 ? std::atoi(argv[2]) : 512;
  *W = argc > 3 ? std::atoi(argv[3]) : 512;
  if (*planes >= 1 && *H >= 1 && *W >= 1 && *W % w_multiple == 0) return true;
  std::fprintf(stderr, "usage: %s [planes [H [W]]] (all >= 1, W a multiple of %d)\n", argv[0], w_multiple);
  return false;
}

// Prints the table; returns the number of variants whose relative error against float64 exceeds
// tol (NaN included).
inline int print_results(const std::vector<Result>& rs, double tol) {
  std::printf("%-22s %8s %8s %6s %6s %9s\n", "variant", "ms", "TFLOPS", "regs", "blk/SM", "rel_err");
  int bad = 0;
  for (const Result& r : rs) {
    std::printf("%-22s %8.3f %8.2f %6d %6d %9.2e\n", r.name, r.ms, r.tflops, r.regs, r.blocks_per_sm, r.err);
    if (!(r.err <= tol)) ++bad;
  }
  if (bad) std::fprintf(stderr, "%d variant(s) failed the float64 check\n", bad);
  return bad;
}

}  // namespace strip_bench
