// Device helpers shared by the WTConv kernels: activation load/store, the Haar butterfly,
// the kernel-argument structs and the item range of a channel-major block.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

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

// sum_{i,j<k} w[i*k+j] * src[i*pitch+j]; K > 0 unrolls a compile-time size, K == 0 runs any odd k.
template <int K>
__device__ __forceinline__ float conv_window(const float* w, const float* src, int pitch, int k) {
  float acc = 0.f;
  if constexpr (K > 0) {
#pragma unroll
    for (int i = 0; i < K; ++i)
#pragma unroll
      for (int j = 0; j < K; ++j) acc = fmaf(w[i * K + j], src[i * pitch + j], acc);
  } else {
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) acc = fmaf(w[i * k + j], src[i * pitch + j], acc);
  }
  return acc;
}

// acc[j] += sum over a row of n positions of g[x] * y[x + j], j < k: one row of the correlation
// that gives a weight gradient. The k accumulators stay in registers (KMAX-sized, guarded). For a
// compile-time K the k inputs y[x..x+K-1] slide through registers, so each position costs two
// shared loads (y[x+K-1], g[x]) instead of K + 1; the summation order is unchanged.
template <int K>
__device__ __forceinline__ void corr_row(float* acc, const float* y, const float* g, int n, int k) {
  if constexpr (K > 0) {
    if (n <= 0) return;
    float win[K];
#pragma unroll
    for (int j = 0; j < K - 1; ++j) win[j] = y[j];
    for (int x = 0; x < n; ++x) {
      win[K - 1] = y[x + K - 1];
      const float gv = g[x];
#pragma unroll
      for (int j = 0; j < K; ++j) acc[j] = fmaf(win[j], gv, acc[j]);
#pragma unroll
      for (int j = 0; j < K - 1; ++j) win[j] = win[j + 1];
    }
  } else {
    for (int x = 0; x < n; ++x) {
      const float gv = g[x];
#pragma unroll
      for (int j = 0; j < 15; ++j)
        if (j < k) acc[j] = fmaf(y[x + j], gv, acc[j]);
    }
  }
}

// Rows of outputs a thread computes in one column strip of the register-blocked convolution.
constexpr int kStripRows = 4;

// Register-blocked k x k convolution (correlation form, like conv_window) of R vertically adjacent
// outputs: acc[o] = sum_{i,j} w[i*K+j] * src[(o+i)*pitch + j]. The K*K weights sit in registers and
// every input row is read from shared memory once and used by all outputs that need it, i.e.
// K*K + (R+K-1)*K shared loads for R outputs instead of 2*K*K per output. Neighbouring lanes take
// neighbouring columns, so the loads are conflict-free. The per-output summation order (i, then j)
// is that of conv_window, so results are bit-identical to it. Input rows at or past `rows_left`
// are clamped to the last valid row: they only feed outputs the caller discards.
template <int K, int R>
__device__ __forceinline__ void conv_column_strip(const float* w, const float* src, int pitch, int rows_left,
                                                  float (&acc)[R]) {
  float wr[K * K];
#pragma unroll
  for (int i = 0; i < K * K; ++i) wr[i] = w[i];
#pragma unroll
  for (int o = 0; o < R; ++o) acc[o] = 0.f;
#pragma unroll
  for (int ii = 0; ii < R + K - 1; ++ii) {
    const int row = ii < rows_left ? ii : rows_left - 1;
    float in[K];
#pragma unroll
    for (int j = 0; j < K; ++j) in[j] = src[row * pitch + j];
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

// Decomposition of a strip job index: column fastest (conflict-free loads), then strip, then
// subband/plane slot.
struct StripJob {
  int col, row0, slot;
};
__device__ __forceinline__ StripJob strip_job(int e, int cols, int strips) {
  StripJob j;
  j.col = e % cols;
  const int q = e / cols;
  j.row0 = (q % strips) * kStripRows;
  j.slot = q / strips;
  return j;
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

struct TileGeom {
  int th, tw, np, tiles_y, tiles_x;
  int64_t items;
  int splits;
};

struct ItemPos {
  int b0, y0, x0;  // first plane (b) of the item, tile origin in the tile's grid
};

__device__ __forceinline__ ItemPos decode_item(const TileGeom& g, int64_t item) {
  const int64_t per_group = int64_t(g.tiles_y) * g.tiles_x;
  const int bg = int(item / per_group);
  const int rem = int(item % per_group);
  ItemPos p;
  p.b0 = bg * g.np;
  p.y0 = (rem / g.tiles_x) * g.th;
  p.x0 = (rem % g.tiles_x) * g.tw;
  return p;
}

}  // namespace wtconv_detail
}  // namespace winconv
