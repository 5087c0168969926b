// The weight-gradient half of a WTConv backward (k = 5, L = 2) as a kernel of its own, to price
// splitting the fused backward into a dx kernel and this one (docs/wtconv.md, perf note 62): per
// 64 x 64 pixel tile it reads x (with the 8-pixel halo level 2 needs) and dy from HBM, forms the
// Haar subbands of both at levels 1 and 2 on chip, and runs the nine 5 x 5 correlations
//   base:    C0[i][j]   = sum_p x(p + (i - 2, j - 2)) dy(p)
//   level l: C_l[t][i][j] = sum_q X_l[t](q + (i - 2, j - 2)) G_l[t](q),  t = LL, LH, HL, HH,
// with X_1 = Haar(x), G_1 = Haar(dy), X_2 = Haar(X_1[LL]), G_2 = Haar(G_1[LL]) (the cost of the
// backward's G_l, not its scales), in column runs (corr_strip_bench.cu, corr_col_kernel: a thread
// owns all 25 sums of one correlation and walks 8 rows of a 4-column segment). 288 threads, one
// column run each: 128 base, 4 x 32 level 1, 4 x 8 level 2, 800 multiply-adds apiece per tile.
// Not part of the library.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --resource-usage \
//     dev/cuda/wtconv_dw_bench.cu -o wtconv_dw_bench
//   ./wtconv_dw_bench [planes [H [W]]]     (default: big_L2's 2048 planes of 512 x 512; H, W
//                                            multiples of 64)
// Checked against float64 on two planes; timed as the median of 9 CUDA-event runs; FLOPs: 2 per
// multiply-add (56.25 per pixel).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "strip_bench_common.cuh"

namespace {

using strip_bench::Result;

constexpr int K = 5, T = 64, RUN = 8, THREADS = 288, KK = K * K, GROUPS = 9;
// Shared arrays (floats). Every correlation view (x at g offset (-2, -2)) starts on a 16-byte
// column; a quarter-warp's quad loads read 8 consecutive quads of one row.
constexpr int XP = 84, XROWS = T + 16;      // x tile: pixels y0 - 8 .., column c at smem c + 2
constexpr int DP = T;                       // dy tile, 64 x 64
constexpr int X1N = T / 2 + 8, X1P = 44;    // X_1[t]: coefficients -4 .. 35, column c at smem c + 6
constexpr int G1N = T / 2, G1P = 32;        // G_1[t]: 0 .. 31
constexpr int X2N = T / 4 + 4, X2P = 24;    // X_2[t]: -2 .. 17, column c at smem c + 2
constexpr int G2N = T / 4, G2P = 16;        // G_2[t]: 0 .. 15
constexpr int kXs = 0, kDs = kXs + XROWS * XP, kX1 = kDs + T * DP, kG1 = kX1 + 4 * X1N * X1P,
              kX2 = kG1 + 4 * G1N * G1P, kG2 = kX2 + 4 * X2N * X2P, kSmemFloats = kG2 + 4 * G2N * G2P;
static_assert(THREADS * KK <= kSmemFloats, "the block's sums fit in the tiles");

__device__ __forceinline__ float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// The four Haar subbands of the 2 x 2 block [a b; c d] (LL raw, as the library's chains).
__host__ __device__ __forceinline__ void haar(float a, float b, float c, float d, float* o) {
  o[0] = 0.5f * ((a + b) + (c + d));
  o[1] = 0.5f * ((a + b) - (c + d));
  o[2] = 0.5f * ((a - b) + (c - d));
  o[3] = 0.5f * ((a - b) - (c - d));
}

// acc[i][j] += sum over RUN g rows and 4 columns of g(r, c) x(r + i, c + j), x and g at the run's
// first row and segment; the x rows in a ring of K (compile-time slots).
__device__ __forceinline__ void column_run(float (&acc)[K][K], const float* x, int xp, const float* g, int gp) {
  float ring[K][8];
  auto load = [&](int slot, int row) {
    const float4 a = lds4(x + row * xp), b = lds4(x + row * xp + 4);
    ring[slot][0] = a.x; ring[slot][1] = a.y; ring[slot][2] = a.z; ring[slot][3] = a.w;
    ring[slot][4] = b.x; ring[slot][5] = b.y; ring[slot][6] = b.z; ring[slot][7] = b.w;
  };
#pragma unroll
  for (int t = 0; t < K - 1; ++t) load(t, t);
#pragma unroll
  for (int t = 0; t < RUN; ++t) {
    load((t + K - 1) % K, t + K - 1);
    const float4 q = lds4(g + t * gp);
    const float gv[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < K; ++i)
#pragma unroll
      for (int v = 0; v < 4; ++v)
#pragma unroll
        for (int j = 0; j < K; ++j) acc[i][j] = fmaf(gv[v], ring[(t + i) % K][v + j], acc[i][j]);
  }
}

// This thread's column run: its x view and g rows, given where the raw x and dy tiles sit.
struct RunView {
  const float *x, *g;
  int xp, gp;
};
__device__ __forceinline__ RunView run_view(const float* sm, const float* xs, const float* ds, int tid) {
  if (tid < 128) {  // base: 16 segments x 8 runs
    const int seg = tid % 16, run = tid / 16;
    return {xs + (6 + run * RUN) * XP + 8 + 4 * seg, ds + run * RUN * DP + 4 * seg, XP, DP};  // x row -2: tile row 6
  }
  if (tid < 256) {  // level 1: a warp per subband, 8 segments x 4 runs
    const int l = tid - 128, t = l / 32, seg = l % 8, run = (l / 8) % 4;
    return {sm + kX1 + t * X1N * X1P + (2 + run * RUN) * X1P + 4 + 4 * seg,  // X_1 row -2: array row 2
            sm + kG1 + t * G1N * G1P + run * RUN * G1P + 4 * seg, X1P, G1P};
  }
  const int l = tid - 256, t = l / 8, seg = l % 4, run = (l / 4) % 2;  // level 2: 4 subbands x 4 x 2
  return {sm + kX2 + t * X2N * X2P + run * RUN * X2P + 4 * seg, sm + kG2 + t * G2N * G2P + run * RUN * G2P + 4 * seg,
          X2P, G2P};
}

// The Haar passes of one staged tile (x at xs, column c at c + 2; dy at ds) into X_1, G_1, then
// X_2, G_2, and this thread's column run. Starts after the tile's staging barrier.
template <bool kHaar = true>
__device__ __forceinline__ void haar_and_correlate(float* sm, const float* xs, const float* ds, const RunView& v,
                                                   float (&acc)[K][K]) {
  const int tid = threadIdx.x;
  if constexpr (kHaar) {
  for (int e = tid; e < X1N * X1N + G1N * G1N; e += THREADS) {  // level 1
    float o[4];
    if (e < X1N * X1N) {
      const int r = e / X1N, c = e % X1N;  // coefficient (r - 4, c - 4): pixels 2 r - 8 .. of the tile
      const float* p = xs + 2 * r * XP + 2 + 2 * c;
      haar(p[0], p[1], p[XP], p[XP + 1], o);
#pragma unroll
      for (int t = 0; t < 4; ++t) sm[kX1 + t * X1N * X1P + r * X1P + 2 + c] = o[t];
    } else {
      const int f = e - X1N * X1N, r = f / G1N, c = f % G1N;
      const float* p = ds + 2 * r * DP + 2 * c;
      haar(p[0], p[1], p[DP], p[DP + 1], o);
#pragma unroll
      for (int t = 0; t < 4; ++t) sm[kG1 + t * G1N * G1P + r * G1P + c] = o[t];
    }
  }
  __syncthreads();
  for (int e = tid; e < X2N * X2N + G2N * G2N; e += THREADS) {  // level 2, from the LL subbands
    float o[4];
    if (e < X2N * X2N) {
      const int r = e / X2N, c = e % X2N;  // coefficient (r - 2, c - 2): X_1 (2 r - 4, 2 c - 4)
      const float* p = sm + kX1 + 2 * r * X1P + 2 + 2 * c;
      haar(p[0], p[1], p[X1P], p[X1P + 1], o);
#pragma unroll
      for (int t = 0; t < 4; ++t) sm[kX2 + t * X2N * X2P + r * X2P + c] = o[t];
    } else {
      const int f = e - X2N * X2N, r = f / G2N, c = f % G2N;
      const float* p = sm + kG1 + 2 * r * G1P + 2 * c;
      haar(p[0], p[1], p[G1P], p[G1P + 1], o);
#pragma unroll
      for (int t = 0; t < 4; ++t) sm[kG2 + t * G2N * G2P + r * G2P + c] = o[t];
    }
  }
  __syncthreads();
  }
  column_run(acc, v.x, v.xp, v.g, v.gp);
}

// The block's nine 25-entry sums (base, level-1 t, level-2 t, fixed order) to partial[blockIdx.x].
__device__ __forceinline__ void block_sums(float* sm, const float (&acc)[K][K], float* __restrict__ partial) {
  const int tid = threadIdx.x;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) sm[tid * KK + i * K + j] = acc[i][j];
  __syncthreads();
  if (tid < GROUPS * KK) {  // group 0: threads 0-127; 1-4: 32 each; 5-8: 8 each
    const int grp = tid / KK, ij = tid % KK;
    const int first = grp == 0 ? 0 : grp <= 4 ? 128 + 32 * (grp - 1) : 256 + 8 * (grp - 5);
    const int count = grp == 0 ? 128 : grp <= 4 ? 32 : 8;
    float s = 0.f;
    for (int u = 0; u < count; ++u) s += sm[(first + u) * KK + ij];
    partial[size_t(blockIdx.x) * GROUPS * KK + tid] = s;
  }
}

// One block: tiles split, split + splits, ... of plane blockIdx.x / splits, staged with ordinary
// loads between barriers (two blocks per SM hide each other's staging, or not). kHaar false: the
// correlations run on whatever the subband arrays hold, to time the rest without the Haar passes.
template <int MINB, bool kHaar = true>
__global__ void __launch_bounds__(THREADS, MINB)
    dw_kernel(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ partial, int H, int W,
              int splits) {
  extern __shared__ __align__(16) float sm[];
  const int plane = blockIdx.x / splits, split = blockIdx.x % splits, tid = threadIdx.x;
  const int tiles_x = W / T, tiles = (H / T) * tiles_x;
  const float* xp = x + size_t(plane) * H * W;
  const float* dp = dy + size_t(plane) * H * W;
  float acc[K][K];
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) acc[i][j] = 0.f;
  const RunView v = run_view(sm, sm + kXs, sm + kDs, tid);
  if constexpr (!kHaar)
    for (int e = kX1 + tid; e < kSmemFloats; e += THREADS) sm[e] = 0.f;  // subbands: zeros throughout
  for (int tile = split; tile < tiles; tile += splits) {
    const int y0 = (tile / tiles_x) * T, x0 = (tile % tiles_x) * T;
    __syncthreads();  // the previous tile's correlations are done with the arrays
    for (int e = tid; e < XROWS * (XROWS / 4); e += THREADS) {  // x: 80 rows of 20 quads
      const int r = e / (XROWS / 4), q = e % (XROWS / 4), gy = y0 - 8 + r, gx = x0 - 8 + 4 * q;
      float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gy >= 0 && gy < H && gx >= 0 && gx < W) val = *reinterpret_cast<const float4*>(xp + size_t(gy) * W + gx);
      float* d = sm + kXs + r * XP + 2 + 4 * q;  // 8-byte aligned
      *reinterpret_cast<float2*>(d) = make_float2(val.x, val.y);
      *reinterpret_cast<float2*>(d + 2) = make_float2(val.z, val.w);
    }
    for (int e = tid; e < T * (T / 4); e += THREADS) {  // dy: 64 rows of 16 quads
      const int r = e / (T / 4), q = e % (T / 4);
      *reinterpret_cast<float4*>(sm + kDs + r * DP + 4 * q) =
          *reinterpret_cast<const float4*>(dp + size_t(y0 + r) * W + x0 + 4 * q);
    }
    __syncthreads();
    haar_and_correlate<kHaar>(sm, sm + kXs, sm + kDs, v, acc);
  }
  block_sums(sm, acc, partial);
}

// cp.async of n bytes (8 or 16), zero-filled when !valid.
template <int N>
__device__ __forceinline__ void cp_async(float* dst, const float* src, bool valid) {
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  if constexpr (N == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 8 : 0));
}

// The same with the raw x and dy tiles double-buffered: the next tile's copies are in flight while
// this one's Haar passes and correlations run (one block per SM: 143 KB of shared memory).
__global__ void __launch_bounds__(THREADS, 1)
    dw_kernel_async(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ partial, int H,
                    int W, int splits) {
  extern __shared__ __align__(16) float sm[];  // derived arrays as dw_kernel, then two raw x/dy pairs
  const int plane = blockIdx.x / splits, split = blockIdx.x % splits, tid = threadIdx.x;
  const int tiles_x = W / T, tiles = (H / T) * tiles_x;
  const float* xp = x + size_t(plane) * H * W;
  const float* dp = dy + size_t(plane) * H * W;
  constexpr int kRaw = XROWS * XP + T * DP;
  float* const raw = sm + kSmemFloats;
  auto issue = [&](int tile, int buf) {
    const int y0 = (tile / tiles_x) * T, x0 = (tile % tiles_x) * T;
    float* xs = raw + buf * kRaw;
    float* ds = xs + XROWS * XP;
    for (int e = tid; e < XROWS * (XROWS / 2); e += THREADS) {  // x: 80 rows of 40 pairs
      const int r = e / (XROWS / 2), q = e % (XROWS / 2), gy = y0 - 8 + r, gx = x0 - 8 + 2 * q;
      const bool in = gy >= 0 && gy < H && gx >= 0 && gx < W;
      cp_async<8>(xs + r * XP + 2 + 2 * q, in ? xp + size_t(gy) * W + gx : xp, in);
    }
    for (int e = tid; e < T * (T / 4); e += THREADS) {  // dy: 64 rows of 16 quads
      const int r = e / (T / 4), q = e % (T / 4);
      cp_async<16>(ds + r * DP + 4 * q, dp + size_t(y0 + r) * W + x0 + 4 * q, true);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  float acc[K][K];
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int j = 0; j < K; ++j) acc[i][j] = 0.f;
  if (split < tiles) issue(split, 0);
  int buf = 0;
  for (int tile = split; tile < tiles; tile += splits, buf ^= 1) {
    __syncthreads();  // everyone is done with the previous tile, and so with buffer buf ^ 1
    if (tile + splits < tiles) {
      issue(tile + splits, buf ^ 1);
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();
    const float* xs = raw + buf * kRaw;
    haar_and_correlate(sm, xs, xs + XROWS * XP, run_view(sm, xs, xs + XROWS * XP, tid), acc);
  }
  block_sums(sm, acc, partial);
}

// float64 sums of one plane: out[group][25] as the kernel's groups.
void reference(const float* xp, const float* dp, int H, int W, double* out) {
  auto at = [](const std::vector<double>& a, int h, int w, int y, int x) {
    return (y >= 0 && y < h && x >= 0 && x < w) ? a[size_t(y) * w + x] : 0.0;
  };
  std::vector<double> x0(xp, xp + size_t(H) * W), d0(dp, dp + size_t(H) * W);
  auto level = [&](const std::vector<double>& a, int h, int w, std::vector<double>* sub) {
    for (int t = 0; t < 4; ++t) sub[t].assign(size_t(h / 2) * (w / 2), 0.0);
    for (int y = 0; y < h / 2; ++y)
      for (int x = 0; x < w / 2; ++x) {
        const double a0 = a[size_t(2 * y) * w + 2 * x], b = a[size_t(2 * y) * w + 2 * x + 1],
                     c = a[size_t(2 * y + 1) * w + 2 * x], d = a[size_t(2 * y + 1) * w + 2 * x + 1];
        const double o[4] = {0.5 * ((a0 + b) + (c + d)), 0.5 * ((a0 + b) - (c + d)), 0.5 * ((a0 - b) + (c - d)),
                             0.5 * ((a0 - b) - (c - d))};
        for (int t = 0; t < 4; ++t) sub[t][size_t(y) * (w / 2) + x] = o[t];
      }
  };
  auto corr = [&](const std::vector<double>& a, const std::vector<double>& g, int h, int w, double* o) {
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < K; ++j) {
        double s = 0;
        for (int y = 0; y < h; ++y)
          for (int x = 0; x < w; ++x) s += at(a, h, w, y + i - 2, x + j - 2) * g[size_t(y) * w + x];
        o[i * K + j] = s;
      }
  };
  std::vector<double> x1[4], g1[4], x2[4], g2[4];
  level(x0, H, W, x1);
  level(d0, H, W, g1);
  level(x1[0], H / 2, W / 2, x2);
  level(g1[0], H / 2, W / 2, g2);
  corr(x0, d0, H, W, out);
  for (int t = 0; t < 4; ++t) corr(x1[t], g1[t], H / 2, W / 2, out + (1 + t) * KK);
  for (int t = 0; t < 4; ++t) corr(x2[t], g2[t], H / 4, W / 4, out + (5 + t) * KK);
}

template <typename Kernel>
Result run(const char* name, Kernel kernel, size_t smem, const float* dx, const float* ddy, float* dpart, int planes,
           int H, int W, const std::vector<float>& hx, const std::vector<float>& hdy) {
  STRIP_BENCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  cudaFuncAttributes attr{};
  STRIP_BENCH_CHECK(cudaFuncGetAttributes(&attr, kernel));
  int bps = 0, sms = 0;
  STRIP_BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kernel, THREADS, smem));
  STRIP_BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int tiles = (H / T) * (W / T);
  const int splits = std::max(1, std::min(tiles, (4 * sms * bps + planes - 1) / planes));
  const unsigned blocks = unsigned(planes) * unsigned(splits);
  STRIP_BENCH_CHECK(cudaMemset(dpart, 0xff, size_t(blocks) * GROUPS * KK * 4));  // NaN
  auto launch = [&] { kernel<<<blocks, THREADS, smem>>>(dx, ddy, dpart, H, W, splits); };
  launch();
  STRIP_BENCH_CHECK(cudaGetLastError());
  STRIP_BENCH_CHECK(cudaDeviceSynchronize());
  std::vector<float> part(size_t(blocks) * GROUPS * KK);
  STRIP_BENCH_CHECK(cudaMemcpy(part.data(), dpart, part.size() * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (int p : {0, planes - 1}) {
    std::vector<double> ref(GROUPS * KK);
    reference(hx.data() + size_t(p) * H * W, hdy.data() + size_t(p) * H * W, H, W, ref.data());
    for (int e = 0; e < GROUPS * KK; ++e) {
      double got = 0;
      for (int s = 0; s < splits; ++s) got += part[(size_t(p) * splits + s) * GROUPS * KK + e];
      num += std::isfinite(got) ? (got - ref[e]) * (got - ref[e]) : 1e300;
      den += ref[e] * ref[e];
    }
  }
  const double ms = strip_bench::median_ms(launch);
  const double flops = 2.0 * 56.25 * double(planes) * H * W;
  return {name, ms, flops / (ms * 1e-3) / 1e12, std::sqrt(num / den), attr.numRegs, bps};
}

}  // namespace

int main(int argc, char** argv) {
  int planes = 0, H = 0, W = 0;
  if (!strip_bench::parse_shape(argc, argv, T, &planes, &H, &W)) return 2;
  if (H % T != 0) {
    std::fprintf(stderr, "H must be a multiple of %d\n", T);
    return 2;
  }
  const size_t n = size_t(planes) * H * W;
  float *dx, *ddy, *dpart;
  const std::vector<float> hx = strip_bench::random_floats(n, 21, &dx), hdy = strip_bench::random_floats(n, 22, &ddy);
  STRIP_BENCH_CHECK(cudaMalloc(&dpart, size_t(planes) * (H / T) * (W / T) * GROUPS * KK * 4));
  std::vector<Result> rs;
  const size_t smem = size_t(kSmemFloats) * 4, smem_async = smem + 2 * size_t(XROWS * XP + T * DP) * 4;
  rs.push_back(run("loads, 2 blocks/SM", dw_kernel<2>, smem, dx, ddy, dpart, planes, H, W, hx, hdy));
  rs.push_back(run("cp.async x2, 1 block/SM", dw_kernel_async, smem_async, dx, ddy, dpart, planes, H, W, hx, hdy));
  const double bytes = 2.0 * 4 * double(n);
  std::printf("WTConv weight gradients alone (k 5, L 2, fp32), %d planes of %d x %d: %.3g GFLOP, x and dy %.3g GB\n",
              planes, H, W, 2.0 * 56.25 * n / 1e9, bytes / 1e9);
  const int bad = strip_bench::print_results(rs, 1e-5);
  // The same kernel without its Haar passes (subband correlations on zeros): its sums are not the
  // gradients, so its error is printed and not judged.
  rs.push_back(run("no Haar passes", dw_kernel<2, false>, smem, dx, ddy, dpart, planes, H, W, hx, hdy));
  strip_bench::print_results({rs.back()}, HUGE_VAL);
  for (const Result& r : rs) std::printf("%-22s %8.0f GB/s of x and dy\n", r.name, bytes / (r.ms * 1e-3) / 1e9);
  cudaFree(dx);
  cudaFree(ddy);
  cudaFree(dpart);
  return bad ? 1 : 0;
}
