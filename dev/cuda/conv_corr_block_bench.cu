// The backward's two base-conv products of one 4 x 4 pixel block in one thread: the dx convolution
// (16 outputs, 25 weights in registers) and the weight-gradient correlation (all 25 sums), sharing
// the staged tiles and the block's centre rows of D. The fused backward runs them as separate jobs
// today: dx in 4 x 4 strips, the correlation one kernel row per thread (five sums), which reads
// 2 quads per 20 multiply-adds (docs/wtconv.md, notes 52-55). Here a thread reads the block's 8
// window rows of D (the convolution; its 4 centre rows kept for the correlation) and then the 8
// window rows of x (the correlation): 32 quads per 800 multiply-adds. How close this gets to the
// FP32 FMA rate, at 2 and 3 resident blocks, bounds what that restructure of the fused backward
// can give (docs/perf-notes.md, big_L2). Not part of the library.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --resource-usage \
//     dev/cuda/conv_corr_block_bench.cu -o conv_corr_block_bench
//   ./conv_corr_block_bench [planes [H [W]]]     (default: big_L2's 2048 planes of 512 x 512)
// Modes: conv (dx alone), corr (the sums alone; the centre rows read as in the combined pass),
// both. Checked against float64 (dx, the sum of the passes, on two planes; the sums on three); each staged tile is passed
// REPS times, so that the issue rate rather than HBM decides; FLOPs: 2 per multiply-add.
#include <cmath>
#include <cstdio>
#include <vector>

#include "strip_bench_common.cuh"

namespace {

using strip_bench::Result;

#ifndef CONV_CORR_BENCH_REPS
#define CONV_CORR_BENCH_REPS 8
#endif
constexpr int K = 5, R = K / 2, REPS = CONV_CORR_BENCH_REPS;
enum Mode { kConv = 1, kCorr = 2, kBoth = 3 };

__device__ __forceinline__ float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// Tile rows TH + 4 (pixel rows y0 - 2 ..), TW + 4 columns (x0 - 2 ..), pitch 4 mod 32 so that the
// 16-byte loads of a warp's lanes (consecutive blocks along a row) are conflict-free.
template <int TW>
constexpr int kPitch = (TW + 4 + 27) / 32 * 32 + 4;

template <int TH, int TW, int THREADS>
__device__ __forceinline__ void stage(float* t, const float* p, int y0, int x0, int H, int W) {
  constexpr int P = kPitch<TW>;
  for (int e = threadIdx.x; e < (TH + 4) * (TW + 4); e += THREADS) {
    const int r = e / (TW + 4), c = e % (TW + 4), gy = y0 + r - R, gx = x0 + c - R;
    t[r * P + c] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? p[size_t(gy) * W + gx] : 0.f;
  }
}

__device__ __forceinline__ void window(float (&v)[8], const float* p) {
  const float4 a = lds4(p), b = lds4(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// f(o, i, u, j, v[u + j]) for every multiply-add that window row t (rows y0 + 4 br - 2 + t) takes
// part in: block row o at kernel row i = t - o, block column u at kernel column j.
template <typename F>
__device__ __forceinline__ void window_pairs(const float (&v)[8], F&& f, int t) {
#pragma unroll
  for (int o = 0; o < 4; ++o)
    if (t - o >= 0 && t - o < K)
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int j = 0; j < K; ++j) f(o, t - o, u, j, v[u + j]);
}

// One thread per 4 x 4 block of a TH x TW tile; a block's tiles are those of plane blockIdx.x /
// splits, strided by splits. dx (kConv) gets the sum of the passes, the sums (kCorr) go to partial.
template <int M, int TH, int TW, int MINB>
__global__ void __launch_bounds__((TH / 4) * (TW / 4), MINB)
    conv_corr_kernel(const float* __restrict__ x, const float* __restrict__ d, const float* __restrict__ w,
                     float* __restrict__ dx, float* __restrict__ partial, int H, int W, int splits) {
  constexpr int THREADS = (TH / 4) * (TW / 4), P = kPitch<TW>, kTile = (TH + 4) * P;
  static_assert(THREADS * K * K <= 2 * kTile, "the sums fit in the tiles");
  __shared__ __align__(16) float smem[2 * kTile];
  float* const xt = smem;
  float* const dt = smem + kTile;
  const int bc = threadIdx.x % (TW / 4), br = threadIdx.x / (TW / 4);
  float wr[K][K];
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) wr[i][j] = w[i * K + j];
  float acc[K][K];
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) acc[i][j] = 0.f;
  const int plane = blockIdx.x / splits, split = blockIdx.x % splits;
  const int tiles_x = (W + TW - 1) / TW, tiles = ((H + TH - 1) / TH) * tiles_x;
  const float* xp = x + size_t(plane) * H * W;
  const float* dp = d + size_t(plane) * H * W;
  for (int tile = split; tile < tiles; tile += splits) {
    const int y0 = (tile / tiles_x) * TH, x0 = (tile % tiles_x) * TW;
    __syncthreads();
    stage<TH, TW, THREADS>(xt, xp, y0, x0, H, W);
    stage<TH, TW, THREADS>(dt, dp, y0, x0, H, W);
    __syncthreads();
    // dx: the sum of the passes' convolutions, stored once per tile as the fused kernel stores
    // its strip once per item (a store per pass made the conv alone HBM-bound here).
    float out[4][4] = {};
#pragma unroll 1
    for (int rep = 0; rep < REPS; ++rep) {
      // The assembler cannot prove two passes alike (opaque_zero), so every pass reloads its rows
      // and redoes its work: with an empty asm statement instead, ptxas hoisted the convolution
      // out of the pass loop.
      const int off = strip_bench::opaque_zero();
      const float* drow = dt + off + 4 * br * P + 4 * bc;
      const float* xrow = xt + off + 4 * br * P + 4 * bc;
      float dc[4][4];  // the block's centre rows of D
      if constexpr ((M & kConv) != 0) {
#pragma unroll
        for (int t = 0; t < 8; ++t) {  // D rows y0 + 4 br - 2 + t
          float v[8];
          window(v, drow + t * P);
          window_pairs(v, [&](int o, int i, int u, int j, float vin) { out[o][u] = fmaf(wr[i][j], vin, out[o][u]); }, t);
          if (t >= R && t < R + 4)
#pragma unroll
            for (int u = 0; u < 4; ++u) dc[t - R][u] = v[R + u];
        }
      } else {
#pragma unroll
        for (int o = 0; o < 4; ++o) {
          float v[8];
          window(v, drow + (o + R) * P);
#pragma unroll
          for (int u = 0; u < 4; ++u) dc[o][u] = v[R + u];
        }
      }
      if constexpr ((M & kCorr) != 0) {
#pragma unroll
        for (int s = 0; s < 8; ++s) {  // x rows y0 + 4 br - 2 + s: kernel row s - o of centre row o
          float v[8];
          window(v, xrow + s * P);
          window_pairs(v, [&](int o, int i, int u, int j, float vin) { acc[i][j] = fmaf(dc[o][u], vin, acc[i][j]); }, s);
        }
      } else {
        // conv alone: keep the centre rows' loads from being dropped
        if (dc[0][0] == 12345.f && dc[3][3] == 54321.f) acc[0][0] += 1.f;
      }
    }
    if constexpr ((M & kConv) != 0) {
      const int py = y0 + 4 * br, px = x0 + 4 * bc;
#pragma unroll
      for (int o = 0; o < 4; ++o)
        if (py + o < H && px < W)  // W % 4 == 0 (parse_shape)
          *reinterpret_cast<float4*>(dx + (size_t(plane) * H + py + o) * W + px) =
              make_float4(out[o][0], out[o][1], out[o][2], out[o][3]);
    }
  }
  __syncthreads();
  float* const red = smem;
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) red[threadIdx.x * K * K + i * K + j] = acc[i][j];
  __syncthreads();
  for (int e = threadIdx.x; e < K * K; e += THREADS) {
    float s = 0.f;
    for (int t = 0; t < THREADS; ++t) s += red[t * K * K + e];
    partial[size_t(blockIdx.x) * K * K + e] = s;
  }
}

template <int M, int TH, int TW, int MINB>
Result run(const char* name, const float* dxin, const float* dd, const float* dw, float* ddx, float* dpart,
           int planes, int H, int W, const std::vector<float>& hx, const std::vector<float>& hd,
           const std::vector<float>& hw) {
  auto kernel = conv_corr_kernel<M, TH, TW, MINB>;
  constexpr int THREADS = (TH / 4) * (TW / 4);
  const strip_bench::Geometry geo =
      strip_bench::geometry(kernel, THREADS, planes, ((H + TH - 1) / TH) * ((W + TW - 1) / TW));
  const int splits = geo.splits;
  STRIP_BENCH_CHECK(cudaMemset(dpart, 0xff, size_t(geo.blocks) * K * K * 4));  // NaN
  STRIP_BENCH_CHECK(cudaMemset(ddx, 0xff, size_t(planes) * H * W * 4));
  auto launch = [&] { kernel<<<geo.blocks, THREADS>>>(dxin, dd, dw, ddx, dpart, H, W, splits); };
  launch();
  STRIP_BENCH_CHECK(cudaGetLastError());
  STRIP_BENCH_CHECK(cudaDeviceSynchronize());
  double num = 0, den = 0;
  auto add = [&](double got, double ref) {
    num += std::isfinite(got) ? (got - ref) * (got - ref) : 1e300;
    den += ref * ref;
  };
  auto at = [&](const std::vector<float>& v, int p, int yy, int xx) {
    return (yy >= 0 && yy < H && xx >= 0 && xx < W) ? double(v[(size_t(p) * H + yy) * W + xx]) : 0.0;
  };
  if (M & kConv) {
    std::vector<float> out(size_t(planes) * H * W);
    STRIP_BENCH_CHECK(cudaMemcpy(out.data(), ddx, out.size() * 4, cudaMemcpyDeviceToHost));
    for (int p : {0, planes - 1})
      for (int yy = 0; yy < H; ++yy)
        for (int xx = 0; xx < W; ++xx) {
          double ref = 0;
          for (int i = 0; i < K; ++i)
            for (int j = 0; j < K; ++j) ref += hw[i * K + j] * at(hd, p, yy + i - R, xx + j - R);
          add(out[(size_t(p) * H + yy) * W + xx], ref * REPS);
        }
  }
  if (M & kCorr) {
    std::vector<float> part(size_t(geo.blocks) * K * K);
    STRIP_BENCH_CHECK(cudaMemcpy(part.data(), dpart, part.size() * 4, cudaMemcpyDeviceToHost));
    for (int p : {0, planes / 2, planes - 1})
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < K; ++j) {
          double ref = 0, got = 0;
          for (int yy = 0; yy < H; ++yy)
            for (int xx = 0; xx < W; ++xx) ref += at(hd, p, yy, xx) * at(hx, p, yy + i - R, xx + j - R);
          for (int s = 0; s < splits; ++s) got += part[(size_t(p) * splits + s) * K * K + i * K + j];
          add(got, ref * REPS);
        }
  }
  const double ms = strip_bench::median_ms(launch);
  const double flops = 2.0 * REPS * K * K * double(planes) * H * W * (M == kBoth ? 2 : 1);
  return {name, ms, flops / (ms * 1e-3) / 1e12, std::sqrt(num / den), geo.regs, geo.blocks_per_sm};
}

}  // namespace

int main(int argc, char** argv) {
  int planes = 0, H = 0, W = 0;
  if (!strip_bench::parse_shape(argc, argv, 4, &planes, &H, &W)) return 2;
  const size_t n = size_t(planes) * H * W;
  float *dxin, *dd, *dw, *ddx, *dpart;
  const std::vector<float> hx = strip_bench::random_floats(n, 11, &dxin), hd = strip_bench::random_floats(n, 12, &dd);
  const std::vector<float> hw = strip_bench::random_floats(K * K, 13, &dw);
  STRIP_BENCH_CHECK(cudaMalloc(&ddx, n * 4));
  STRIP_BENCH_CHECK(cudaMalloc(&dpart, size_t(planes) * 1024 * K * K * 4));  // up to 1024 splits per plane
  std::vector<Result> rs;
  rs.push_back(run<kConv, 32, 128, 2>("conv 32x128 b2", dxin, dd, dw, ddx, dpart, planes, H, W, hx, hd, hw));
  rs.push_back(run<kConv, 32, 128, 3>("conv 32x128 b3", dxin, dd, dw, ddx, dpart, planes, H, W, hx, hd, hw));
  rs.push_back(run<kCorr, 32, 128, 2>("corr 32x128 b2", dxin, dd, dw, ddx, dpart, planes, H, W, hx, hd, hw));
  rs.push_back(run<kCorr, 32, 128, 3>("corr 32x128 b3", dxin, dd, dw, ddx, dpart, planes, H, W, hx, hd, hw));
  rs.push_back(run<kBoth, 32, 128, 2>("both 32x128 b2", dxin, dd, dw, ddx, dpart, planes, H, W, hx, hd, hw));
  rs.push_back(run<kBoth, 32, 128, 3>("both 32x128 b3", dxin, dd, dw, ddx, dpart, planes, H, W, hx, hd, hw));
  rs.push_back(run<kBoth, 16, 128, 4>("both 16x128 b4", dxin, dd, dw, ddx, dpart, planes, H, W, hx, hd, hw));
  rs.push_back(run<kBoth, 32, 64, 4>("both 32x64 b4", dxin, dd, dw, ddx, dpart, planes, H, W, hx, hd, hw));
  rs.push_back(run<kBoth, 16, 64, 6>("both 16x64 b6", dxin, dd, dw, ddx, dpart, planes, H, W, hx, hd, hw));
  std::printf("5x5 dx conv and weight-gradient correlation per 4 x 4 block, fp32, %d planes of %d x %d, %d passes "
              "per tile\n",
              planes, H, W, REPS);
  const int bad = strip_bench::print_results(rs, 1e-4);  // float sums of ~2e6 products per entry
  cudaFree(dxin);
  cudaFree(dd);
  cudaFree(dw);
  cudaFree(ddx);
  cudaFree(dpart);
  return bad ? 1 : 0;
}
