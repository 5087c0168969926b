// Does the block scheduler place a grid's last partial wave the same way in every launch? The
// 256-channel 3 x 3 layer at 14 x 14 (NCHW, 128x128: 392 tiles at two resident blocks per SM, 264
// slots on 132 SMs) runs at 0.70 or 0.88 ms per launch with the same bytes, clock and placement
// (docs/conv2d.md after v20). The reading to test: after the first wave, the 128 tiles left land
// one per SM in some launches and two per SM on 64 SMs in others, and a tile alone on its SM
// runs faster than one that shares it.
//
// This probe launches a stand-in of that grid: TILES blocks of 256 threads, each a fixed amount of
// FMA work, with enough dynamic shared memory that RESIDENT blocks fit an SM (default 2). Each
// block records its SM and its start and end (globaltimer). Per launch it prints the event time,
// the tail (blocks that started after the first wave), how many SMs ran two or more tail blocks
// at once, and the mean time of a first-wave and of a tail block.
//   - launches whose time follows the count of doubled SMs: the reading holds;
//   - the same count in every launch: the scheduler is steady, look elsewhere.
// PERSISTENT = 1 launches one block per slot instead, each walking the tiles t, t + slots, ...
// (the fix the reading points to): its tail should be spread one per SM in every launch.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a dev/cuda/wave_tail_probe.cu -o wave_tail_probe
//   ./wave_tail_probe [TILES=392] [RESIDENT=2] [WORK=16384] [LAUNCHES=40] [PERSISTENT=0]
//
// Prints "launch ms span_us tail doubled_sms wave1_us tail_us" per launch. Not part of the library.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "strip_bench_common.cuh"  // STRIP_BENCH_CHECK, global_ns

using strip_bench::global_ns;

namespace {

constexpr int kThreads = 256, kChains = 8;

struct BlockRecord {
  unsigned smid;
  unsigned long long start, end;
};

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// One tile: `work` rounds of kChains independent FMA chains per thread (the FFMA pipe saturated
// at one resident block), the shared memory touched so the allocation is real. A persistent grid
// walks the tiles by gridDim.x; otherwise each block takes one tile.
__global__ void __launch_bounds__(kThreads) tile_work(BlockRecord* rec, float* sink, int tiles, int work,
                                                      bool persistent) {
  extern __shared__ float smem[];
  const int step = persistent ? gridDim.x : tiles;
  for (int t = blockIdx.x; t < tiles; t += step) {
    __syncthreads();
    const unsigned long long t0 = global_ns();
    float acc[kChains];
#pragma unroll
    for (int c = 0; c < kChains; ++c) acc[c] = threadIdx.x * 1e-3f + c + t;
    for (int i = 0; i < work; ++i) {
#pragma unroll
      for (int c = 0; c < kChains; ++c) acc[c] = fmaf(acc[c], 0.999999f, 1e-6f);
    }
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < kChains; ++c) s += acc[c];
    smem[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
      sink[t] = smem[kThreads - 1];
      rec[t] = BlockRecord{sm_id(), t0, global_ns()};
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int tiles = argc > 1 ? std::max(1, std::atoi(argv[1])) : 392;
  const int resident = argc > 2 ? std::max(1, std::atoi(argv[2])) : 2;
  const int work = argc > 3 ? std::max(1, std::atoi(argv[3])) : 16384;
  const int launches = argc > 4 ? std::max(1, std::atoi(argv[4])) : 40;
  const bool persistent = argc > 5 && std::atoi(argv[5]) != 0;

  cudaDeviceProp prop;
  STRIP_BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  // Enough shared memory per block that `resident` blocks fit an SM and one more does not.
  const size_t per_sm = prop.sharedMemPerMultiprocessor, reserved = prop.reservedSharedMemPerBlock;
  size_t smem = per_sm / (resident + 1) - reserved + 1024;
  smem = std::min(smem, size_t(prop.sharedMemPerBlockOptin));
  STRIP_BENCH_CHECK(cudaFuncSetAttribute(tile_work, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm_blocks = 0;
  STRIP_BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_blocks, tile_work, kThreads, smem));
  const int slots = per_sm_blocks * prop.multiProcessorCount;
  const int grid = persistent ? std::min(slots, tiles) : tiles;
  std::printf("# %s, %d SMs, %d blocks per SM (%zu B shared each), %d slots, %d tiles, grid %d%s\n", prop.name,
              prop.multiProcessorCount, per_sm_blocks, smem, slots, tiles, grid, persistent ? " (persistent)" : "");

  BlockRecord* rec_d = nullptr;
  float* sink_d = nullptr;
  STRIP_BENCH_CHECK(cudaMalloc(&rec_d, tiles * sizeof(BlockRecord)));
  STRIP_BENCH_CHECK(cudaMalloc(&sink_d, tiles * sizeof(float)));
  cudaEvent_t e0, e1;
  STRIP_BENCH_CHECK(cudaEventCreate(&e0));
  STRIP_BENCH_CHECK(cudaEventCreate(&e1));
  std::vector<BlockRecord> rec(tiles);
  std::printf("launch ms span_us tail doubled_sms wave1_us tail_us\n");
  for (int l = -2; l < launches; ++l) {  // two launches to warm up
    STRIP_BENCH_CHECK(cudaEventRecord(e0));
    tile_work<<<grid, kThreads, smem>>>(rec_d, sink_d, tiles, work, persistent);
    STRIP_BENCH_CHECK(cudaEventRecord(e1));
    STRIP_BENCH_CHECK(cudaEventSynchronize(e1));
    STRIP_BENCH_CHECK(cudaGetLastError());
    if (l < 0) continue;
    float ms = 0;
    STRIP_BENCH_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    STRIP_BENCH_CHECK(cudaMemcpy(rec.data(), rec_d, tiles * sizeof(BlockRecord), cudaMemcpyDeviceToHost));
    // The first wave starts within a few microseconds; a tail tile can only start once some tile
    // has ended, so the tail is every tile that started after the earliest end.
    unsigned long long first = rec[0].start, last = rec[0].end, earliest_end = rec[0].end;
    for (const BlockRecord& r : rec)
      first = std::min(first, r.start), last = std::max(last, r.end), earliest_end = std::min(earliest_end, r.end);
    double wave1 = 0, tail = 0;
    int n_wave1 = 0, n_tail = 0;
    std::map<unsigned, std::vector<const BlockRecord*>> tail_by_sm;
    for (const BlockRecord& r : rec) {
      if (r.start < earliest_end) {
        wave1 += double(r.end - r.start), ++n_wave1;
      } else {
        tail += double(r.end - r.start), ++n_tail;
        tail_by_sm[r.smid].push_back(&r);
      }
    }
    // An SM is doubled when two of its tail tiles overlap in time.
    int doubled = 0;
    for (auto& kv : tail_by_sm) {
      std::vector<const BlockRecord*>& v = kv.second;
      bool overlap = false;
      for (size_t i = 0; i < v.size() && !overlap; ++i)
        for (size_t j = i + 1; j < v.size() && !overlap; ++j)
          overlap = v[i]->start < v[j]->end && v[j]->start < v[i]->end;
      doubled += overlap;
    }
    std::printf("%d %.4f %.1f %d %d %.1f %.1f\n", l, ms, (last - first) * 1e-3, n_tail, doubled,
                n_wave1 ? wave1 / n_wave1 * 1e-3 : 0.0, n_tail ? tail / n_tail * 1e-3 : 0.0);
  }
  cudaFree(sink_d);
  cudaFree(rec_d);
  return 0;
}
