// Window passes: k x k convolutions of one or several adjacent outputs read from shared memory,
// for any odd k, and the compile-time kernel sizes of the runtime-k instances.
#pragma once

#include <cstdint>
#include <type_traits>

#include "wtconv_layouts.h"

namespace winconv {
namespace wtconv_detail {

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

}  // namespace wtconv_detail
}  // namespace winconv
