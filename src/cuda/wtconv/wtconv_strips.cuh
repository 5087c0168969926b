// Register-blocked column strips: k x k convolutions of R vertically adjacent outputs (one, two or
// four columns) with the filter in registers, and the base kernels' level-1 subband phases built on
// them.
#pragma once

#include <cstdint>

#include "cuda/common/fast_divmod.cuh"
#include "wtconv_items.cuh"
#include "wtconv_layouts.h"
#include "wtconv_values.cuh"

namespace winconv {
namespace wtconv_detail {

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
