// Depthwise 5 x 5 fp32 convolution throughput by register block. How close a shared-memory tiled,
// register-blocked convolution, the WTConv base kernels' inner loop, gets to the FP32 FMA rate
// when each thread computes a strip of R rows x NC columns, at the resident blocks its registers
// allow. It bounds what larger register blocks can give the WTConv kernels (docs/perf-notes.md);
// not part of the library.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --resource-usage \
//     dev/cuda/dwconv_strip_bench.cu -o dwconv_strip_bench
//   ./dwconv_strip_bench [planes [H [W]]]     (default: big_L2's 2048 planes of 512 x 512)
// Every variant is checked against a float64 CPU convolution on a few planes (outputs poisoned
// with NaN first), then timed (median of 9 CUDA-event runs). FLOPs: 2 per multiply-add.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "strip_bench_common.cuh"

namespace {

using strip_bench::Result;

constexpr int K = 5, HALO = K - 1;
// Filters per plane, each a full pass of strips over the staged tile (y = sum of the REPS convs):
// with one, the run would be bound by HBM (8 bytes per output against 50 FLOPs), and what is
// measured here is the convolution's issue rate, as in the WTConv kernels, which convolve each
// staged tile 2.25 times (base, level 1, level 2) and correlate it as often.
// -DDWCONV_BENCH_REPS=32 all but removes the staging from the timing, to read the strips alone.
#ifndef DWCONV_BENCH_REPS
#define DWCONV_BENCH_REPS 8
#endif
constexpr int REPS = DWCONV_BENCH_REPS, FS = (K * K + 3) / 4 * 4;

// One input row's NC + K - 1 floats at p, which sits 2 floats past a 16-byte boundary (the
// tile's columns start 4 pixels left of the tile, so that it stages with aligned 16-byte loads,
// and a window starts k / 2 = 2 pixels left of its first output): NC % 4 == 0 reads an 8-byte
// pair, then 16-byte quads, then a pair; even NC reads pairs.
template <int NC>
__device__ __forceinline__ void load_row(const float* p, float (&in)[NC + K - 1]) {
  static_assert((NC + K - 1) % 4 == 0 || NC % 4 != 0, "pair, quads, pair");
  if constexpr (NC % 4 == 0) {
    const float2 a = *reinterpret_cast<const float2*>(p);
    in[0] = a.x;
    in[1] = a.y;
#pragma unroll
    for (int q = 0; q < (NC + K - 1 - 4) / 4; ++q) {
      const float4 v = *reinterpret_cast<const float4*>(p + 2 + 4 * q);
      in[2 + 4 * q] = v.x; in[3 + 4 * q] = v.y; in[4 + 4 * q] = v.z; in[5 + 4 * q] = v.w;
    }
    const float2 b = *reinterpret_cast<const float2*>(p + NC + K - 3);
    in[NC + K - 3] = b.x;
    in[NC + K - 2] = b.y;
  } else if constexpr (NC % 2 == 0) {
#pragma unroll
    for (int q = 0; q < (NC + K - 1 + 1) / 2; ++q) {
      const float2 v = reinterpret_cast<const float2*>(p)[q];
      in[2 * q] = v.x;
      if (2 * q + 1 < NC + K - 1) in[2 * q + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < NC + K - 1; ++j) in[j] = p[j];
  }
}

// Tiles of TH x TW outputs of one plane per item; the block's planes are blockIdx.x / splits
// (one filter per block, as in the WTConv kernels), its tiles strided by splits.
template <int R, int NC, int TH, int TW, int THREADS, int MINB>
__global__ void __launch_bounds__(THREADS, MINB)
    dwconv_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int planes, int H,
                  int W, int splits) {
  // Tile rows, and the pitch (floats): columns x0 - 4 .. x0 + TW + 4, plus 4 against bank conflicts.
  constexpr int SH = TH + HALO, SQ = TW / 4 + 2, SP = 4 * SQ + 4;
  constexpr int JOBS = (TH / R) * (TW / NC);
  static_assert(TH % R == 0 && TW % NC == 0, "whole strips");
  __shared__ __align__(16) float tile[SH * SP];
  __shared__ __align__(16) float ws[REPS * FS];
  const int plane = blockIdx.x / splits, split = blockIdx.x % splits;
  if (plane >= planes) return;
  for (int i = threadIdx.x; i < REPS * K * K; i += THREADS) ws[(i / (K * K)) * FS + i % (K * K)] = w[plane * REPS * K * K + i];
  const int tiles_x = (W + TW - 1) / TW, tiles = ((H + TH - 1) / TH) * tiles_x;
  const float* xp = x + size_t(plane) * H * W;
  float* yp = y + size_t(plane) * H * W;
  for (int t = split; t < tiles; t += splits) {
    const int y0 = (t / tiles_x) * TH, x0 = (t % tiles_x) * TW;
    __syncthreads();
    for (int e = threadIdx.x; e < SH * SQ; e += THREADS) {  // 16-byte quads (W % 4 == 0)
      const int r = e / SQ, q = e % SQ, gy = y0 + r - K / 2, gx = x0 - 4 + 4 * q;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gy >= 0 && gy < H && gx >= 0 && gx < W) v = *reinterpret_cast<const float4*>(xp + size_t(gy) * W + gx);
      *reinterpret_cast<float4*>(tile + r * SP + 4 * q) = v;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < JOBS; j += THREADS) {
      const int col = (j % (TW / NC)) * NC, row = (j / (TW / NC)) * R;
      float acc[R][NC];
#pragma unroll
      for (int o = 0; o < R; ++o)
#pragma unroll
        for (int u = 0; u < NC; ++u) acc[o][u] = 0.f;
#pragma unroll 1
      for (int rep = 0; rep < REPS; ++rep) {
      // Opaque to the compiler (opaque_zero): the tile rows are reloaded in every pass, as every
      // phase of the WTConv kernels reloads them, rather than hoisted into (spilling) registers.
      const int toff = row * SP + col + 2 + strip_bench::opaque_zero();
      float wr[K * K];
#pragma unroll
      for (int i = 0; i < K * K / 4 * 4; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(ws + rep * FS + i);
        wr[i] = v.x; wr[i + 1] = v.y; wr[i + 2] = v.z; wr[i + 3] = v.w;
      }
#pragma unroll
      for (int i = K * K / 4 * 4; i < K * K; ++i) wr[i] = ws[rep * FS + i];
#pragma unroll
      for (int ii = 0; ii < R + HALO; ++ii) {
        float in[NC + K - 1];
        load_row<NC>(tile + toff + ii * SP, in);
#pragma unroll
        for (int o = 0; o < R; ++o) {
          const int i = ii - o;
          if (i >= 0 && i < K) {
#pragma unroll
            for (int jj = 0; jj < K; ++jj)
#pragma unroll
              for (int u = 0; u < NC; ++u) acc[o][u] = fmaf(wr[i * K + jj], in[u + jj], acc[o][u]);
          }
        }
      }
      }
#pragma unroll
      for (int o = 0; o < R; ++o) {
        const int gy = y0 + row + o;
        if (gy >= H) break;
#pragma unroll
        for (int u = 0; u < NC; ++u)
          if (x0 + col + u < W) yp[size_t(gy) * W + x0 + col + u] = acc[o][u];
      }
    }
  }
}

template <int R, int NC, int TH, int TW, int THREADS, int MINB>
Result run(const char* name, const float* dx, const float* dw, float* dy, int planes, int H, int W,
           const std::vector<float>& hx, const std::vector<float>& hw) {
  auto kernel = dwconv_kernel<R, NC, TH, TW, THREADS, MINB>;
  const strip_bench::Geometry g =
      strip_bench::geometry(kernel, THREADS, planes, ((H + TH - 1) / TH) * ((W + TW - 1) / TW));
  const int splits = g.splits;
  const unsigned blocks = g.blocks;
  const size_t n = size_t(planes) * H * W;
  STRIP_BENCH_CHECK(cudaMemset(dy, 0xff, n * 4));  // NaN
  kernel<<<blocks, THREADS>>>(dx, dw, dy, planes, H, W, splits);
  STRIP_BENCH_CHECK(cudaGetLastError());
  STRIP_BENCH_CHECK(cudaDeviceSynchronize());
  // Check three planes (first, middle, last) against float64.
  double num = 0, den = 0;
  std::vector<float> out(size_t(H) * W);
  for (int p : {0, planes / 2, planes - 1}) {
    STRIP_BENCH_CHECK(cudaMemcpy(out.data(), dy + size_t(p) * H * W, out.size() * 4, cudaMemcpyDeviceToHost));
    for (int yy = 0; yy < H; ++yy)
      for (int xx = 0; xx < W; ++xx) {
        double s = 0;
        for (int rp = 0; rp < REPS; ++rp)
          for (int i = 0; i < K; ++i)
            for (int j = 0; j < K; ++j) {
              const int gy = yy + i - K / 2, gx = xx + j - K / 2;
              if (gy >= 0 && gy < H && gx >= 0 && gx < W)
                s += double(hw[(size_t(p) * REPS + rp) * K * K + i * K + j]) * hx[size_t(p) * H * W + size_t(gy) * W + gx];
            }
        const double v = out[size_t(yy) * W + xx];
        num += std::isfinite(v) ? (v - s) * (v - s) : 1e300;
        den += s * s;
      }
  }
  const double ms = strip_bench::median_ms([&] { kernel<<<blocks, THREADS>>>(dx, dw, dy, planes, H, W, splits); });
  const double flops = 2.0 * REPS * K * K * double(n);
  return {name, ms, flops / (ms * 1e-3) / 1e12, std::sqrt(num / den), g.regs, g.blocks_per_sm};
}

}  // namespace

int main(int argc, char** argv) {
  int planes = 0, H = 0, W = 0;
  if (!strip_bench::parse_shape(argc, argv, 4, &planes, &H, &W)) return 2;
  const size_t n = size_t(planes) * H * W;
  float *dx, *dw, *dy;
  const std::vector<float> hx = strip_bench::random_floats(n, 7, &dx);
  const std::vector<float> hw = strip_bench::random_floats(size_t(planes) * REPS * K * K, 8, &dw);
  STRIP_BENCH_CHECK(cudaMalloc(&dy, n * 4));
  std::vector<Result> rs;
  // The WTConv base kernels' block today: 4 x 2 strips, 32 x 64 tiles, 256 threads, 4 blocks.
  rs.push_back(run<4, 2, 32, 64, 256, 4>("R4 NC2 32x64 256t", dx, dw, dy, planes, H, W, hx, hw));
  rs.push_back(run<8, 2, 32, 64, 128, 8>("R8 NC2 32x64 128t", dx, dw, dy, planes, H, W, hx, hw));
  rs.push_back(run<4, 4, 32, 64, 128, 8>("R4 NC4 32x64 128t", dx, dw, dy, planes, H, W, hx, hw));
  rs.push_back(run<8, 4, 32, 64, 64, 12>("R8 NC4 32x64 64t", dx, dw, dy, planes, H, W, hx, hw));
  rs.push_back(run<8, 2, 64, 64, 256, 3>("R8 NC2 64x64 256t", dx, dw, dy, planes, H, W, hx, hw));
  rs.push_back(run<4, 4, 64, 64, 256, 3>("R4 NC4 64x64 256t", dx, dw, dy, planes, H, W, hx, hw));
  rs.push_back(run<8, 4, 64, 128, 256, 2>("R8 NC4 64x128 256t", dx, dw, dy, planes, H, W, hx, hw));
  rs.push_back(run<16, 4, 64, 64, 64, 8>("R16 NC4 64x64 64t", dx, dw, dy, planes, H, W, hx, hw));
  std::printf("depthwise 5x5 fp32, %d planes of %d x %d, %d filters each (%.3g GFLOP)\n", planes, H, W, REPS,
              2.0 * REPS * K * K * n / 1e9);
  const int bad = strip_bench::print_results(rs, 1e-5);
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dy);
  return bad ? 1 : 0;
}
