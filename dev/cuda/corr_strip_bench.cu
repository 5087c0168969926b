// Weight-gradient correlation of a depthwise 5 x 5 fp32 convolution, alone, by register block:
// C[i][j] = sum over a plane of g[y][x] * x[y + i - 2][x + j - 2] (zero padded), the loop that is
// most of the WTConv backward's FMAs. A thread owns C kernel rows and M g rows at a time; per four
// positions it loads one 16-byte quad of each of its M g rows and of the M + C - 1 x rows they
// meet, for 20 M C multiply-adds (the kernels today: C = M = 1); corr_seg_kernel gives a thread all
// five kernel rows on a column segment of one g row or of one x row; corr_col_kernel all five
// kernel rows walking down a column segment, the x rows in a register ring. How close each gets to
// the FP32 FMA rate bounds what larger correlation tiles can give (docs/wtconv.md, perf notes 38,
// 40 and 61); not part of the library.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --resource-usage \
//     dev/cuda/corr_strip_bench.cu -o corr_strip_bench
//   ./corr_strip_bench [planes [H [W]]]     (default: big_L2's 2048 planes of 512 x 512)
// Checked against float64 on three planes; timed as the median of 9 CUDA-event runs. Each staged
// tile is correlated REPS times (rows reloaded every pass), so that the issue rate rather than
// HBM decides; FLOPs: 2 per multiply-add.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "strip_bench_common.cuh"

namespace {

using strip_bench::Result;

// Passes per staged tile; -DCORR_BENCH_REPS=32 all but removes the staging from the timing, to
// read each form's loop alone.
#ifndef CORR_BENCH_REPS
#define CORR_BENCH_REPS 8
#endif
constexpr int K = 5, REPS = CORR_BENCH_REPS;

__device__ __forceinline__ float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// Row pitches (floats) of the staged tiles, 4 mod 32: the 16-byte loads of eight threads on eight
// consecutive rows (a wavefront) then fall on distinct banks. An x row holds TW + 4 values and the 4
// zeros the last quads read past them.
template <int TW>
constexpr int kXPitch = (TW + 8 + 27) / 32 * 32 + 4;
template <int TW>
constexpr int kGPitch = (TW + 27) / 32 * 32 + 4;

// Stages the tile at (y0, x0): x rows y0 - 2 .. y0 + TH + 1 (columns x0 - 2 .., zero outside the
// plane, plus 4 zero columns the last quads read) and g rows y0 - GPAD .. y0 + TH + GPAD - 1 (zero
// outside the plane and outside the tile's TH rows).
template <int TH, int TW, int GPAD, int THREADS>
__device__ __forceinline__ void stage_tiles(float* xt, float* gt, const float* xp, const float* gp, int y0, int x0,
                                            int H, int W) {
  constexpr int XP = kXPitch<TW>, GP = kGPitch<TW>;
  for (int e = threadIdx.x; e < (TH + K - 1) * (TW + 4); e += THREADS) {
    const int r = e / (TW + 4), c = e % (TW + 4), gy = y0 + r - K / 2, gx = x0 + c - K / 2;
    xt[r * XP + c] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? xp[size_t(gy) * W + gx] : 0.f;
  }
  for (int e = threadIdx.x; e < (TH + 2 * GPAD) * TW; e += THREADS) {
    const int r = e / TW - GPAD, c = e % TW, gy = y0 + r, gx = x0 + c;
    gt[(r + GPAD) * GP + c] = (r >= 0 && r < TH && gy < H && gx < W) ? gp[size_t(gy) * W + gx] : 0.f;
  }
  for (int e = threadIdx.x; e < (TH + K - 1) * 4; e += THREADS) xt[(e / 4) * XP + TW + 4 + e % 4] = 0.f;  // read, unused
}

// The tile loop of every kernel here: the tiles of plane blockIdx.x / splits, strided by splits, each
// staged (stage_tiles) and then correlated REPS times by pass(off), off an offset the compiler
// cannot see through (opaque_zero), so that every pass reloads its rows as the kernels' phases do.
// Ends with the tiles free for the block's sums.
template <int TH, int TW, int GPAD, int THREADS, typename Pass>
__device__ __forceinline__ void for_each_tile_pass(float* xt, float* gt, const float* x, const float* g, int H,
                                                   int W, int splits, Pass&& pass) {
  const int plane = blockIdx.x / splits, split = blockIdx.x % splits;
  const int tiles_x = (W + TW - 1) / TW, tiles = ((H + TH - 1) / TH) * tiles_x;
  const float* xp = x + size_t(plane) * H * W;
  const float* gp = g + size_t(plane) * H * W;
  for (int t = split; t < tiles; t += splits) {
    const int y0 = (t / tiles_x) * TH, x0 = (t % tiles_x) * TW;
    __syncthreads();
    stage_tiles<TH, TW, GPAD, THREADS>(xt, gt, xp, gp, y0, x0, H, W);
    __syncthreads();
#pragma unroll 1
    for (int rep = 0; rep < REPS; ++rep) pass(strip_bench::opaque_zero());
  }
  __syncthreads();
}

// Tiles of TH x TW g values (and TH + 4 x TW + 4 x values, column c at x0 - 2 + c) of one plane per
// item; a block's tiles are those of plane blockIdx.x / splits, strided by splits. Each block
// writes its 25 sums (fixed order) to partial[blockIdx.x].
template <int C, int M, int TH, int TW, int MINB>
__global__ void __launch_bounds__((K / C) * (TH / M), MINB)
    corr_kernel(const float* __restrict__ x, const float* __restrict__ g, float* __restrict__ partial, int planes,
                int H, int W, int splits) {
  static_assert(K % C == 0 && TH % M == 0 && TW % 4 == 0, "whole groups");
  constexpr int THREADS = (K / C) * (TH / M), XP = kXPitch<TW>, GP = kGPitch<TW>;
  // The x and g tiles; the block's sums reuse them at the end.
  constexpr int kTiles = (TH + K - 1) * XP + TH * GP;
  static_assert(THREADS * C * K <= kTiles, "the sums fit in the tiles");
  __shared__ __align__(16) float smem[kTiles];
  float* const xt = smem;
  float* const gt = smem + (TH + K - 1) * XP;
  float* const red = smem;
  const int kg = threadIdx.x % (K / C), rg = threadIdx.x / (K / C);  // kernel rows kg C.., g rows rg M..
  float acc[C][K];
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int j = 0; j < K; ++j) acc[c][j] = 0.f;
  for_each_tile_pass<TH, TW, 0, THREADS>(xt, gt, x, g, H, W, splits, [&](int off) {
    const float* xr = xt + off + (rg * M + kg * C) * XP;  // x row of g row rg M and kernel row kg C
    const float* gr = gt + off + rg * M * GP;
    float4 prev[M + C - 1];
#pragma unroll
    for (int q = 0; q < M + C - 1; ++q) prev[q] = lds4(xr + q * XP);
#pragma unroll 4
    for (int x4 = 0; x4 < TW; x4 += 4) {
      float4 nx[M + C - 1], gq[M];
#pragma unroll
      for (int q = 0; q < M + C - 1; ++q) nx[q] = lds4(xr + q * XP + x4 + 4);
#pragma unroll
      for (int m = 0; m < M; ++m) gq[m] = lds4(gr + m * GP + x4);
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const float4 a = prev[m + c], b = nx[m + c];
          const float w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
          const float gv[4] = {gq[m].x, gq[m].y, gq[m].z, gq[m].w};
#pragma unroll
          for (int v = 0; v < 4; ++v)
#pragma unroll
            for (int j = 0; j < K; ++j) acc[c][j] = fmaf(gv[v], w[v + j], acc[c][j]);
        }
#pragma unroll
      for (int q = 0; q < M + C - 1; ++q) prev[q] = nx[q];
    }
  });
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int j = 0; j < K; ++j) red[(threadIdx.x * C + c) * K + j] = acc[c][j];
  __syncthreads();
  if (threadIdx.x < K * K) {  // entry (i, j): kernel row i lives in group i / C, slot i % C
    const int i = threadIdx.x / K, j = threadIdx.x % K;
    float s = 0.f;
    for (int r = 0; r < TH / M; ++r) s += red[((r * (K / C) + i / C) * C + i % C) * K + j];
    partial[size_t(blockIdx.x) * K * K + threadIdx.x] = s;
  }
}

// The block's 25 sums of per-thread K x K totals (fixed order) into partial[blockIdx.x], through
// `red` (THREADS x 25 floats of the tiles, free after the last pass).
template <int THREADS>
__device__ __forceinline__ void block_sums(const float (&acc)[K][K], float* red, float* __restrict__ partial) {
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) red[threadIdx.x * K * K + i * K + j] = acc[i][j];
  __syncthreads();
  for (int e = threadIdx.x; e < K * K; e += THREADS) {  // blocks of fewer than 25 threads too
    float s = 0.f;
    for (int r = 0; r < THREADS; ++r) s += red[r * K * K + e];
    partial[size_t(blockIdx.x) * K * K + e] = s;
  }
}

// All K kernel rows per thread, on one column segment (SEG columns) of a tile row, two ways:
// - kXRow false: the thread owns one g row and meets the K x rows below it (the C = K, M = 1
//   case above with the columns split, so that a tile has more threads): per four positions one
//   g quad and K x quads, each x row with its own carried quad;
// - kXRow true: the thread owns one x row and meets the K g rows it pairs with (x row t with g
//   row t - i for kernel row i): per four positions one x quad (one carried quad) and K g quads,
//   which slide nowhere, so the registers are the 25 sums, one x ring and the g quad in use. The
//   g tile has K - 1 zero rows above and below, so the threads of the edge rows run the same
//   code; their products with the zero rows are work the FLOP count does not credit.
template <bool kXRow, int TH, int TW, int SEG, int MINB>
__global__ void __launch_bounds__((TH + (kXRow ? K - 1 : 0)) * (TW / SEG), MINB)
    corr_seg_kernel(const float* __restrict__ x, const float* __restrict__ g, float* __restrict__ partial,
                    int planes, int H, int W, int splits) {
  static_assert(TW % SEG == 0 && SEG % 4 == 0, "whole segments of quads");
  constexpr int ROWS = TH + (kXRow ? K - 1 : 0), THREADS = ROWS * (TW / SEG);
  constexpr int XP = kXPitch<TW>, GP = kGPitch<TW>;
  constexpr int GPAD = kXRow ? K - 1 : 0;  // zero g rows above and below the tile
  constexpr int kTiles = (TH + K - 1) * XP + (TH + 2 * GPAD) * GP;
  static_assert(THREADS * K * K <= kTiles, "the sums fit in the tiles");
  __shared__ __align__(16) float smem[kTiles];
  float* const xt = smem;
  float* const gt = smem + (TH + K - 1) * XP;  // g row r (-GPAD <= r < TH + GPAD) at gt + (r + GPAD) * GP
  float* const red = smem;
  const int row = threadIdx.x % ROWS, seg = threadIdx.x / ROWS;  // neighbouring lanes: neighbouring rows
  float acc[K][K];
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) acc[i][j] = 0.f;
  for_each_tile_pass<TH, TW, GPAD, THREADS>(xt, gt, x, g, H, W, splits, [&](int off) {
    if constexpr (kXRow) {
      // x tile row `row` with g rows row - i (g row r at gt + (r + GPAD) * GP).
      const float* xr = xt + off + row * XP + seg * SEG;
      const float* gr = gt + off + (row + GPAD) * GP + seg * SEG;  // g row `row`; row - i is i GP before
      float4 prev = lds4(xr);
#pragma unroll
      for (int x4 = 0; x4 < SEG; x4 += 4) {
        const float4 nx = lds4(xr + x4 + 4);
        const float w[8] = {prev.x, prev.y, prev.z, prev.w, nx.x, nx.y, nx.z, nx.w};
#pragma unroll
        for (int i = 0; i < K; ++i) {
          const float4 gq = lds4(gr - i * GP + x4);
          const float gv[4] = {gq.x, gq.y, gq.z, gq.w};
#pragma unroll
          for (int v = 0; v < 4; ++v)
#pragma unroll
            for (int j = 0; j < K; ++j) acc[i][j] = fmaf(gv[v], w[v + j], acc[i][j]);
        }
        prev = nx;
      }
    } else {
      const float* xr = xt + off + row * XP + seg * SEG;  // x rows row .. row + K - 1
      const float* gr = gt + off + row * GP + seg * SEG;
      float4 prev[K];
#pragma unroll
      for (int i = 0; i < K; ++i) prev[i] = lds4(xr + i * XP);
#pragma unroll
      for (int x4 = 0; x4 < SEG; x4 += 4) {
        const float4 gq = lds4(gr + x4);
        const float gv[4] = {gq.x, gq.y, gq.z, gq.w};
#pragma unroll
        for (int i = 0; i < K; ++i) {
          const float4 nx = lds4(xr + i * XP + x4 + 4);
          const float w[8] = {prev[i].x, prev[i].y, prev[i].z, prev[i].w, nx.x, nx.y, nx.z, nx.w};
#pragma unroll
          for (int v = 0; v < 4; ++v)
#pragma unroll
            for (int j = 0; j < K; ++j) acc[i][j] = fmaf(gv[v], w[v + j], acc[i][j]);
          prev[i] = nx;
        }
      }
    }
  });
  block_sums<THREADS>(acc, red, partial);
}

// All K kernel rows per thread, walking down a column segment of QW quads (4 QW g columns) over
// TR g rows: the K x rows a g row meets stay in a register ring, so each g row costs one new x row
// (QW + 1 quads) and QW g quads for 100 QW multiply-adds, against K + 1 quads per 100 when the
// thread walks along a row (corr_seg_kernel) and 2 per 20 in the kernels' 1 x 1 form. The ring's
// slots are compile-time (the row loop is unrolled whole), so no register moves. The price: 25 sums,
// 20 QW + 20 ring floats and 4 QW g values in registers, and K - 1 priming rows per run of TR.
template <int QW, int TR, int TH, int TW, int MINB>
__global__ void __launch_bounds__((TW / (4 * QW)) * (TH / TR), MINB)
    corr_col_kernel(const float* __restrict__ x, const float* __restrict__ g, float* __restrict__ partial,
                    int planes, int H, int W, int splits) {
  static_assert(TW % (4 * QW) == 0 && TH % TR == 0, "whole segments and runs");
  constexpr int SEGS = TW / (4 * QW), THREADS = SEGS * (TH / TR), XP = kXPitch<TW>, GP = kGPitch<TW>;
  constexpr int XW = 4 * QW + 4;  // x columns a segment meets
  constexpr int kTiles = (TH + K - 1) * XP + TH * GP;
  static_assert(THREADS * K * K <= kTiles, "the sums fit in the tiles");
  __shared__ __align__(16) float smem[kTiles];
  float* const xt = smem;
  float* const gt = smem + (TH + K - 1) * XP;
  float* const red = smem;
  const int seg = threadIdx.x % SEGS, run = threadIdx.x / SEGS;  // neighbouring lanes: neighbouring segments
  float acc[K][K];
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) acc[i][j] = 0.f;
  for_each_tile_pass<TH, TW, 0, THREADS>(xt, gt, x, g, H, W, splits, [&](int off) {
    const float* xr = xt + off + run * TR * XP + seg * 4 * QW;  // x tile row t meets g row t - i
    const float* gr = gt + off + run * TR * GP + seg * 4 * QW;
    float ring[K][XW];
    auto load_x = [&](int slot, int row) {
#pragma unroll
      for (int q = 0; q < QW + 1; ++q) {
        const float4 v = lds4(xr + row * XP + 4 * q);
        ring[slot][4 * q] = v.x; ring[slot][4 * q + 1] = v.y; ring[slot][4 * q + 2] = v.z; ring[slot][4 * q + 3] = v.w;
      }
    };
#pragma unroll
    for (int t = 0; t < K - 1; ++t) load_x(t, t);
#pragma unroll
    for (int t = 0; t < TR; ++t) {
      load_x((t + K - 1) % K, t + K - 1);
      float gv[4 * QW];
#pragma unroll
      for (int q = 0; q < QW; ++q) {
        const float4 v = lds4(gr + t * GP + 4 * q);
        gv[4 * q] = v.x; gv[4 * q + 1] = v.y; gv[4 * q + 2] = v.z; gv[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < K; ++i)
#pragma unroll
        for (int v = 0; v < 4 * QW; ++v)
#pragma unroll
          for (int j = 0; j < K; ++j) acc[i][j] = fmaf(gv[v], ring[(t + i) % K][v + j], acc[i][j]);
    }
  });
  block_sums<THREADS>(acc, red, partial);
}

template <typename Kernel>
Result run_kernel(const char* name, Kernel kernel, int THREADS, int TH, int TW, const float* dx, const float* dg,
                  float* dpart, int planes, int H, int W, const std::vector<float>& hx, const std::vector<float>& hg) {
  const strip_bench::Geometry geo =
      strip_bench::geometry(kernel, THREADS, planes, ((H + TH - 1) / TH) * ((W + TW - 1) / TW));
  const int splits = geo.splits;
  const unsigned blocks = geo.blocks;
  STRIP_BENCH_CHECK(cudaMemset(dpart, 0xff, size_t(blocks) * K * K * 4));  // NaN
  kernel<<<blocks, THREADS>>>(dx, dg, dpart, planes, H, W, splits);
  STRIP_BENCH_CHECK(cudaGetLastError());
  STRIP_BENCH_CHECK(cudaDeviceSynchronize());
  std::vector<float> part(size_t(blocks) * K * K);
  STRIP_BENCH_CHECK(cudaMemcpy(part.data(), dpart, part.size() * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (int p : {0, planes / 2, planes - 1})
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < K; ++j) {
        double ref = 0, got = 0;
        for (int yy = 0; yy < H; ++yy)
          for (int xx = 0; xx < W; ++xx) {
            const int sy = yy + i - K / 2, sx = xx + j - K / 2;
            if (sy >= 0 && sy < H && sx >= 0 && sx < W)
              ref += double(hg[size_t(p) * H * W + size_t(yy) * W + xx]) * hx[size_t(p) * H * W + size_t(sy) * W + sx];
          }
        ref *= REPS;
        for (int s = 0; s < splits; ++s) got += part[(size_t(p) * splits + s) * K * K + i * K + j];
        num += std::isfinite(got) ? (got - ref) * (got - ref) : 1e300;
        den += ref * ref;
      }
  const double ms = strip_bench::median_ms([&] { kernel<<<blocks, THREADS>>>(dx, dg, dpart, planes, H, W, splits); });
  const double flops = 2.0 * REPS * K * K * double(planes) * H * W;
  return {name, ms, flops / (ms * 1e-3) / 1e12, std::sqrt(num / den), geo.regs, geo.blocks_per_sm};
}

template <int C, int M, int TH, int TW, int MINB>
Result run(const char* name, const float* dx, const float* dg, float* dpart, int planes, int H, int W,
           const std::vector<float>& hx, const std::vector<float>& hg) {
  return run_kernel(name, corr_kernel<C, M, TH, TW, MINB>, (K / C) * (TH / M), TH, TW, dx, dg, dpart, planes, H, W,
                    hx, hg);
}
template <bool kXRow, int TH, int TW, int SEG, int MINB>
Result run_seg(const char* name, const float* dx, const float* dg, float* dpart, int planes, int H, int W,
               const std::vector<float>& hx, const std::vector<float>& hg) {
  return run_kernel(name, corr_seg_kernel<kXRow, TH, TW, SEG, MINB>, (TH + (kXRow ? K - 1 : 0)) * (TW / SEG), TH,
                    TW, dx, dg, dpart, planes, H, W, hx, hg);
}

template <int QW, int TR, int TH, int TW, int MINB>
Result run_col(const char* name, const float* dx, const float* dg, float* dpart, int planes, int H, int W,
               const std::vector<float>& hx, const std::vector<float>& hg) {
  return run_kernel(name, corr_col_kernel<QW, TR, TH, TW, MINB>, (TW / (4 * QW)) * (TH / TR), TH, TW, dx, dg, dpart,
                    planes, H, W, hx, hg);
}

}  // namespace

int main(int argc, char** argv) {
  int planes = 0, H = 0, W = 0;
  if (!strip_bench::parse_shape(argc, argv, 1, &planes, &H, &W)) return 2;
  const size_t n = size_t(planes) * H * W;
  float *dx, *dg, *dpart;
  const std::vector<float> hx = strip_bench::random_floats(n, 11, &dx), hg = strip_bench::random_floats(n, 12, &dg);
  STRIP_BENCH_CHECK(cudaMalloc(&dpart, size_t(planes) * 1024 * K * K * 4));  // up to 1024 splits per plane
  std::vector<Result> rs;
  // C kernel rows x M g rows per thread; threads = 5 / C x TH / M.
  rs.push_back(run<1, 1, 32, 64, 6>("C1 M1 32x64 160t", dx, dg, dpart, planes, H, W, hx, hg));  // today's
  rs.push_back(run<1, 2, 64, 32, 6>("C1 M2 64x32 160t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run<5, 1, 96, 32, 5>("C5 M1 96x32 96t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run<5, 2, 96, 32, 5>("C5 M2 96x32 48t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run<5, 1, 64, 64, 5>("C5 M1 64x64 64t", dx, dg, dpart, planes, H, W, hx, hg));
  // All five kernel rows per thread on column segments: a g row each, or an x row each (xrow).
  rs.push_back(run_seg<false, 32, 64, 16, 4>("C5 seg16 32x64 128t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_seg<false, 32, 64, 16, 6>("C5 seg16 32x64 128t b6", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_seg<false, 32, 64, 32, 8>("C5 seg32 32x64 64t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_seg<true, 28, 64, 16, 4>("xrow seg16 28x64 128t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_seg<true, 28, 64, 16, 6>("xrow seg16 28x64 128t b6", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_seg<true, 28, 64, 32, 8>("xrow seg32 28x64 64t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_seg<true, 60, 64, 16, 3>("xrow seg16 60x64 256t", dx, dg, dpart, planes, H, W, hx, hg));
  // All five kernel rows per thread, walking down columns: QW quads wide, runs of TR g rows.
  rs.push_back(run_col<1, 8, 64, 64, 4>("col q1 run8 64x64 128t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_col<1, 8, 32, 64, 8>("col q1 run8 32x64 64t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_col<1, 4, 32, 64, 4>("col q1 run4 32x64 128t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_col<1, 4, 32, 64, 6>("col q1 run4 32x64 128t b6", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_col<1, 16, 64, 64, 5>("col q1 run16 64x64 64t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_col<1, 16, 32, 64, 8>("col q1 run16 32x64 32t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_col<1, 8, 16, 32, 8>("col q1 run8 16x32 16t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_col<2, 8, 64, 64, 4>("col q2 run8 64x64 64t", dx, dg, dpart, planes, H, W, hx, hg));
  rs.push_back(run_col<2, 16, 64, 64, 4>("col q2 run16 64x64 32t", dx, dg, dpart, planes, H, W, hx, hg));
  std::printf("5x5 weight-gradient correlation fp32, %d planes of %d x %d, %d passes per tile (%.3g GFLOP)\n",
              planes, H, W, REPS, 2.0 * REPS * K * K * n / 1e9);
  const int bad = strip_bench::print_results(rs, 1e-4);  // float sums of ~2e6 products per entry
  cudaFree(dx);
  cudaFree(dg);
  cudaFree(dpart);
  return bad ? 1 : 0;
}
