// Whether TF32 tensor-core MMAs add throughput beside the FP32 FMA pipe on one SM, at the clock the
// board holds under that load. The question behind it: the big_L2 training step is bound by the
// CUDA cores' issue slots and shared-memory wavefronts (docs/perf-notes.md), and a banded
// depthwise conv can run on tensor cores in 3xTF32 at about a fifth of their products useful. That
// only pays if the tensor cores run *beside* the FFMA pipe, not instead of it, and if the power
// cap (the step already holds the board at ~700 W, 1800 MHz) leaves the clock where it is.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a dev/cuda/fma_mma_overlap_bench.cu \
//     -o fma_mma_overlap_bench
//   ./fma_mma_overlap_bench [seconds per mode, default 1]
// Modes (16 warps per block, one block per SM): ffma (every warp 16 independent FMA chains),
// tensor (every warp or warpgroup 4 independent accumulator chains: mma.sync m16n8k8, or wgmma
// m64nNk8 with N = 8, 16, 32, both TF32), split (the kinds alternate by warpgroup, so each
// scheduler holds both), mixed (every warp both: the tensor instructions issued, then FFMAs, then
// the wait). The clock is read as clock64 ticks over globaltimer nanoseconds in each block; FLOPs
// are 2 per multiply-add, tensor ones as issued. Not part of the library.
#include "strip_bench_common.cuh"  // STRIP_BENCH_CHECK, global_ns

using strip_bench::global_ns;

constexpr int kThreads = 512, kFmaChains = 16, kMmaChains = 4, kUnroll = 8;

enum Mode { kFfma = 0, kMma = 1, kSplit = 2, kMixed = 3 };
// The tensor-core instruction: mma.sync m16n8k8 per warp (operands in registers), or wgmma
// m64nNk8 per warpgroup of 4 warps (operands from shared memory, asynchronous: the warps may
// issue FFMAs while it runs, as FlashAttention-3 overlaps its softmax with its GEMMs).
enum Tensor { kSync = 0, kWgmma8 = 8, kWgmma16 = 16, kWgmma32 = 32 };

// A shared-memory matrix descriptor without swizzle: start address, leading and stride byte
// offsets (all >> 4). The bench only needs in-range addresses, not a meaningful layout.
__device__ __forceinline__ unsigned long long smem_desc(const void* p, unsigned lbo, unsigned sbo) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  return (unsigned long long)((addr >> 4) & 0x3fff) | ((unsigned long long)((lbo >> 4) & 0x3fff) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3fff) << 32);
}

template <int N>
__device__ __forceinline__ void wgmma_block(float (&d)[kMmaChains][N / 2], unsigned long long da,
                                            unsigned long long db);
template <>
__device__ __forceinline__ void wgmma_block<8>(float (&d)[kMmaChains][4], unsigned long long da,
                                               unsigned long long db) {
#pragma unroll
  for (int j = 0; j < kMmaChains; ++j)
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%0,%1,%2,%3}, %4, %5, 1, 1, 1;"
        : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
        : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void wgmma_block<16>(float (&d)[kMmaChains][8], unsigned long long da,
                                                unsigned long long db) {
#pragma unroll
  for (int j = 0; j < kMmaChains; ++j)
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, 1, 1, 1;"
        : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3]), "+f"(d[j][4]), "+f"(d[j][5]),
          "+f"(d[j][6]), "+f"(d[j][7])
        : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void wgmma_block<32>(float (&d)[kMmaChains][16], unsigned long long da,
                                                unsigned long long db) {
#pragma unroll
  for (int j = 0; j < kMmaChains; ++j)
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15},"
        " %16, %17, 1, 1, 1;"
        : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3]), "+f"(d[j][4]), "+f"(d[j][5]),
          "+f"(d[j][6]), "+f"(d[j][7]), "+f"(d[j][8]), "+f"(d[j][9]), "+f"(d[j][10]), "+f"(d[j][11]),
          "+f"(d[j][12]), "+f"(d[j][13]), "+f"(d[j][14]), "+f"(d[j][15])
        : "l"(da), "l"(db));
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

__device__ __forceinline__ void fma_block(float (&a)[kFmaChains], float b, float c) {
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a[j]) : "f"(b), "f"(c));
}

__device__ __forceinline__ void mma_block(float (&d)[kMmaChains][4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#pragma unroll
  for (int j = 0; j < kMmaChains; ++j)
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// fma_iters / mma_iters: loop trips of a warp doing that kind (each trip kUnroll blocks).
template <int M, int TK>
__global__ void __launch_bounds__(kThreads, 1) overlap_kernel(int fma_iters, int mma_iters, float* sink,
                                                             unsigned long long* clocks) {
  __shared__ __align__(128) float tiles[4096];
  const int warp = threadIdx.x / 32;
  const bool does_fma = M == kFfma || M == kMixed || (M == kSplit && ((warp >> 2) & 1) == 0);
  const bool does_mma = M == kMma || M == kMixed || (M == kSplit && ((warp >> 2) & 1) == 1);
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) tiles[i] = 1e-3f * float(i % 7);
  __syncthreads();
  const unsigned long long t0 = global_ns();
  const long long c0 = clock64();
  float a[kFmaChains];
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) a[j] = float(threadIdx.x + j) * 1e-3f;
  constexpr int kAcc = TK == kSync ? 4 : TK / 2;
  float d[kMmaChains][kAcc] = {};
  const float bf = 0.999f + float(threadIdx.x) * 1e-9f, cf = 1e-6f;
  const unsigned av[4] = {__float_as_uint(bf), __float_as_uint(cf), __float_as_uint(bf), __float_as_uint(cf)};
  const unsigned bv[2] = {__float_as_uint(cf), __float_as_uint(bf)};
  // A: 64 x 8 tf32 (2 KiB) at tiles[0], B: TK x 8 at tiles[1024]; core matrices 8 rows x 16 bytes.
  const unsigned long long da = smem_desc(tiles, 128, 256), db = smem_desc(tiles + 1024, 128, 256);
  // One trip of tensor work: kUnroll blocks of kMmaChains instructions, waited for at its end
  // (between issue and wait the caller may run FFMAs: `between`).
  auto tensor_trip = [&](auto between) {
    if constexpr (TK == kSync) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) mma_block(reinterpret_cast<float(&)[kMmaChains][4]>(d), av, bv);
      between();
    } else {
      wgmma_fence();
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wgmma_block<TK>(d, da, db);
      wgmma_commit();
      between();
      wgmma_wait0();
    }
  };
  if (M == kMixed) {
    // Both kinds in one stream, in the ratio of the iteration counts (fma_iters per mma_iters).
    const int per = max(1, fma_iters / max(1, mma_iters));
    for (int i = 0; i < mma_iters; ++i)
      tensor_trip([&] {
        for (int f = 0; f < per; ++f)
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) fma_block(a, bf, cf);
      });
  } else {
    if (does_fma)
      for (int i = 0; i < fma_iters; ++i)
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) fma_block(a, bf, cf);
    if (does_mma)
      for (int i = 0; i < mma_iters; ++i) tensor_trip([] {});
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) s += a[j];
#pragma unroll
  for (int j = 0; j < kMmaChains; ++j)
#pragma unroll
    for (int e = 0; e < kAcc; ++e) s += d[j][e];
  if (s == 12345.f) sink[blockIdx.x * blockDim.x + threadIdx.x] = s;  // keeps the work
  __syncthreads();
  if (threadIdx.x == 0) {
    clocks[2 * blockIdx.x] = (unsigned long long)(clock64() - c0);
    clocks[2 * blockIdx.x + 1] = global_ns() - t0;
  }
}

struct Run {
  double ms, fma_tflops, mma_tflops, mhz;
};

template <int M, int TK>
Run run(int fma_iters, int mma_iters, int blocks, float* sink, unsigned long long* clocks) {
  cudaEvent_t e0, e1;
  STRIP_BENCH_CHECK(cudaEventCreate(&e0));
  STRIP_BENCH_CHECK(cudaEventCreate(&e1));
  overlap_kernel<M, TK><<<blocks, kThreads>>>(fma_iters / 8 + 1, mma_iters / 8 + 1, sink, clocks);  // warm-up
  STRIP_BENCH_CHECK(cudaEventRecord(e0));
  overlap_kernel<M, TK><<<blocks, kThreads>>>(fma_iters, mma_iters, sink, clocks);
  STRIP_BENCH_CHECK(cudaEventRecord(e1));
  STRIP_BENCH_CHECK(cudaEventSynchronize(e1));
  STRIP_BENCH_CHECK(cudaGetLastError());
  float ms = 0.f;
  STRIP_BENCH_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  std::vector<unsigned long long> c(2 * blocks);
  STRIP_BENCH_CHECK(cudaMemcpy(c.data(), clocks, c.size() * 8, cudaMemcpyDeviceToHost));
  double ticks = 0, ns = 0;
  for (int b = 0; b < blocks; ++b) ticks += double(c[2 * b]), ns += double(c[2 * b + 1]);
  const int warps = blocks * kThreads / 32;
  const double fma_warps = M == kFfma || M == kMixed ? warps : M == kSplit ? warps / 2 : 0;
  const double mma_warps = M == kMma || M == kMixed ? warps : M == kSplit ? warps / 2 : 0;
  const int mixed_per = std::max(1, fma_iters / std::max(1, mma_iters));
  const double fma_trips = M == kMixed ? double(mma_iters) * mixed_per : fma_iters;
  const double fma_flops = fma_warps * 32 * fma_trips * kUnroll * kFmaChains * 2;
  // Multiply-adds per instruction and warp: 16 x 8 x 8 (mma.sync), 64 x N x 8 over 4 warps (wgmma).
  const double per_warp = TK == kSync ? 16.0 * 8 * 8 : 64.0 * TK * 8 / 4;
  const double mma_flops = mma_warps * double(mma_iters) * kUnroll * kMmaChains * per_warp * 2;
  STRIP_BENCH_CHECK(cudaEventDestroy(e0));
  STRIP_BENCH_CHECK(cudaEventDestroy(e1));
  return {ms, fma_flops / (ms * 1e9), mma_flops / (ms * 1e9), ticks / ns * 1e3};
}

template <int TK>
void compare(const char* name, double seconds, int blocks, float* sink, unsigned long long* clocks) {
  // Calibrate each kind alone to `seconds`; the split run gives each kind half the warps with the
  // same per-warp trips (half the work of its alone run), the mixed run every warp both.
  Run f = run<kFfma, TK>(20000, 0, blocks, sink, clocks);
  const int fma_iters = int(20000 * seconds * 1e3 / f.ms);
  Run m = run<kMma, TK>(0, 2000, blocks, sink, clocks);
  const int mma_iters = int(2000 * seconds * 1e3 / m.ms);
  f = run<kFfma, TK>(fma_iters, 0, blocks, sink, clocks);
  m = run<kMma, TK>(0, mma_iters, blocks, sink, clocks);
  const Run s = run<kSplit, TK>(fma_iters, mma_iters, blocks, sink, clocks);
  const Run x = run<kMixed, TK>(fma_iters, mma_iters, blocks, sink, clocks);
  auto row = [&](const char* mode, const Run& r) {
    // The fraction of each kind's alone rate reached, summed: 1 = the two kinds take turns,
    // 2 = they run side by side at full rate.
    const double sum = r.fma_tflops / f.fma_tflops + r.mma_tflops / m.mma_tflops;
    std::printf("%-10s %-6s %9.1f %12.2f %12.2f %9.0f %12.2f\n", name, mode, r.ms, r.fma_tflops, r.mma_tflops, r.mhz,
                sum);
  };
  row("ffma", f);
  row("tensor", m);
  row("split", s);
  row("mixed", x);
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  int sms = 0;
  STRIP_BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms;
  float* sink;
  unsigned long long* clocks;
  STRIP_BENCH_CHECK(cudaMalloc(&sink, size_t(blocks) * kThreads * 4));
  STRIP_BENCH_CHECK(cudaMalloc(&clocks, size_t(blocks) * 16));
  std::printf("%-10s %-6s %9s %12s %12s %9s %12s\n", "tensor", "mode", "ms", "FFMA TFLOPS", "MMA TFLOPS", "MHz",
              "sum of rates");
  compare<kSync>("mma.sync", seconds, blocks, sink, clocks);
  compare<kWgmma8>("wgmma n8", seconds, blocks, sink, clocks);
  compare<kWgmma16>("wgmma n16", seconds, blocks, sink, clocks);
  compare<kWgmma32>("wgmma n32", seconds, blocks, sink, clocks);
  STRIP_BENCH_CHECK(cudaFree(sink));
  STRIP_BENCH_CHECK(cudaFree(clocks));
  return 0;
}
