// Device helpers shared by the WTConv kernels: activation load/store, the Haar butterfly,
// the kernel-argument structs and the item range of a channel-major block.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <type_traits>

#include "cuda/common/fast_divmod.cuh"
#include "wtconv_plan.h"

namespace winconv {
namespace wtconv_detail {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Haar analysis of the 2x2 block [a b; c d]; the 4x4 matrix is symmetric and orthogonal, so the
// same butterfly is also the synthesis (used by the backward).
__device__ __forceinline__ void haar4(float a, float b, float c, float d, float out[4]) {
  const float s0 = a + b, s1 = c + d, d0 = a - b, d1 = c - d;
  out[0] = 0.5f * (s0 + s1);  // LL
  out[1] = 0.5f * (s0 - s1);  // S1: sign by row
  out[2] = 0.5f * (d0 + d1);  // S2: sign by column
  out[3] = 0.5f * (d0 - d1);  // HH
}

// The raw LL value of the 2x2 block [a b; c d], as haar_cascade_kernel stores it. The level-2
// kernels that read the activations form X_1 with this same function, so their X_1 equals the
// stored chain bit for bit.
__device__ __forceinline__ float haar_ll(float a, float b, float c, float d) { return 0.5f * ((a + b) + (c + d)); }
// The LL values of the four 2x2 blocks of a 4 x 4 pixel patch whose columns start at c: (rows 0-1,
// columns c..c+1), (0-1, c+2..c+3), (2-3, c..c+1), (2-3, c+2..c+3).
template <int N>
__device__ __forceinline__ float4 haar_ll_quad(const float (&p)[4][N], int c) {
  return make_float4(haar_ll(p[0][c], p[0][c + 1], p[1][c], p[1][c + 1]),
                     haar_ll(p[0][c + 2], p[0][c + 3], p[1][c + 2], p[1][c + 3]),
                     haar_ll(p[2][c], p[2][c + 1], p[3][c], p[3][c + 1]),
                     haar_ll(p[2][c + 2], p[2][c + 3], p[3][c + 2], p[3][c + 3]));
}

// Child (dy, dx) of the synthesis of [ll s1 s2 hh] without the 1/2 factor.
__device__ __forceinline__ float synth_child(const float z[4], int dy, int dx) {
  const float sy = dy ? -1.f : 1.f, sx = dx ? -1.f : 1.f;
  return z[0] + sy * z[1] + sx * z[2] + sy * sx * z[3];
}

// Range of items [begin, end) of the block with split index `split` out of `splits`.
__device__ __forceinline__ void item_range(int64_t items, int splits, int split, int64_t* begin, int64_t* end) {
  *begin = items * split / splits;
  *end = items * (split + 1) / splits;
}

// The items of a block, as a first item and a step: a contiguous range (step 1), or with kStrided
// the items split, split + splits, ... Strided, the blocks of one channel work on neighbouring
// tiles at the same time, so a tile's halo is read from L2 while its neighbour's staging has it
// there; a contiguous range re-reads it an item later, after more than the L2 has streamed
// through on large shapes (docs/wtconv.md, perf note 21: the base kernels and the level-2 kernels
// that read x and dy use it; the level kernels reading a stored chain keep ranges).
template <bool kStrided>
__device__ __forceinline__ void block_items(int64_t items, int splits, int split, int64_t* first, int64_t* end,
                                            int64_t* step) {
  if constexpr (kStrided) {
    *first = split;
    *end = items;
    *step = splits;
  } else {
    item_range(items, splits, split, first, end);
    *step = 1;
  }
}

// sum_{i,j<k} w[i*k+j] * src[i*pitch+j]; K > 0 unrolls a compile-time size, K == 0 runs any odd k.
// K == 0 unrolls each row to the largest kernel size and leaves it at k (a warp-uniform branch):
// the loads then take immediate offsets from two row pointers, where a rolled loop spent about ten
// instructions per multiply-add on indices and its counter (ncu, k = 9: 9.9% of the forward base
// kernel's instructions were FFMA). The summation order is the same either way. It is the
// one-window case of conv_adjacent_windows below, kept apart: written as conv_adjacent_windows<1>
// (the same bits) the runtime-k training steps ran 5-10% slower.
// wpitch (runtime k): the filter's row pitch, k by default (filter_row_pitch in the base kernels).
template <int K>
__host__ __device__ __forceinline__ float conv_window(const float* w, const float* src, int pitch, int k,
                                                      int wpitch = 0) {
  float acc = 0.f;
  if constexpr (K > 0) {
#pragma unroll
    for (int i = 0; i < K; ++i)
#pragma unroll
      for (int j = 0; j < K; ++j) acc = fmaf(w[i * K + j], src[i * pitch + j], acc);
  } else {
    const int wstep = wpitch > 0 ? wpitch : k;
    for (int i = 0; i < k; ++i, w += wstep, src += pitch) {
#pragma unroll
      for (int j = 0; j < kWtconvMaxKernelSize; ++j) {
        if (j >= k) break;
        acc = fmaf(w[j], src[j], acc);
      }
    }
  }
  return acc;
}

// Zeroes what the runtime-k filter layout (filter_row_pitch, filter_slot) leaves unwritten in
// `count` filters filter_stride(k) apart: each row's slots past k and the stride's tail, which
// the window passes read with their weight quads and never use.
__device__ __forceinline__ void zero_filter_padding(float* filters, int count, int k) {
  const int fs = filter_stride(k), wp = filter_row_pitch(k);
  for (int e = threadIdx.x; e < count * fs; e += blockDim.x)
    if (e % fs >= k * wp || e % fs % wp >= k) filters[e] = 0.f;
}

// The window passes' inner step: acc[u] += w[4q + v] * in[OFF + 4q + v + u] for the weights of
// quad q of a filter row below k (one 16-byte load, w 16-byte aligned), in column order.
template <int OFF, int N, int M>
__host__ __device__ __forceinline__ void weight_quad_fma(const float* w, int q, int k, const float (&in)[M],
                                                         float (&acc)[N]) {
  const float4 wq = *reinterpret_cast<const float4*>(w + 4 * q);
  const float wv[4] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    if (4 * q + v >= k) break;
#pragma unroll
    for (int u = 0; u < N; ++u) acc[u] = fmaf(wv[v], in[OFF + 4 * q + v + u], acc[u]);
  }
}

// conv_window<0> for the ncols <= N adjacent outputs at src, src + 1, ...: acc[u] = sum_{i,j<k}
// w[i*wpitch+j] * src[i*pitch+j+u]. Each weight is loaded once for the N outputs and each input of
// a row once (their windows overlap in k + N - 1 inputs): with N = 4 about a quarter of the shared
// loads per multiply-add of one window at a time, whose two loads per multiply-add bound the
// runtime-k kernels (docs/wtconv.md, notes 44 and 45). The weights of a row load as 16-byte quads
// (a quarter of the load instructions, and of the shared wavefronts, since a warp's lanes read the
// same filter): the caller promises w 16-byte aligned and wpitch a multiple of 4 (the base
// kernels' filter_row_pitch), and reads of w up to the row's next multiple of 4 (the weights past
// k are read, never used). Reads src[i*pitch + m] for m < k + ncols - 1 only (acc[u] for
// u >= ncols is left meaningless); each output's terms in conv_window's order, bit for bit.
template <int N = 4>
__host__ __device__ __forceinline__ void conv_adjacent_windows(const float* w, int wpitch, const float* src, int pitch,
                                                              int k, int ncols, float (&acc)[N]) {
  constexpr int KM = kWtconvMaxKernelSize;
  const int m_end = k + ncols - 1;
#pragma unroll
  for (int u = 0; u < N; ++u) acc[u] = 0.f;
  // Rolled also where k is a compile-time constant (with_compiled_kernel_size): unrolled k times, the
  // rows' inputs stay live together and spill.
#pragma unroll 1
  for (int i = 0; i < k; ++i, w += wpitch, src += pitch) {
    float in[KM + N - 1];
#pragma unroll
    for (int m = 0; m < KM + N - 1; ++m) {
      if (m >= k + N - 1) break;
      in[m] = m < m_end ? src[m] : 0.f;
    }
#pragma unroll
    for (int q = 0; q < (KM + 3) / 4; ++q) {
      if (4 * q >= k) break;
      weight_quad_fma<0>(w, q, k, in, acc);
    }
  }
}

// conv_adjacent_windows with each kernel row's inputs read as V-float vectors (V = 2 or 4) from
// the V-aligned address PH floats below src. The lanes of a warp take adjacent jobs, N floats
// apart, so a scalar load of one input per lane puts N lanes on each bank and takes N shared
// wavefronts (the runtime-k base kernels ran at 84-88% of the L1 throughput, docs/wtconv.md, perf
// note 53), while V-float vectors of 32 / V lanes fill one wavefront. The caller promises every
// row at phase PH (pitch % V == 0) and that the floats from src - PH up to src + k + N + V - 3 of
// every row lie in shared memory that no thread writes meanwhile: the full N windows are read,
// whatever ncols is (acc[u] for u >= ncols stays meaningless). Weights as in
// conv_adjacent_windows; each output's terms in conv_window's order, bit for bit.
template <int N, int V, int PH>
__host__ __device__ __forceinline__ void conv_adjacent_windows_vec(const float* w, int wpitch, const float* src,
                                                                  int pitch, int k, float (&acc)[N]) {
  static_assert((V == 2 || V == 4) && PH >= 0 && PH < V, "2- or 4-float vectors, a phase below V");
  constexpr int KM = kWtconvMaxKernelSize, NV = (PH + KM + N - 1 + V - 1) / V;
  const int nv = (PH + k + N - 1 + V - 1) / V;  // vectors covering the row's k + N - 1 inputs
  const float* row = src - PH;
#pragma unroll
  for (int u = 0; u < N; ++u) acc[u] = 0.f;
#pragma unroll 1  // rolled, as in conv_adjacent_windows
  for (int i = 0; i < k; ++i, w += wpitch, row += pitch) {
    float in[NV * V];
    // Each vector is loaded just before the first quad of weights that needs it (inputs up to
    // PH + 4 q + N + 2 for quad q), so that only the inputs in use stay in registers.
    const auto load = [&](int vv) {
      if constexpr (V == 4) {
        const float4 v = *reinterpret_cast<const float4*>(row + 4 * vv);
        in[4 * vv] = v.x;
        in[4 * vv + 1] = v.y;
        in[4 * vv + 2] = v.z;
        in[4 * vv + 3] = v.w;
      } else {
        const float2 v = *reinterpret_cast<const float2*>(row + 2 * vv);
        in[2 * vv] = v.x;
        in[2 * vv + 1] = v.y;
      }
    };
#pragma unroll
    for (int q = 0; q < (KM + 3) / 4; ++q) {
      if (4 * q >= k) break;
#pragma unroll
      for (int vv = 0; vv < NV; ++vv)
        if ((q == 0 || vv > (PH + 4 * q + N - 2) / V) && vv <= (PH + 4 * q + N + 2) / V && vv < nv) load(vv);
      weight_quad_fma<PH>(w, q, k, in, acc);
    }
  }
}

// The vector width for conv_adjacent_windows_by over rows `pitch` floats apart: the widest of 4
// and 2 that keeps every row at one phase, at most n_max (the jobs' column stride, so that a
// warp's lanes share the phase); 1 (scalar loads) at k = 1, whose few inputs per row do not pay
// for the vectors (docs/wtconv.md, perf note 53).
__host__ __device__ inline int window_vector_width(int k, int pitch, int n_max) {
  if (k == 1) return 1;
  if (pitch % 4 == 0 && n_max >= 4) return 4;
  return pitch % 2 == 0 && n_max >= 2 ? 2 : 1;
}

// How a window pass loads its inputs: V-float vectors at phase PH (conv_adjacent_windows_vec), or
// V = 1, one at a time reading only the ncols windows (conv_adjacent_windows).
template <int V, int PH>
struct WindowLoads {};

template <int N, int V, int PH>
__host__ __device__ __forceinline__ void adjacent_windows(WindowLoads<V, PH>, const float* w, int wpitch,
                                                          const float* src, int pitch, int k, int ncols,
                                                          float (&acc)[N]) {
  if constexpr (V == 1) conv_adjacent_windows<N>(w, wpitch, src, pitch, k, ncols, acc);
  else conv_adjacent_windows_vec<N, V, PH>(w, wpitch, src, pitch, k, acc);
}

// f(WindowLoads<V, PH>{}) for the caller's block-uniform vector width V (window_vector_width: 4 or
// 2 where every row of the tile starts at one phase of it, and the reads past the windows stay in
// quiet shared memory, kWindowSlack) at the phase of src, or f(WindowLoads<1, 0>{}). A job whose
// window passes share that phase (subbands of one tile) dispatches once for all of them: one
// dispatch per pass left values live across four inlined switches and spilled.
template <typename F>
__host__ __device__ __forceinline__ void with_window_loads(int V, const float* src, F&& f) {
  const int ph = int(reinterpret_cast<uintptr_t>(src) >> 2);
  if (V == 4) {
    switch (ph & 3) {
      case 0: f(WindowLoads<4, 0>{}); break;
      case 1: f(WindowLoads<4, 1>{}); break;
      case 2: f(WindowLoads<4, 2>{}); break;
      default: f(WindowLoads<4, 3>{}); break;
    }
  } else if (V == 2) {
    if (ph & 1) f(WindowLoads<2, 1>{});
    else f(WindowLoads<2, 0>{});
  } else {
    f(WindowLoads<1, 0>{});
  }
}

// One window pass with its own dispatch (with_window_loads, adjacent_windows).
template <int N>
__host__ __device__ __forceinline__ void conv_adjacent_windows_by(int V, const float* w, int wpitch, const float* src,
                                                                 int pitch, int k, int ncols, float (&acc)[N]) {
  with_window_loads(V, src, [&](auto loads) { adjacent_windows<N>(loads, w, wpitch, src, pitch, k, ncols, acc); });
}

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
// (corr_quad_lead, corr_quad_chunk: plan.h, which checks the fixed tiles against them.)
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

// f(std::integral_constant<int, KC>{}) for the inner loops of a kernel compiled for K: KC = K when
// K > 0; in the runtime-k instance (K == 0) KC = k for the sizes it serves (1, 9, 11, 13, 15).
// Correlation rows then take corr_row's register ring (two shared loads per k multiply-adds, one
// with pairs) instead of the four-position form's k + 7 loads and a branch per window input and per
// kernel column (docs/wtconv.md, perf note 72), and the window passes, given KC as their k, lose
// their per-column tests (note 73; their row loops stay rolled). The inner loops are small pieces
// of code, so the sizes cost four more instances of them, not of the kernels. The sums are the
// same either way. kOnly > 0: a runtime-k kernel instance launched for k = kOnly alone (the k = 1
// instances of the base kernels and the backward level kernel), which compiles that size only and
// so keeps that size's registers.
template <int K, int kOnly = 0, typename F>
__device__ __forceinline__ void with_compiled_kernel_size(int k, F&& f) {
  static_assert(kOnly == 0 || K == 0, "kOnly selects a size of the runtime-k instance");
  if constexpr (K > 0) {
    f(std::integral_constant<int, K>{});
  } else if constexpr (kOnly > 0) {
    f(std::integral_constant<int, kOnly>{});
  } else {
    switch (k) {
      case 1: f(std::integral_constant<int, 1>{}); break;
      case 9: f(std::integral_constant<int, 9>{}); break;
      case 11: f(std::integral_constant<int, 11>{}); break;
      case 13: f(std::integral_constant<int, 13>{}); break;
      case 15: f(std::integral_constant<int, 15>{}); break;
      default: f(std::integral_constant<int, 0>{}); break;
    }
  }
}

// with_compiled_kernel_size for the inner loops that take k as a value (the window passes):
// f(kw) with kw = KC, a constant once inlined, or the runtime k where KC is 0.
template <int K, int kOnly = 0, typename F>
__device__ __forceinline__ void with_compiled_k(int k, F&& f) {
  with_compiled_kernel_size<K, kOnly>(k, [&](auto kc) { f(decltype(kc)::value > 0 ? decltype(kc)::value : k); });
}

// Whether rows of n positions at y = y0 + i * ypitch and g = g0 + i * gpitch (every row i of a
// tile) meet corr_row_quads' alignment for phases (oy, og).
__host__ __device__ inline bool quad_corr_ok(const float* y0, int ypitch, int oy, const float* g0, int gpitch, int og,
                                            int n) {
  return quad_rows_aligned(reinterpret_cast<uintptr_t>(y0 - oy), ypitch, reinterpret_cast<uintptr_t>(g0 - og), gpitch,
                           n);
}

// f(p, y) for the rows first, first + step, ... of np planes of `rows` rows each (row index
// p * rows + y), stepped without a division per row (a runtime divide is ~20 instructions).
// kOnePlane: the caller's np is 1 (a fixed-tile instance), so the plane carry disappears.
template <bool kOnePlane = false, typename F>
__host__ __device__ __forceinline__ void for_strided_rows(int first, int step, int rows, int np, F f) {
  if constexpr (kOnePlane) {
    for (int y = first; y < rows; y += step) f(0, y);
  } else {
    for (int p = 0, y = first;; y += step) {
      while (y >= rows) {
        y -= rows;
        ++p;
      }
      if (p >= np) return;
      f(p, y);
    }
  }
}

// threadIdx.x, read where it is called: the compiler cannot hoist the read (or values derived
// from it) out of a loop and keep them live across it.
__device__ __forceinline__ int opaque_thread_index() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// Rows of outputs a thread computes in one column strip of the register-blocked convolution.
constexpr int kStripRows = 4;

// Strip rows of the base kernels' convolutions: 8 rows halve the weight and input-row loads per
// output when the tile is tall enough; k = 7 (and the runtime-k path) stays at 4, where 49
// weights and 8 accumulators would spill at the register bound. Host and device use the rule.
__host__ __device__ constexpr int strip_rows(int k, int rows) { return (k == 3 || k == 5) && rows >= 16 ? 8 : 4; }

// Register-blocked k x k convolution (correlation form, like conv_window) of R vertically adjacent
// outputs: acc[o] = sum_{i,j} w[i*K+j] * src[(o+i)*pitch + j]. The K*K weights sit in registers and
// every input row is read from shared memory once and used by all outputs that need it, i.e.
// K*K + (R+K-1)*K shared loads for R outputs instead of 2*K*K per output. Neighbouring lanes take
// neighbouring columns, so the loads are conflict-free. The per-output summation order (i, then j)
// is that of conv_window, so results are bit-identical to it. Input rows at or past `rows_left`
// are clamped to the last valid row: they only feed outputs the caller discards. A full strip
// (the common case) skips the clamp, so each row costs one pointer step and K immediate-offset
// loads rather than a compare, a select and a multiply-add of the row index.
// Input row ii of a strip; with kClamp, rows at or past rows_left read the last valid row.
template <bool kClamp>
__host__ __device__ __forceinline__ const float* strip_row(const float* base, int ii, int rows_left, int pitch) {
  if constexpr (kClamp) return base + (ii < rows_left ? ii : rows_left - 1) * pitch;
  else return base + ii * pitch;
}
template <int K, int R, bool kClamp>
__host__ __device__ __forceinline__ void conv_column_strip_rows(const float (&wr)[K * K], const float* src, int pitch,
                                                                int rows_left, float (&acc)[R]) {
#pragma unroll
  for (int ii = 0; ii < R + K - 1; ++ii) {
    const float* row = strip_row<kClamp>(src, ii, rows_left, pitch);
    float in[K];
#pragma unroll
    for (int j = 0; j < K; ++j) in[j] = row[j];
#pragma unroll
    for (int o = 0; o < R; ++o) {
      const int i = ii - o;
      if (i >= 0 && i < K) {
#pragma unroll
        for (int j = 0; j < K; ++j) acc[o] = fmaf(wr[i * K + j], in[j], acc[o]);
      }
    }
  }
}
// The K*K filter at w into registers: float4 loads when w is 16-byte aligned, scalar loads
// otherwise. kAligned: the caller guarantees the alignment (the base kernels' filters, filter_stride
// floats apart from the 128-byte aligned shared memory base), so no run-time test: with it, the
// compiler issued the float4 loads and then both branches' register moves, predicated, ~50 moves
// per strip job (docs/wtconv.md, perf note 33).
template <int K, bool kAligned = false>
__host__ __device__ __forceinline__ void load_filter(const float* w, float (&wr)[K * K]) {
  if (kAligned || (reinterpret_cast<uintptr_t>(w) & 15) == 0) {
#pragma unroll
    for (int i = 0; i + 4 <= K * K; i += 4) {
      const float4 v = *reinterpret_cast<const float4*>(w + i);
      wr[i] = v.x;
      wr[i + 1] = v.y;
      wr[i + 2] = v.z;
      wr[i + 3] = v.w;
    }
#pragma unroll
    for (int i = K * K / 4 * 4; i < K * K; ++i) wr[i] = w[i];
  } else {
#pragma unroll
    for (int i = 0; i < K * K; ++i) wr[i] = w[i];
  }
}

template <int K, int R, bool kAlignedW = false>
__host__ __device__ __forceinline__ void conv_column_strip(const float* w, const float* src, int pitch, int rows_left,
                                                           float (&acc)[R]) {
  float wr[K * K];
  load_filter<K, kAlignedW>(w, wr);
#pragma unroll
  for (int o = 0; o < R; ++o) acc[o] = 0.f;
  if (rows_left >= R + K - 1) conv_column_strip_rows<K, R, false>(wr, src, pitch, rows_left, acc);
  else conv_column_strip_rows<K, R, true>(wr, src, pitch, rows_left, acc);
}

// The same convolution for two adjacent output columns (acc[o][0] at src, acc[o][1] at src + 1):
// each input row is read as 8-byte loads from an 8-byte aligned address, K + 1 floats (kOdd:
// src is at an odd float, so K + 3 floats from src - 1), and feeds 2K multiply-adds per output
// row it touches: ~(K + 1) / 2 shared loads per row for two columns instead of K per column.
// Per output the summation order is that of conv_window (bit-identical). The caller guarantees
// the alignment and that the row holds the extra float(s).
template <int K, int R, bool kOdd, bool kClamp>
__host__ __device__ __forceinline__ void conv_pair_strip_rows(const float (&wr)[K * K], const float* base, int pitch,
                                                              int rows_left, float (&acc)[R][2]) {
  constexpr int kIn = kOdd ? K + 3 : K + 1, o0 = kOdd ? 1 : 0;
#pragma unroll
  for (int ii = 0; ii < R + K - 1; ++ii) {
    const float* row = strip_row<kClamp>(base, ii, rows_left, pitch);
    float in[kIn];
#pragma unroll
    for (int q = 0; q < kIn / 2; ++q) {
      const float2 v = reinterpret_cast<const float2*>(row)[q];
      in[2 * q] = v.x;
      in[2 * q + 1] = v.y;
    }
#pragma unroll
    for (int o = 0; o < R; ++o) {
      const int i = ii - o;
      if (i >= 0 && i < K) {
#pragma unroll
        for (int j = 0; j < K; ++j) {
          acc[o][0] = fmaf(wr[i * K + j], in[o0 + j], acc[o][0]);
          acc[o][1] = fmaf(wr[i * K + j], in[o0 + j + 1], acc[o][1]);
        }
      }
    }
  }
}
// kFull: the caller guarantees rows_left >= R + K - 1 (a compile-time tile whose every strip is
// full), so the clamped variant is not compiled in.
template <int K, int R, bool kOdd, bool kAlignedW = false, bool kFull = false>
__host__ __device__ __forceinline__ void conv_pair_strip(const float* w, const float* src, int pitch, int rows_left,
                                                         float (&acc)[R][2]) {
  float wr[K * K];
  load_filter<K, kAlignedW>(w, wr);
#pragma unroll
  for (int o = 0; o < R; ++o) acc[o][0] = acc[o][1] = 0.f;
  const float* base = kOdd ? src - 1 : src;
  if (kFull || rows_left >= R + K - 1) conv_pair_strip_rows<K, R, kOdd, false>(wr, base, pitch, rows_left, acc);
  else conv_pair_strip_rows<K, R, kOdd, true>(wr, base, pitch, rows_left, acc);
}

// The same convolution for four adjacent output columns (acc[o][u] at src + u), every strip full:
// each input row's K + 3 floats are read as 16-byte quads (kOff2: src sits 2 floats past a 16-byte
// boundary, so a pair, quads, then a pair; else quads, then a pair when K + 3 is not a multiple
// of 4) and feed 4K multiply-adds per output row they touch: about half the shared loads per
// output of the pair strip. The summation order per output is that of conv_window. The caller
// guarantees the alignment, that each row holds the floats read, and that the R + K - 1 input
// rows are all in the tile (a full strip: there is no clamped variant).
template <int K, bool kOff2>
__host__ __device__ __forceinline__ void load_quad_strip_row(const float* row, float (&in)[K + 3]) {
  constexpr int n = K + 3, first = kOff2 ? 2 : 0, quads = (n - first) / 4;
  if constexpr (kOff2) {
    const float2 v = *reinterpret_cast<const float2*>(row);
    in[0] = v.x;
    in[1] = v.y;
  }
#pragma unroll
  for (int q = 0; q < quads; ++q) {
    const float4 v = *reinterpret_cast<const float4*>(row + first + 4 * q);
    in[first + 4 * q] = v.x;
    in[first + 4 * q + 1] = v.y;
    in[first + 4 * q + 2] = v.z;
    in[first + 4 * q + 3] = v.w;
  }
  if constexpr ((n - first) % 4 != 0) {
    static_assert((n - first) % 4 == 2, "odd K: a pair is left");
    const float2 v = *reinterpret_cast<const float2*>(row + n - 2);
    in[n - 2] = v.x;
    in[n - 1] = v.y;
  }
}
template <int K, int R, bool kOff2>
__host__ __device__ __forceinline__ void conv_quad_strip(const float* w, const float* src, int pitch,
                                                         float (&acc)[R][4]) {
  float wr[K * K];
  load_filter<K, true>(w, wr);
#pragma unroll
  for (int o = 0; o < R; ++o)
#pragma unroll
    for (int u = 0; u < 4; ++u) acc[o][u] = 0.f;
#pragma unroll
  for (int ii = 0; ii < R + K - 1; ++ii) {
    float in[K + 3];
    load_quad_strip_row<K, kOff2>(src + ii * pitch, in);
#pragma unroll
    for (int o = 0; o < R; ++o) {
      const int i = ii - o;
      if (i >= 0 && i < K) {
#pragma unroll
        for (int j = 0; j < K; ++j)
#pragma unroll
          for (int u = 0; u < 4; ++u) acc[o][u] = fmaf(wr[i * K + j], in[u + j], acc[o][u]);
      }
    }
  }
}

// f(e) for the jobs e < jobs of this thread: e = threadIdx.x, then strided by blockDim.x.
// kOnePass: the caller guarantees jobs <= blockDim.x (a fixed tile, at most one job per thread),
// so there is no loop for the compiler to keep.
// kFirst (with kOnePass): the jobs go to threads kFirst .. kFirst + jobs - 1, so that two phases
// without a barrier between them can run on disjoint threads.
template <bool kOnePass = false, int kFirst = 0, typename F>
__device__ __forceinline__ void for_thread_jobs(int jobs, F&& f) {
  static_assert(kOnePass || kFirst == 0, "a thread offset needs one job per thread");
  if constexpr (kOnePass) {
    const int e = int(threadIdx.x) - kFirst;
    if (uint32_t(e) < uint32_t(jobs)) f(e);
  } else {
    for (int e = threadIdx.x; e < jobs; e += blockDim.x) f(e);
  }
}

// The launcher's divisor d, or with kFixed a TileDivmod by n, which the kernels' fixed-tile
// instances compute from compile-time extents (constant operands, no parameter loads).
template <bool kFixed, typename D>
__device__ __forceinline__ decltype(auto) fixed_or(const D& d, int n) {
  if constexpr (kFixed) return TileDivmod(uint32_t(n));
  else return (d);
}

// Decomposition of a strip job index: column fastest (conflict-free loads), then strip, then
// subband/plane slot. The divisors are precomputed (FastDivmod): a hardware-less integer divide
// costs ~20 instructions, and these kernels are issue-bound.
struct StripJob {
  int col, row0, slot;
};
template <typename Div>
__device__ __forceinline__ StripJob strip_job(int e, const Div& cols, const Div& strips,
                                              int rows_per_strip) {
  StripJob j;
  uint32_t q, col, slot, strip;
  cols.divmod(uint32_t(e), q, col);
  strips.divmod(q, slot, strip);
  j.col = int(col);
  j.row0 = int(strip) * rows_per_strip;
  j.slot = int(slot);
  return j;
}

// (plane, row, column) of element e of np planes of rows x cols, with divisors plane = rows*cols
// and row = cols.
struct Pos3 {
  int p, y, x;
};
template <typename Div>
__device__ __forceinline__ Pos3 split3(int e, const Div& plane, const Div& row) {
  uint32_t p, rem, y, x;
  plane.divmod(uint32_t(e), p, rem);
  row.divmod(rem, y, x);
  return Pos3{int(p), int(y), int(x)};
}

// Fills n tile elements: store(e, load(e)) for e = threadIdx.x, threadIdx.x + blockDim.x, ...
// N loads of a thread are issued before any of its stores, so N global loads per thread are in
// flight at once; one load per loop iteration left the staging latency-bound (each iteration
// waited a full global-memory round trip, ~0.45 TB/s achieved).
template <int N, typename Load, typename Store>
__device__ __forceinline__ void stage_tile(int n, Load load, Store store) {
  using V = decltype(load(0));
  for (int e0 = threadIdx.x; e0 < n; e0 += N * blockDim.x) {
    V v[N];
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const int e = e0 + u * blockDim.x;
      if (e < n) v[u] = load(e);
    }
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const int e = e0 + u * blockDim.x;
      if (e < n) store(e, v[u]);
    }
  }
}

// The region of a base kernel's pixel tile (px_rows x px_cols, origin 2 r pixels before the
// tile's first coefficient in both axes) that its generic staging would load per item: the whole
// tile, or, when the tile holds its whole plane (one tile per plane: the small planes, 7 x 7 or
// 14 x 14), the plane's pixels alone. The kernels stage generically only the latter (their kPlane
// instances); tiles of larger planes take the quad staging (load_quad_rows) at any width. They sit at tile row and column off = 2 r (the item's origin is then
// -2 r), and everything else the tile holds is zero for every item: the kernel (its kPlane
// instance) writes those zeros, and the Haar blocks of zeros, once before its item loop (nothing
// else writes them) and forms the Haar blocks the plane touches (from block r on) per item. The
// whole tile cost more than 40% of the kernels' instructions at 7 x 7 planes, on halo slots and
// their index math (docs/wtconv.md, perf note 48).
struct StagedRegion {
  bool plane;        // the plane's pixels alone (the kernels' kPlane instances)
  int off;           // first staged pixel row and column of the tile (0 or 2 r); Haar blocks from off / 2
  int rows, cols;    // staged pixels
  int brows, bcols;  // Haar blocks from them (every block the staged pixels touch)
};
inline StagedRegion staged_region(bool whole_plane, int64_t H, int64_t W, int r, int px_rows, int px_cols) {
  if (!whole_plane) return {false, 0, px_rows, px_cols, px_rows / 2, px_cols / 2};
  const int rows = int(H < px_rows - 2 * r ? H : px_rows - 2 * r);
  const int cols = int(W < px_cols - 2 * r ? W : px_cols - 2 * r);
  return {true, 2 * r, rows, cols, (rows + 1) / 2, (cols + 1) / 2};
}
// The divisors of a StagedRegion: staged pixels per plane and per row, Haar blocks likewise.
template <typename Div>
inline void staged_region_divisors(const StagedRegion& sr, Div& pixel_plane, Div& pixel_row, Div& block_plane,
                                   Div& block_row) {
  pixel_plane = Div(uint32_t(sr.rows * sr.cols));
  pixel_row = Div(uint32_t(sr.cols));
  block_plane = Div(uint32_t(sr.brows * sr.bcols));
  block_row = Div(uint32_t(sr.bcols));
}
// n floats of shared memory set to zero by the block (16-byte stores where p and n allow).
__device__ __forceinline__ void zero_floats(float* p, int n) {
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0 && n % 4 == 0) {
    for (int i = threadIdx.x; i < n / 4; i += blockDim.x) reinterpret_cast<float4*>(p)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  } else {
    for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = 0.f;
  }
}

// Four (two) floats into shared memory at p, 16-byte (8-byte) aligned, as one vector store. Written
// in PTX because in the runtime-k base kernels the compiler split the C++ float4 and float2 stores
// of their staging into scalar stores (none of their staging stores was a vector, against 4-8
// 16-byte stores in each k = 3, 5, 7 instance): a warp's quads sit 4 floats apart, so every
// scalar store met a 4-way bank conflict (docs/wtconv.md, perf note 99).
__device__ __forceinline__ void store_shared4(float* p, float a, float b, float c, float d) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(uint32_t(__cvta_generic_to_shared(p))), "f"(a),
               "f"(b), "f"(c), "f"(d)
               : "memory");
}
__device__ __forceinline__ void store_shared4(float* p, float4 v) { store_shared4(p, v.x, v.y, v.z, v.w); }
__device__ __forceinline__ void store_shared2(float* p, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(uint32_t(__cvta_generic_to_shared(p))), "f"(a), "f"(b)
               : "memory");
}
// kPtx: store_shared4 / store_shared2; else C++ vector stores, which the compiler keeps whole in
// the k = 3, 5, 7 instances (their machine code as measured: with the PTX stores their training
// steps ran 0.3-0.6% slower, note 99).
template <bool kPtx>
__device__ __forceinline__ void store_tile4(float* p, float4 v) {
  if constexpr (kPtx) store_shared4(p, v);
  else *reinterpret_cast<float4*>(p) = v;
}
template <bool kPtx>
__device__ __forceinline__ void store_tile2(float* p, float a, float b) {
  if constexpr (kPtx) store_shared2(p, a, b);
  else *reinterpret_cast<float2*>(p) = make_float2(a, b);
}

// Four consecutive activations as floats, one 16-byte (fp32) or 8-byte (fp16/bf16) load.
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
// Four 16-bit values (their raw 8 bytes) as floats.
template <typename H>
__device__ __forceinline__ float4 raw4_to_float4(uint2 raw) {
  H h[4];
  memcpy(h, &raw, sizeof raw);
  return make_float4(to_float(h[0]), to_float(h[1]), to_float(h[2]), to_float(h[3]));
}
template <typename H>
__device__ __forceinline__ float4 load4(const H* p) {
  return raw4_to_float4<H>(*reinterpret_cast<const uint2*>(p));
}

// Quad staging with the Haar analysis on the fly: a 2-row x 4-column block of an activation plane
// (columns x .. x + 3, x a multiple of 4) is two 2x2 Haar blocks, loaded by one thread and stored
// with its two Haar blocks in one pass (store_quad_rows). A block costs one index decomposition
// for eight pixels, where the generic staging decomposed every pixel and then every Haar block
// again in a second pass (docs/wtconv.md, perf note 66). The rows load V elements at a time
// (quad_load_width):
//   V = 4: W % 4 == 0 and a 4-element-aligned base; each row is one aligned load, wholly inside or
//          outside the row;
//   V = 2: W even and a 2-element-aligned base; two aligned loads per row, each pair inside or past
//          the row (an even width that is not a multiple of 4 took the element loads before,
//          perf note 109);
//   V = 1: any W; four element loads per row, each column tested against W.
// A quad's two rows as loaded: fp32 as floats; 16-bit rows of vector or pair loads as their raw 8
// bytes, half the registers, converted when stored (store_quad_rows), so that a thread keeps twice
// as many quads in flight for the same registers. Element loads (V = 1) are converted as loaded:
// packing 16-bit elements into raw rows only to unpack them when stored adds instructions and
// saves no load (docs/wtconv.md, perf note 69).
template <typename T>
struct QuadRows {
  uint2 r0, r1;
};
template <>
struct QuadRows<float> {
  float4 r0, r1;
};
// One row of a quad as loaded: V > 1 as the row's raw bytes (floats for fp32, raw 8 bytes for
// 16-bit types); V = 1 as its four elements, converted once the loads are out (quad_row_floats).
template <typename T>
struct ElemRow {
  T e[4];
};
template <typename T, int V>
using QuadRow = std::conditional_t<(V > 1), decltype(QuadRows<T>::r0), ElemRow<T>>;
template <typename T, int V>
using LoadedQuad = std::conditional_t<(V > 1), QuadRows<T>, QuadRows<float>>;
// The widest load a plane's quad rows allow (V above): 4, 2 or 1.
template <typename T>
WTCONV_HOST_DEVICE inline int quad_load_width(const T* plane_base, int64_t W) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(plane_base);
  if (W % 4 == 0 && at % (4 * sizeof(T)) == 0) return 4;
  if (W % 2 == 0 && at % (2 * sizeof(T)) == 0) return 2;
  return 1;
}
// Calls f(std::integral_constant<int, V>{}) for V = v (4, 2 or 1): the load path as a template
// parameter, chosen once per item by the caller; a run-time choice inside the staging loop would
// keep every load path in it.
// Host and device: the launchers pick a kernel instance the same way.
template <typename F>
WTCONV_HOST_DEVICE inline void with_quad_load_width(int v, F&& f) {
  if (v == 4) f(std::integral_constant<int, 4>{});
  else if (v == 2) f(std::integral_constant<int, 2>{});
  else f(std::integral_constant<int, 1>{});
}
// Columns x .. x + 3 (x a multiple of 4) of the row at src (which points at column x) of a W-wide
// plane, V elements a load; zeros where !in and past column W - 1.
template <int V, typename T>
__device__ __forceinline__ QuadRow<T, V> load_quad_row(const T* src, int x, int W, bool in) {
  static_assert(V == 4 || V == 2 || V == 1, "rows load 4, 2 or 1 elements at a time");
  QuadRow<T, V> row;
  if constexpr (V == 4) {
    static_assert(sizeof(row) == 4 * sizeof(T), "a row of the block is four elements");
    row = QuadRow<T, V>{};  // zero bits: +0 in every type
    if (in) row = *reinterpret_cast<const QuadRow<T, V>*>(src);
  } else if constexpr (V == 2) {
    using Pair = std::conditional_t<std::is_same<T, float>::value, float2, uint32_t>;
    static_assert(sizeof(Pair) == 2 * sizeof(T) && sizeof(row) == 2 * sizeof(Pair), "a row is two pairs");
    Pair p[2] = {Pair{}, Pair{}};  // zero bits: +0 in every type
    if (in) p[0] = *reinterpret_cast<const Pair*>(src);
    if (in && x + 2 < W) p[1] = *reinterpret_cast<const Pair*>(src + 2);
    memcpy(&row, p, sizeof row);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      row.e[i] = T(0.f);
      if (in && x + i < W) row.e[i] = src[i];
    }
  }
  return row;
}
// A row as floats: raw 16-bit rows and element rows converted, float rows (fp32, or element rows
// converted already) as they are.
template <typename T, typename Row>
__device__ __forceinline__ float4 quad_row_floats(Row row) {
  if constexpr (std::is_same<Row, float4>::value) return row;
  else if constexpr (std::is_same<Row, ElemRow<T>>::value)
    return make_float4(to_float(row.e[0]), to_float(row.e[1]), to_float(row.e[2]), to_float(row.e[3]));
  else return raw4_to_float4<T>(row);
}
// The block's two rows (y, y + 1; zeros outside the plane and past the batch: !in_plane). Element
// rows are converted after both rows' loads are issued: a conversion next to its load makes the
// thread wait for that load before it issues the next one.
template <int V, typename T>
__device__ __forceinline__ LoadedQuad<T, V> load_quad_rows(const T* plane, int H, int W, int y, int x,
                                                           bool in_plane) {
  const bool inside = in_plane && x >= 0 && x < W;  // x % 4 == 0: a block left of column 0 lies wholly outside
  const T* src = plane + int64_t(y) * W + x;
  const bool in0 = y >= 0 && y < H, in1 = y + 1 >= 0 && y + 1 < H;
  const QuadRow<T, V> r0 = load_quad_row<V>(src, x, W, inside && in0);
  const QuadRow<T, V> r1 = load_quad_row<V>(src + W, x, W, inside && in1);
  if constexpr (V > 1) return QuadRows<T>{r0, r1};
  else return QuadRows<float>{quad_row_floats<T>(r0), quad_row_floats<T>(r1)};
}
// Stores the block at tile columns col0..col0+3 (col0 and ncols even; columns outside [0, ncols)
// dropped) of tile rows row, row + 1 (pitch `pitch`), and its two Haar blocks at subband row row / 2,
// columns col0 / 2 + {0, 1}, into the four subband planes of `sub` (plane stride `sub_plane`,
// pitch `sub_pitch` = ncols / 2). kPtx: the vector stores written in PTX (store_tile4; the
// runtime-k instances).
template <bool kPtx, typename T>
__device__ __forceinline__ void store_quad_rows(const QuadRows<T>& q, float* tile, int pitch, int row, int col0,
                                                int ncols, float* sub, int sub_plane, int sub_pitch) {
  const float4 r0 = quad_row_floats<T>(q.r0), r1 = quad_row_floats<T>(q.r1);
  const float a[4] = {r0.x, r0.y, r0.z, r0.w}, b[4] = {r1.x, r1.y, r1.z, r1.w};
  // A warp's quads sit 4 floats apart: scalar stores meet 4-way bank conflicts (2-way in the
  // subbands), so whole aligned quads go out as one 16-byte store per row and one 8-byte store
  // per subband.
  const bool inside = col0 >= 0 && col0 + 4 <= ncols;
  // t0 and d0 are dereferenced only for a quad inside the tile. Forming them first, and testing
  // their alignment, keeps the machine code that was measured: forming them only inside cost
  // the base kernels 2-4% (docs/wtconv.md, note 18).
  float* t0 = tile + row * pitch + col0;
  const uintptr_t t0_phase = reinterpret_cast<uintptr_t>(t0) | (uintptr_t(pitch) * sizeof(float));
  if (inside && (t0_phase & 15) == 0) {
    store_tile4<kPtx>(t0, r0);
    store_tile4<kPtx>(t0 + pitch, r1);
  } else if ((t0_phase & 7) == 0) {
    // 8-byte column pairs, each inside the tile or outside it (col0 and ncols even): the quads of
    // tiles 2 floats off the 16-byte grid (odd r, k = 3 and 7: the tile starts 2 pixels before a
    // multiple of 4), and the edge quads of the others. Half the instructions and wavefronts of
    // scalar stores, and the same path for a warp's inside and edge quads (docs/wtconv.md, perf
    // note 109).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = col0 + 2 * h;
      if (col >= 0 && col < ncols) {
        store_tile2<kPtx>(t0 + 2 * h, a[2 * h], a[2 * h + 1]);
        store_tile2<kPtx>(t0 + pitch + 2 * h, b[2 * h], b[2 * h + 1]);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = col0 + i;
      if (col >= 0 && col < ncols) {
        tile[row * pitch + col] = a[i];
        tile[(row + 1) * pitch + col] = b[i];
      }
    }
  }
  float z[2][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) haar4(a[2 * h], a[2 * h + 1], b[2 * h], b[2 * h + 1], z[h]);
  float* d0 = sub + (row >> 1) * sub_pitch + (col0 >> 1);
  if (inside && ((reinterpret_cast<uintptr_t>(d0) | (uintptr_t(sub_plane) * sizeof(float))) & 7) == 0) {
#pragma unroll
    for (int t = 0; t < 4; ++t) store_tile2<kPtx>(d0 + t * sub_plane, z[0][t], z[1][t]);
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = col0 + 2 * h;
      if (col >= 0 && col < ncols) {
        float* dst = sub + (row >> 1) * sub_pitch + (col >> 1);
#pragma unroll
        for (int t = 0; t < 4; ++t) dst[t * sub_plane] = z[h][t];
      }
    }
  }
}

// Two consecutive activations as floats: one 8-byte (fp32) or 4-byte (fp16/bf16) load.
__device__ __forceinline__ float2 load2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 load2(const __half* p) { return __half22float2(*reinterpret_cast<const __half2*>(p)); }
__device__ __forceinline__ float2 load2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}

// Two consecutive outputs as one 8-byte (fp32) or 4-byte (fp16/bf16) store at p (2-element aligned),
// each rounded as from_float rounds it.
__device__ __forceinline__ void store2(float* p, float a, float b) { *reinterpret_cast<float2*>(p) = make_float2(a, b); }
__device__ __forceinline__ void store2(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

// Four outputs at p as one store (p 4-element aligned): 16 bytes of float, or two packed 16-bit
// pairs as 8 bytes.
__device__ __forceinline__ void store4(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
template <typename T, typename T2>
__device__ __forceinline__ void store4_pairs(T* p, T2 lo, T2 hi) {
  static_assert(sizeof(T2) == 4, "a packed pair of 16-bit values");
  uint2 u;
  u.x = *reinterpret_cast<const uint32_t*>(&lo);
  u.y = *reinterpret_cast<const uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(p) = u;
}
__device__ __forceinline__ void store4(__half* p, const float (&v)[4]) {
  store4_pairs(p, __floats2half2_rn(v[0], v[1]), __floats2half2_rn(v[2], v[3]));
}
__device__ __forceinline__ void store4(__nv_bfloat16* p, const float (&v)[4]) {
  store4_pairs(p, __floats2bfloat162_rn(v[0], v[1]), __floats2bfloat162_rn(v[2], v[3]));
}
// Two rows of four outputs of a 4 x 4 strip's epilogue (out[h] at row0 + h * pitch; the second
// only when `second`, the first ncols columns only): one store per row when all four columns are
// in and `quads` (row length a multiple of 4, 4-element aligned base), else two pair stores when
// `pairs` (even row length, pair-aligned base), else element stores.
template <typename T>
__device__ __forceinline__ void store_rows_2x4(T* row0, int64_t pitch, const float (&out)[2][4], bool second,
                                               int ncols, bool pairs, bool quads) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (h == 1 && !second) break;
    T* row = row0 + h * pitch;
    if (ncols == 4 && quads) {
      store4(row, out[h]);
    } else if (ncols == 4 && pairs) {
      store2(row, out[h][0], out[h][1]);
      store2(row + 2, out[h][2], out[h][3]);
    } else {
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (u < ncols) row[u] = from_float<T>(out[h][u]);
    }
  }
}

// TMA staging of the base kernels, the Haar pass: the level-1 subbands (qh x qw per plane) of the
// pixel tile that the copy engine left in `buf` (np x xh rows, `pitch` elements apart, the tile's
// column 0 at column `off`, even: the box starts 16-byte aligned), one 2 x 4 pixel quad (two 2x2
// blocks) per job. With `copy` the tile is also written out as floats (xs, rows xw floats apart)
// for the convolutions; without (fp32, off = 0) they read the buffer itself.
template <typename T>
__device__ __forceinline__ void haar_pass_from_tile(const T* buf, int pitch, int off, bool copy, float* xs, int xh,
                                                    int xw, float* ys, int qh, int qw, int np,
                                                    const TileDivmod& hplane, const TileDivmod& hrow) {
  const int nq = qw / 2;
  for (int e = threadIdx.x; e < np * qh * nq; e += blockDim.x) {
    const Pos3 q = split3(e, hplane, hrow);
    const T* src = buf + (q.p * xh + 2 * q.y) * pitch + off + 4 * q.x;
    float4 u, v;
    if (sizeof(T) == 4 && !copy) {
      u = load4(src);
      v = load4(src + pitch);
    } else {
      const float2 u0 = load2(src), u1 = load2(src + 2), v0 = load2(src + pitch), v1 = load2(src + pitch + 2);
      u = make_float4(u0.x, u0.y, u1.x, u1.y);
      v = make_float4(v0.x, v0.y, v1.x, v1.y);
    }
    if (copy) {
      float* dst = xs + (q.p * xh + 2 * q.y) * xw + 4 * q.x;
      *reinterpret_cast<float4*>(dst) = u;
      *reinterpret_cast<float4*>(dst + xw) = v;
    }
    float z0[4], z1[4];
    haar4(u.x, u.y, v.x, v.y, z0);
    haar4(u.z, u.w, v.z, v.w, z1);
    float* dst = ys + q.p * 4 * qh * qw + q.y * qw + 2 * q.x;  // 8-byte aligned: qw, qh * qw even
#pragma unroll
    for (int t = 0; t < 4; ++t) *reinterpret_cast<float2*>(dst + t * qh * qw) = make_float2(z0[t], z1[t]);
  }
}

// The level-2 fused Haar pass (forward and backward base kernels): per 4 x 4 pixel block of the box
// (np x xh rows, `pitch` elements apart, the tile's column 0 at `off`), its four 2x2 blocks' Y_1
// and the Haar analysis of their four LL values, Y_2 (np x 4 x eh2 x ew2; X_1 = LL(x) with the
// cascade's formula, which haar4's LL is, rounded through Tll, the type the cascade would store
// X_1 in). Y_1 (np x 4 x qh x qw) covers the blocks from block (b0, b0) on; with kInner the blocks
// outside it are skipped (the fused kernels keep Y_1 over the inner region only), without it Y_1
// covers every block (b0 = 0). With `copy` the pixels also go to the float tile (rows xw apart):
// every block's (np x xh rows), or with kInner the inner blocks' (np x 2 qh rows).
// kOnePass: at most one block per thread (for_thread_jobs; a fixed tile).
template <typename T, bool kInner = false, typename Tll = float, bool kOnePass = false>
__device__ __forceinline__ void haar2_pass_from_tile(const T* buf, int pitch, int off, bool copy, float* xs, int xh,
                                                     int xw, float* ys, int qh, int qw, int b0, float* y2s, int eh2,
                                                     int ew2, int np, const TileDivmod& plane,
                                                     const TileDivmod& row) {
  for_thread_jobs<kOnePass>(np * eh2 * ew2, [&](int e) {
    const Pos3 q = split3(e, plane, row);
    const T* src = buf + (q.p * xh + 4 * q.y) * pitch + off + 4 * q.x;
    const int by = q.y - b0, bx = q.x - b0;
    const bool inner = !kInner || (unsigned(by) < unsigned(qh / 2) && unsigned(bx) < unsigned(qw / 2));
    float4 px[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (sizeof(T) == 4 && (off & 3) == 0) {  // 16-byte aligned (pitch % 4 == 0): one load per row
        px[i] = load4(src + i * pitch);
      } else {
        const float2 u0 = load2(src + i * pitch), u1 = load2(src + i * pitch + 2);
        px[i] = make_float4(u0.x, u0.y, u1.x, u1.y);
      }
      if constexpr (kInner) {
        if (copy && inner) *reinterpret_cast<float4*>(xs + (q.p * 2 * qh + 4 * by + i) * xw + 4 * bx) = px[i];
      } else {
        if (copy) *reinterpret_cast<float4*>(xs + (q.p * xh + 4 * q.y + i) * xw + 4 * q.x) = px[i];
      }
    }
    float z[2][2][4];  // [block row][block column][subband]
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      haar4(px[2 * i].x, px[2 * i].y, px[2 * i + 1].x, px[2 * i + 1].y, z[i][0]);
      haar4(px[2 * i].z, px[2 * i].w, px[2 * i + 1].z, px[2 * i + 1].w, z[i][1]);
    }
    if (inner) {
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int i = 0; i < 2; ++i)  // 8-byte aligned: qw, qh * qw even
          *reinterpret_cast<float2*>(ys + (q.p * 4 + t) * qh * qw + (2 * by + i) * qw + 2 * bx) =
              make_float2(z[i][0][t], z[i][1][t]);
    }
    const auto ll = [](float v) { return to_float(from_float<Tll>(v)); };
    float y2[4];
    haar4(ll(z[0][0][0]), ll(z[0][1][0]), ll(z[1][0][0]), ll(z[1][1][0]), y2);
#pragma unroll
    for (int t = 0; t < 4; ++t) y2s[(q.p * 4 + t) * eh2 * ew2 + q.y * ew2 + q.x] = y2[t];
  });
}

struct TileGeom {
  int th, tw, np, tiles_y, tiles_x;
  int64_t items;
  int splits;
  bool items32;                       // items < 2^32: the item decode runs in 32 bits
  FastDivmod per_group, tiles_x_div;  // tiles_y * tiles_x, tiles_x
};

struct ItemPos {
  int b0, y0, x0;  // first plane (b) of the item, tile origin in the tile's grid
};

__host__ __device__ __forceinline__ ItemPos decode_item(const TileGeom& g, int64_t item) {
  int bg, ty, tx;
  if (g.items32) {
    uint32_t q, rem, y, x;
    g.per_group.divmod(uint32_t(item), q, rem);
    g.tiles_x_div.divmod(rem, y, x);
    bg = int(q); ty = int(y); tx = int(x);
  } else {
    const int64_t per_group = int64_t(g.tiles_y) * g.tiles_x;
    bg = int(item / per_group);
    const int rem = int(item % per_group);
    ty = rem / g.tiles_x;
    tx = rem % g.tiles_x;
  }
  ItemPos p;
  p.b0 = bg * g.np;
  p.y0 = ty * g.th;
  p.x0 = tx * g.tw;
  return p;
}

// The position of item + step from that of item, without the decode's two divisions: the block's
// items go in a fixed step (block_items), so the step is decoded once (d) and added axis by axis
// with one carry each (every component of d, and of a position, is below its axis' extent, so a
// sum is below twice it). The base kernels' items are short enough on big planes that the decode,
// which every warp ran at each item, was ~3% of the forward's instructions.
struct ItemStep {
  ItemPos d;
  int xspan, yspan;  // tiles_x * tw, tiles_y * th
};
__host__ __device__ __forceinline__ ItemStep item_step(const TileGeom& g, int64_t step) {
  return {decode_item(g, step), g.tiles_x * g.tw, g.tiles_y * g.th};
}
__host__ __device__ __forceinline__ ItemPos next_item(ItemPos p, const ItemStep& s, const TileGeom& g) {
  p.x0 += s.d.x0;
  if (p.x0 >= s.xspan) {
    p.x0 -= s.xspan;
    p.y0 += g.th;
  }
  p.y0 += s.d.y0;
  if (p.y0 >= s.yspan) {
    p.y0 -= s.yspan;
    p.b0 += g.np;
  }
  p.b0 += s.d.b0;
  return p;
}

// Index divisors of a level kernel's tile (set on the host by level_divisors): halo plane
// (eh*ew) and row (ew), coefficient tile (th*tw) and row (tw), strips per subband column.
struct LevelDivisors {
  TileDivmod plane, row, cell, col, strips;
  TileDivmod plane2, row2;  // block pairs: eh * (ew / 2) and ew / 2 (even ew; else unused)
  TileDivmod iplane, irow;  // kPlane instances: the grid's coefficients, at most the interior (staged_block)
};

// Index divisors of a base kernel's quad staging (set on the host by quad_divisors): jobs per
// plane (tile rows x quads per row) and quads per row.
template <typename Div>
struct QuadDivisors {
  Div plane, row;
};

// Staging element e of a level kernel (np planes of eh x ew level-l coefficients, the tile origin
// minus the halo r): the 2x2 block of the level l-1 grid (hin x win) it is the Haar analysis of.
// in = false outside the level-l grid (hq x wq): zero padding.
struct LevelBlock {
  int64_t off;  // plane offset (b * C + c) * hin * win
  int y, x;     // top-left element of the block
  bool in;
};
// The block of level-l coefficient (qy, qx) of plane b; in: b and (qy, qx) inside the grid.
__device__ __forceinline__ LevelBlock make_level_block(int b, int qy, int qx, bool in, int C, int c, int hin,
                                                       int win) {
  LevelBlock blk;
  blk.in = in;
  blk.off = (int64_t(b) * C + c) * hin * win;
  blk.y = 2 * qy;
  blk.x = 2 * qx;
  return blk;
}
__device__ __forceinline__ LevelBlock level_block(int e, const ItemPos& pos, int r, const LevelDivisors& d, int B,
                                                  int C, int c, int hq, int wq, int hin, int win) {
  const Pos3 q = split3(e, d.plane, d.row);
  const int qy = pos.y0 - r + q.y, qx = pos.x0 - r + q.x, b = pos.b0 + q.p;
  return make_level_block(b, qy, qx, b < B && qy >= 0 && qx >= 0 && qy < hq && qx < wq, C, c, hin, win);
}
// Staging element e of a level kernel: its block (level_block), or in the kPlane instance, whose
// tile holds the whole level grid (one tile per plane), that of the grid's coefficient e (hq x wq,
// staged alone: the zeros around them are written once per block, as the base kernels'
// StagedRegion; docs/wtconv.md, perf note 48).
template <bool kPlane>
__device__ __forceinline__ LevelBlock staged_block(int e, const ItemPos& pos, int r, const LevelDivisors& d, int B,
                                                   int C, int c, int hq, int wq, int hin, int win) {
  if constexpr (!kPlane) {
    return level_block(e, pos, r, d, B, C, c, hq, wq, hin, win);
  } else {
    const Pos3 q = split3(e, d.iplane, d.irow);
    const int b = pos.b0 + q.p;
    return make_level_block(b, q.y, q.x, b < B, C, c, hin, win);
  }
}
// Its plane p and tile position `at` (rows of ew; kPlane: the coefficient's, r in from the edge).
template <bool kPlane>
__device__ __forceinline__ void staged_slot(int e, const LevelDivisors& d, int r, int ew, uint32_t& p, uint32_t& at) {
  if constexpr (kPlane) {
    const Pos3 q = split3(e, d.iplane, d.irow);
    p = uint32_t(q.p);
    at = uint32_t((r + q.y) * ew + r + q.x);
  } else {
    d.plane.divmod(uint32_t(e), p, at);
  }
}
// Runs a level kernel's block staging as stage(std::integral_constant<int, V>{}) with V the load
// width of x's rows (a.quad_vec: 4, 2 or 1; with_quad_load_width) where it reads x directly, else
// with V = 1 (the chains are read as 2 x 2 blocks: load_block).
template <bool kDirect, typename A, typename Stage>
__device__ __forceinline__ void stage_level_blocks(const A& a, const Stage& stage) {
  if constexpr (kDirect) with_quad_load_width(a.quad_vec, stage);
  else stage(std::integral_constant<int, 1>{});
}
// One item's staging in a level kernel (the block staging; kPairs instances stage pairs): tile
// element e's block of the grid the kernel reads (staged_block; x's H x W for the direct kernels,
// else the level's hin x win), loaded by load(block, hin, win) and stored by store(e, v), two
// loads in flight per thread (stage_tile).
template <bool kPlane, bool kDirect, typename A, typename Load, typename Store>
__device__ __forceinline__ void stage_level_tile(const A& a, const ItemPos& pos, int r, int np, int plane, int c,
                                                 Load load, Store store) {
  const int hin = kDirect ? a.H : a.hin, win = kDirect ? a.W : a.win;
  stage_tile<2>(
      kPlane ? np * int(a.d.iplane.divisor) : np * plane,
      [&](int e) { return load(staged_block<kPlane>(e, pos, r, a.d, a.B, a.C, c, a.hq, a.wq, hin, win), hin, win); },
      store);
}
// Staging element e of the block-pair staging (load_block_pair_ll; np planes of eh x ew / 2
// pairs): the left block's level-2 position (qy, qx even) and x's plane offset (H x W planes);
// in = false when the pair is outside the level-2 grid (hq, wq even there: both or neither).
struct PairPos {
  int64_t off;
  int qy, qx;
  bool in;
};
__device__ __forceinline__ PairPos level_pair(int e, const ItemPos& pos, int r, const LevelDivisors& d, int B, int C,
                                              int c, int hq, int wq, int H, int W) {
  const Pos3 q = split3(e, d.plane2, d.row2);
  const int b = pos.b0 + q.p;
  PairPos v;
  v.qy = pos.y0 - r + q.y;
  v.qx = pos.x0 - r + 2 * q.x;
  v.in = b < B && v.qy >= 0 && v.qx >= 0 && v.qy < hq && v.qx < wq;
  v.off = (int64_t(b) * C + c) * H * W;
  return v;
}
// The 2 x 2 pixel block whose top-left pixel is at s (rows `win` elements apart) as floats: a, b
// (top row), c, d; zeros right of the plane (right false) and below it (down false).
template <typename T>
__device__ __forceinline__ float4 load_block_2x2(const T* s, int win, bool right, bool down) {
  float4 v;
  v.x = to_float(s[0]);
  v.y = right ? to_float(s[1]) : 0.f;
  v.z = down ? to_float(s[win]) : 0.f;
  v.w = right && down ? to_float(s[win + 1]) : 0.f;
  return v;
}
// The block as floats (x, y: top row; z, w: bottom row); elements past the last row or column of
// an odd-sized grid read as 0.
template <typename T>
__device__ __forceinline__ float4 load_block(const T* grid, const LevelBlock& blk, int hin, int win) {
  if (!blk.in) return make_float4(0.f, 0.f, 0.f, 0.f);
  return load_block_2x2(grid + blk.off + blk.y * win + blk.x, win, blk.x + 1 < win, blk.y + 1 < hin);
}
// The same block of X_1 = LL(x) read from the activation plane instead of a stored chain (plan:
// level2_reads_activations): blk from level_block with the plane size H x W of x, so blk.off is
// x's plane offset and blk.y, blk.x the X_1 position. Each value is formed in float from its 2x2
// pixels (zero outside x) with the cascade's formula and order, so it equals a float chain bit for
// bit (the forward's chains are float, and the backward's level 2 reads x and dy so as not to
// round X_1 to 16 bits). The four pixel rows (columns 2 blk.x .. + 3) load as the quad staging's
// rows do (load_quad_row<V>, V = quad_load_width of x: 4-, 2- or 1-element loads; perf note 109).
// The pixels are loaded as they lie in memory (16-bit types as raw bits) and converted to float
// after the last load, and V is a template parameter so that the caller's staging loop has one
// load path: converted inside a run-time branch, every row waited for its own load before the
// next was issued, and the 16-bit level kernels ran 1.2-1.3x the float ones' time on fewer bytes
// (docs/wtconv.md, perf note 67).
template <int V, typename T>
__device__ __forceinline__ float4 load_block_ll(const T* act, const LevelBlock& blk, int H, int W) {
  const int y = 2 * blk.y, x = 2 * blk.x;
  if (!blk.in || y >= H || x >= W) return make_float4(0.f, 0.f, 0.f, 0.f);
  const T* src = act + blk.off + int64_t(y) * W + x;
  QuadRow<T, V> raw[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) raw[i] = load_quad_row<V>(src + int64_t(i) * W, x, W, y + i < H);
  float p[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float4 q = quad_row_floats<T>(raw[i]);
    p[i][0] = q.x; p[i][1] = q.y; p[i][2] = q.z; p[i][3] = q.w;
  }
  return haar_ll_quad(p, 0);
}

// Two horizontally adjacent blocks of X_1 = LL(x) (level-2 coefficients (qy, qx) and (qy, qx + 1)
// of the plane at `off`, qx even), from 16-bit activations with one 16-byte load per pixel row:
// the bytes per load of fp32's 4-pixel loads, at half the load instructions, so twice the bytes
// in flight per staging load (docs/wtconv.md, perf note 28). The caller guarantees W % 8 == 0 and
// a 16-byte aligned plane, so the 8 pixels of a row are all inside the row or all outside
// (in: both blocks inside the level-2 grid). Each value has load_block_ll's formula, in float.
struct BlockPair {
  float4 a, b;
};
template <typename T>
__device__ __forceinline__ BlockPair load_block_pair_ll(const T* act, int64_t off, int qy, int qx, bool in, int H,
                                                       int W) {
  static_assert(sizeof(T) == 2, "16-bit activations");
  BlockPair v;
  v.a = make_float4(0.f, 0.f, 0.f, 0.f);
  v.b = v.a;
  const int y = 4 * qy, x = 4 * qx;
  if (!in || y >= H || x >= W) return v;
  float p[4][8];
  const T* src = act + off + int64_t(y) * W + x;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint4 raw = make_uint4(0u, 0u, 0u, 0u);  // zero bits: +0
    if (y + i < H) raw = *reinterpret_cast<const uint4*>(src + int64_t(i) * W);
    T h[8];
    memcpy(h, &raw, sizeof raw);
#pragma unroll
    for (int j = 0; j < 8; ++j) p[i][j] = to_float(h[j]);
  }
  v.a = haar_ll_quad(p, 0);
  v.b = haar_ll_quad(p, 4);
  return v;
}

// The level-grid value (forward R_l, backward dX_l; hq x wq planes, channel c) at this thread's
// first synthesis coefficient of an item (tile cells: plane x rows x cols, divisors `cell` =
// rows * cols and `col` = cols), or 0 without a grid or outside it. The level kernels load it
// before staging so that its latency overlaps the staging and the convs instead of stalling the
// synthesis.
__device__ __forceinline__ float first_residual(const float* grid, const ItemPos& pos, int cells,
                                                const TileDivmod& cell, const TileDivmod& col, int B, int C,
                                                int c, int hq, int wq) {
  if (grid == nullptr || int(threadIdx.x) >= cells) return 0.f;
  const Pos3 q = split3(threadIdx.x, cell, col);
  const int b = pos.b0 + q.p, qy = pos.y0 + q.y, qx = pos.x0 + q.x;
  if (b >= B || qy >= hq || qx >= wq) return 0.f;
  return grid[(int64_t(b) * C + c) * hq * wq + int64_t(qy) * wq + qx];
}

// The runtime-k level kernels' subband convolutions of one item: dst[(p * 4 + t) * th * tw + y * tw
// + x] = the k x k window of subband tile p * 4 + t of src (np x 4 tiles of eh x ew, eh * ew apart)
// at (y, x) with filter t (4 filters fs floats apart at w, rows wp apart and 16-byte aligned:
// level_filter_stride). Four adjacent coefficients of one subband per job (conv_adjacent_windows),
// where one window per coefficient and subband (conv_window) loaded a weight and an input per
// multiply-add in one dependent chain. Inputs as vectors where ew keeps every row at one phase: they
// read up to 6 floats past a window, so kWindowSlack quiet floats follow the tiles. Each output's
// terms in conv_window's order, bit for bit. `fixup(slot, y, x0, ncols, z)` may change a job's four
// sums before they are stored (the forward base adds R_1 to LL; the level kernels store them as
// they are). kOnly: with_compiled_kernel_size's.
struct NoWindowFixup {
  __device__ __forceinline__ void operator()(int, int, int, int, float (&)[4]) const {}
};
template <int K, int kOnly = 0, typename Fixup = NoWindowFixup>
__device__ __forceinline__ void level_subband_windows(const float* w, int fs, int wp, const float* src, int eh, int ew,
                                                      int th, int tw, int np, int k, float* dst,
                                                      const Fixup& fixup = Fixup()) {
  const int quads = (tw + 3) / 4, per_tile = th * quads, plane = eh * ew;
  const int v = window_vector_width(k, ew, 4);
  for (int e = threadIdx.x; e < np * 4 * per_tile; e += blockDim.x) {
    const int slot = e / per_tile, rem = e % per_tile;  // slot = p * 4 + subband
    const int y = rem / quads, x0 = 4 * (rem % quads), ncols = min(4, tw - x0);
    float z[4];
    with_compiled_k<K, kOnly>(k, [&](const int kw) {  // at a compile-time k where it can be
      conv_adjacent_windows_by<4>(v, w + (slot & 3) * fs, wp, src + slot * plane + y * ew + x0, ew, kw, ncols, z);
    });
    fixup(slot, y, x0, ncols, z);
    float* out = dst + (slot * th + y) * tw + x0;
    if (ncols == 4 && (reinterpret_cast<uintptr_t>(out) & 15) == 0) {  // a warp's jobs 4 floats apart
      store_shared4(out, z[0], z[1], z[2], z[3]);
    } else {
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (u >= ncols) break;
        out[u] = z[u];
      }
    }
  }
}

// The level kernels' subband convolutions of one item (forward: Y_l with the folded filters;
// backward: G_l with the flipped ones) into np x 4 results tiles of th x tw (tiles: np x 4 planes of
// eh x ew, filters fs apart at w): register-blocked column strips at a compile-time k, window
// passes at a runtime k (level_subband_windows), each followed by a barrier. The k = 1 instance
// (!kWindows) runs nothing here: level_synthesis_pass takes its one product per subband.
template <int K, bool kWindows, typename A>
__device__ __forceinline__ void level_subband_results(const A& a, const float* w, int fs, const float* tiles, int eh,
                                                      int ew, int th, int tw, int np, int k, float* results) {
  const int plane = eh * ew;
  if constexpr (K > 0) {
    const int strips = (th + kStripRows - 1) / kStripRows;
    for (int e = threadIdx.x; e < np * 4 * strips * tw; e += blockDim.x) {
      const StripJob j = strip_job(e, a.d.col, a.d.strips, kStripRows);  // slot = p * 4 + subband
      float acc[kStripRows];
      conv_column_strip<K, kStripRows>(w + (j.slot & 3) * (K * K), tiles + j.slot * plane + j.row0 * ew + j.col, ew,
                                       eh - j.row0, acc);
#pragma unroll
      for (int o = 0; o < kStripRows; ++o)
        if (j.row0 + o < th) results[(j.slot * th + j.row0 + o) * tw + j.col] = acc[o];
    }
    __syncthreads();
  } else if constexpr (kWindows) {
    level_subband_windows<K>(w, fs, filter_row_pitch(k), tiles, eh, ew, th, tw, np, k, results);
    __syncthreads();
  }
}

// The level kernels' synthesis pass of one item: per coefficient of the tile, its four subband
// results (level_subband_results; at k = 1 one product each, from the tiles), the residual grid
// `res` added at LL (forward R_l, backward dX_l; hq x wq planes, null at the deepest level;
// res_first is this thread's first value, loaded before the staging: first_residual), and its
// 2 x 2 children written to `out` (hin x win planes) as Tout. kHalve (backward): each child halved,
// the level's factor of 1/2 that the forward folds into its filters (2^-l s_l W_l).
template <bool kWindows, bool kHalve, typename A, typename Tout>
__device__ __forceinline__ void level_synthesis_pass(const A& a, const ItemPos& pos, int c, int np, int th, int tw,
                                                     const float* results, const float* w, int fs,
                                                     const float* tiles, int plane, int ew, const float* res,
                                                     float res_first, Tout* out) {
  for (int e = threadIdx.x; e < np * th * tw; e += blockDim.x) {
    const Pos3 q = split3(e, a.d.cell, a.d.col);
    const int p = q.p, ty = q.y, tx = q.x;
    const int b = pos.b0 + p, qy = pos.y0 + ty, qx = pos.x0 + tx;
    if (b >= a.B || qy >= a.hq || qx >= a.wq) continue;
    float z[4];
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      if constexpr (kWindows) z[s] = results[((p * 4 + s) * th + ty) * tw + tx];
      else z[s] = conv_window<1>(w + s * fs, tiles + (p * 4 + s) * plane + ty * ew + tx, ew, 1);
    }
    const int64_t pl = int64_t(b) * a.C + c;
    if (res) z[0] += e == int(threadIdx.x) ? res_first : res[pl * a.hq * a.wq + int64_t(qy) * a.wq + qx];
    Tout* dst = out + pl * a.hin * a.win;
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
      const int y = 2 * qy + dy;
      if (y >= a.hin) break;
#pragma unroll
      for (int dx = 0; dx < 2; ++dx) {
        const int x = 2 * qx + dx;
        if (x < a.win) dst[y * a.win + x] = from_float<Tout>(kHalve ? 0.5f * synth_child(z, dy, dx) : synth_child(z, dy, dx));
      }
    }
  }
}

// The level-1 subband convolutions of one item in the base kernels (forward: Z_1 from Y_1 plus
// R_1; backward: dY_1 from G_1 plus dX_1). Job e = (column group, strip of R rows, slot = p * 4 +
// subband), NC = 1 or 2 adjacent columns per job (2 needs out_cols even and even-aligned src
// rows; `cols` divides by out_cols / NC): dst[slot][row][col] = conv of src's subband plane with
// the filter of the subband at w + subband * filter_stride(K) (w 16-byte aligned, as every base
// kernel's filters are; + the residual at LL). The
// residual grid (h1 x w1, plane p at res0 + p * res_pstride, origin (oy, ox)) is read before the
// convolution so its latency hides behind the arithmetic; a warp's jobs share one subband
// whenever cols * strips >= 32, so the LL-only branch does not diverge.
// kFull, kOnePass: a fixed tile's phase, every strip full (conv_pair_strip) and at most one job
// per thread (for_thread_jobs). NC = 4 (kFull only): four columns per job (conv_quad_strip), src
// and dst rows 16-byte aligned. kFirst: the jobs' first thread (for_thread_jobs).
template <int K, int R, int NC, bool kFull = false, bool kOnePass = false, int kFirst = 0, typename Tres,
          typename Div>
__device__ __forceinline__ void subband_conv_phase(int jobs, const Div& cols, const Div& strips,
                                                   int out_rows, int out_cols, const float* w, const float* src,
                                                   int src_plane, int src_pitch, int src_rows, float* dst,
                                                   const Tres* res0, int64_t res_pstride, int nb, int oy, int ox,
                                                   int h1, int w1) {
  static_assert(NC == 1 || NC == 2 || (NC == 4 && kFull), "one, two or (full strips) four columns per job");
  for_thread_jobs<kOnePass, kFirst>(jobs, [&](int e) {
    const StripJob j = strip_job(e, cols, strips, R);
    const int col = j.col * NC;
    const int p = j.slot >> 2, t = j.slot & 3, qx = ox + col;
    const bool with_res = t == 0 && res0 != nullptr;
    float res[R][NC];
#pragma unroll
    for (int o = 0; o < R; ++o)
#pragma unroll
      for (int u = 0; u < NC; ++u) res[o][u] = 0.f;
    if (with_res && p < nb) {
      const Tres* rp = res0 + p * res_pstride + qx;
#pragma unroll
      for (int o = 0; o < R; ++o) {
        const int qy = oy + j.row0 + o;
#pragma unroll
        for (int u = 0; u < NC; ++u)
          if (j.row0 + o < out_rows && qy < h1 && qx + u < w1) res[o][u] = to_float(rp[int64_t(qy) * w1 + u]);
      }
    }
    const float* wt = w + t * filter_stride(K);
    const float* sp = src + j.slot * src_plane + j.row0 * src_pitch + col;
    float acc[R][NC];
    if constexpr (NC == 1) {
      float a1[R];
      conv_column_strip<K, R, true>(wt, sp, src_pitch, src_rows - j.row0, a1);
#pragma unroll
      for (int o = 0; o < R; ++o) acc[o][0] = a1[o];
    } else if constexpr (NC == 2) {
      conv_pair_strip<K, R, false, true, kFull>(wt, sp, src_pitch, src_rows - j.row0, acc);
    } else {
      conv_quad_strip<K, R, false>(wt, sp, src_pitch, acc);
    }
#pragma unroll
    for (int o = 0; o < R; ++o) {
      const int iy = j.row0 + o;
      if (iy >= out_rows) break;
#pragma unroll
      for (int u = 0; u < NC; ++u)
        if (with_res) acc[o][u] += res[o][u];
      float* d = dst + (j.slot * out_rows + iy) * out_cols + col;
      if constexpr (NC == 4) {
        *reinterpret_cast<float4*>(d) = make_float4(acc[o][0], acc[o][1], acc[o][2], acc[o][3]);
      } else {
#pragma unroll
        for (int u = 0; u < NC; ++u) d[u] = acc[o][u];
      }
    }
  });
}

// Jobs of a fixed tile's subband phase: four subbands of rows x cols outputs, in 4-row strips of
// nc columns.
__host__ __device__ constexpr int fixed_subband_jobs(int rows, int cols, int nc) {
  return 4 * (rows / 4) * (cols / nc);
}
// A fixed tile's subband phase: subband_conv_phase with the extents (kRows x kCols per subband)
// at compile time, so that its job count and divisors are constants; every strip full, one job
// per thread, the jobs from thread kFirst on (a phase beside it takes the threads before).
template <int K, int NC, int kRows, int kCols, int kFirst, typename Tres>
__device__ __forceinline__ void fixed_subband_conv_phase(const float* w, const float* src, int src_plane, int src_pitch,
                                                         int src_rows, float* dst, const Tres* res0,
                                                         int64_t res_pstride, int nb, int oy, int ox, int h1, int w1) {
  static_assert(kRows % 4 == 0 && kCols % NC == 0, "whole strips");
  constexpr int kJobs = fixed_subband_jobs(kRows, kCols, NC);
  static_assert(kFirst + kJobs <= kBlockThreads, "one job per thread");
  subband_conv_phase<K, 4, NC, true, true, kFirst>(kJobs, TileDivmod(uint32_t(kCols / NC)),
                                                   TileDivmod(uint32_t(kRows / 4)), kRows, kCols, w, src, src_plane,
                                                   src_pitch, src_rows, dst, res0, res_pstride, nb, oy, ox, h1, w1);
}

}  // namespace wtconv_detail
}  // namespace winconv
