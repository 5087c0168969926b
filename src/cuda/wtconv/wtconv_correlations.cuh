// Correlation rows: the weight-gradient sums of a row of positions, with the window inputs in a
// register ring (element, pair and 16-byte quad reads).
#pragma once

#include <cstdint>

#include "wtconv_layouts.h"

namespace winconv {
namespace wtconv_detail {

// f(u) for the positions x + u of the chunks [x, x + CH) of [x, n), u = 0, STEP, ... < CH: whole
// chunks fully unrolled (f's ring indices, u modulo a ring length, are compile-time constants),
// then the last partial chunk as the same unrolled code left early rather than a shifting loop.
// x is the chunk base f reads (captured by reference); it ends at the last chunk's start.
// kWhole: the caller promises n % CH == 0, so there is no partial chunk to compile.
template <int CH, int STEP, bool kWhole = false, typename F>
__host__ __device__ __forceinline__ void unrolled_chunks(int& x, int n, F&& f) {
  if constexpr (kWhole) {
    for (; x < n; x += CH) {
#pragma unroll
      for (int u = 0; u < CH; u += STEP) f(u);
    }
  } else {
    for (; x + CH <= n; x += CH) {
#pragma unroll
      for (int u = 0; u < CH; u += STEP) f(u);
    }
#pragma unroll
    for (int u = 0; u < CH; u += STEP) {
      if (x + u >= n) break;
      f(u);
    }
  }
}

// acc[j] += sum over a row of n positions of g[x] * y[x + j], j < k: one row of the correlation
// that gives a weight gradient. The k accumulators stay in registers (KMAX-sized, guarded). For a
// compile-time K the k inputs y[x..x+K-1] slide through registers, so each position costs two
// shared loads (y[x+K-1], g[x]) instead of K + 1; the summation order is unchanged.
// The window is a ring indexed modulo K inside a fully unrolled chunk of K positions, so it is
// register renaming rather than K - 1 moves per position; the last n % K positions run as a
// partial chunk (the same unrolled code, left early), not as a shifting loop.
// kSum also adds g[0..n) into *gsum in order (the bias gradient rides on the same loads).
// When y and g are 8-byte aligned and n is even, positions go in pairs: one 8-byte load of g and
// one of the two new window inputs per pair (the ring is then K + 1 long, a chunk K + 1
// positions), i.e. one shared load per position instead of two; the summation order is the same.
template <int K, bool kSum = false>
__host__ __device__ __forceinline__ void corr_row(float* acc, const float* y, const float* g, int n, int k,
                                                  float* gsum = nullptr) {
  if constexpr (K > 0) {
    if (n <= 0) return;
    constexpr int W = K + 1;
    float win[W];
    int x = 0;
    // Position x + u of a ring of R registers whose slot m holds y[x + m] (m < K - 1) at the top
    // of a chunk: one new window input, one g, K multiply-adds.
    auto single = [&](auto ring, int u) {
      constexpr int R = decltype(ring)::value;
      win[(u + K - 1) % R] = y[x + u + K - 1];
      const float gv = g[x + u];
      if constexpr (kSum) *gsum += gv;
#pragma unroll
      for (int j = 0; j < K; ++j) acc[j] = fmaf(win[(u + j) % R], gv, acc[j]);
    };
    if (((reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(g)) & 7) == 0 && n % 2 == 0) {
      // Positions x + u, x + u + 1 of the ring of W (u even): 8-byte loads.
      auto pair = [&](int u) {
        const float2 yv = *reinterpret_cast<const float2*>(y + x + u + K - 1);
        win[(u + K - 1) % W] = yv.x;
        win[(u + K) % W] = yv.y;
        const float2 gv = *reinterpret_cast<const float2*>(g + x + u);
        if constexpr (kSum) {
          *gsum += gv.x;
          *gsum += gv.y;
        }
#pragma unroll
        for (int j = 0; j < K; ++j) acc[j] = fmaf(win[(u + j) % W], gv.x, acc[j]);
#pragma unroll
        for (int j = 0; j < K; ++j) acc[j] = fmaf(win[(u + 1 + j) % W], gv.y, acc[j]);
      };
#pragma unroll
      for (int j = 0; j < K - 1; j += 2) {
        const float2 v = *reinterpret_cast<const float2*>(y + j);
        win[j] = v.x;
        win[j + 1] = v.y;
      }
      // Invariant at the top of a chunk: win[m] = y[x + m] for m < K - 1, x even. The last chunk
      // holds fewer than W positions, an even count.
      unrolled_chunks<W, 2>(x, n, pair);
    } else {
#pragma unroll
      for (int j = 0; j < K - 1; ++j) win[j] = y[j];
      // Invariant at the top of a chunk: win[m] = y[x + m] for m < K - 1 (a ring of K).
      unrolled_chunks<K, 1>(x, n, [&](int u) { single(std::integral_constant<int, K>{}, u); });
    }
  } else {
    // Runtime k: four positions per step, their k + 3 window inputs loaded once (unrolled to the
    // largest kernel size, left at k), so k + 7 loads per 4k multiply-adds instead of 5k; each
    // acc[j] still takes its terms in position order.
    constexpr int KM = kWtconvMaxKernelSize;
    int x = 0;
    for (; x + 4 <= n; x += 4) {
      float in[KM + 3];
#pragma unroll
      for (int m = 0; m < KM + 3; ++m) {
        if (m >= k + 3) break;
        in[m] = y[x + m];
      }
      const float g0 = g[x], g1 = g[x + 1], g2 = g[x + 2], g3 = g[x + 3];
      if constexpr (kSum) {
        *gsum += g0;
        *gsum += g1;
        *gsum += g2;
        *gsum += g3;
      }
#pragma unroll
      for (int j = 0; j < KM; ++j) {
        if (j >= k) break;
        acc[j] = fmaf(in[j], g0, acc[j]);
        acc[j] = fmaf(in[j + 1], g1, acc[j]);
        acc[j] = fmaf(in[j + 2], g2, acc[j]);
        acc[j] = fmaf(in[j + 3], g3, acc[j]);
      }
    }
    for (; x < n; ++x) {
      const float gv = g[x];
      if constexpr (kSum) *gsum += gv;
#pragma unroll
      for (int j = 0; j < KM; ++j)
        if (j < k) acc[j] = fmaf(y[x + j], gv, acc[j]);
    }
  }
}

// The same correlation row read as 16-byte quads: one load of four window inputs and one of four
// g values per four positions, instead of two 8-byte loads per two positions (half the shared
// load instructions; the weight-gradient correlations are the largest block of the backward base
// kernel's instructions). The rows of a tile sit at fixed phases of the 16-byte grid: y - kOy and
// g - kOg are 16-byte aligned (kOy, kOg < 4). Both rings are indexed by position modulo their
// length inside a fully unrolled chunk (register renaming, as in corr_row), and every acc[j]
// takes its multiply-adds in position order, so the result equals corr_row's bit for bit.
// The caller promises (quad_corr_ok): n % 4 == 0, the alignment above, and that the floats
// y[-kOy .. n + corr_quad_lead(K, kOy) - kOy) and g[-kOg .. n + corr_quad_lead(1, kOg) - kOg)
// lie in shared memory (at most 3 floats on either side of what corr_row reads).
// (corr_quad_lead, corr_quad_chunk: wtconv_layouts.h, which checks the fixed tiles against them.)
// kWhole: the caller also promises n % chunk == 0 (the chunk below), so no partial last chunk.
template <int K, int kOy, int kOg, bool kSum = false, bool kWhole = false>
__host__ __device__ __forceinline__ void corr_row_quads(float* acc, const float* y, const float* g, int n,
                                                        float* gsum = nullptr) {
  static_assert(K > 0 && kOy >= 0 && kOy < 4 && kOg >= 0 && kOg < 4, "compile-time k and phases");
  constexpr int LY = corr_quad_lead(K, kOy), RY = LY + 4;  // y[t] lives in slot (t + kOy) % RY
  constexpr int LG = corr_quad_lead(1, kOg), RG = LG + 4;  // g[t] lives in slot (t + kOg) % RG
  constexpr int CH = corr_quad_chunk(K, kOy, kOg);           // positions per chunk: a period of both
  const float* yb = y - kOy;
  const float* gb = g - kOg;
  float wy[RY], wg[RG];
  auto quad = [](float* dst, const float* src) {
    const float4 v = *reinterpret_cast<const float4*>(src);
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
  };
#pragma unroll
  for (int q = 0; q < LY; q += 4) quad(wy + q, yb + q);
#pragma unroll
  for (int q = 0; q < LG; q += 4) quad(wg + q, gb + q);
  int x = 0;
  // Positions x + u .. x + u + 3 (u a multiple of 4, x of CH): the quads that end the windows.
  auto step = [&](int u) {
    quad(wy + (u + LY) % RY, yb + x + u + LY);
    quad(wg + (u + LG) % RG, gb + x + u + LG);
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const float gv = wg[(u + v + kOg) % RG];
      if constexpr (kSum) *gsum += gv;
#pragma unroll
      for (int j = 0; j < K; ++j) acc[j] = fmaf(wy[(u + v + j + kOy) % RY], gv, acc[j]);
    }
  };
  unrolled_chunks<CH, 4, kWhole>(x, n, step);
}

// corr_row, taking the quad path when the caller's block-uniform `quads` holds (a per-row test
// would split warps whose rows alternate between phases).
template <int K, int kOy, int kOg, bool kSum = false, bool kWhole = false>
__host__ __device__ __forceinline__ void corr_row_maybe_quads(bool quads, float* acc, const float* y, const float* g,
                                                              int n, int k, float* gsum = nullptr) {
  if constexpr (K > 0) {
    if (quads) {
      corr_row_quads<K, kOy, kOg, kSum, kWhole>(acc, y, g, n, gsum);
      return;
    }
  }
  corr_row<K, kSum>(acc, y, g, n, k, gsum);
}

// Whether rows of n positions at y = y0 + i * ypitch and g = g0 + i * gpitch (every row i of a
// tile) meet corr_row_quads' alignment for phases (oy, og).
__host__ __device__ inline bool quad_corr_ok(const float* y0, int ypitch, int oy, const float* g0, int gpitch, int og,
                                            int n) {
  return quad_rows_aligned(reinterpret_cast<uintptr_t>(y0 - oy), ypitch, reinterpret_cast<uintptr_t>(g0 - og), gpitch,
                           n);
}

}  // namespace wtconv_detail
}  // namespace winconv
