// Forward, base conv fused with level 1 and the final synthesis: reads an x tile (with the halo
// both the k x k base conv and the level-1 subband conv need), forms Y_1 on chip, convolves it with
// 0.5 * s_1 * W_1, adds R_1 (levels >= 2, already synthesised on the level-1 grid), adds the
// base conv s0 * (W0 conv x + b) and writes y at the strided output positions only.
// HBM: reads x (+ halo) and R_1, writes y.
#include <type_traits>

#include "cuda/common/tensor_map.h"
#include "cuda/common/tma.cuh"
#include "wtconv_kernels.cuh"
#include "wtconv_haar.cuh"
#include "wtconv_items.cuh"
#include "wtconv_level_tiles.cuh"
#include "wtconv_quad_staging.cuh"
#include "wtconv_staging.cuh"
#include "wtconv_strips.cuh"
#include "wtconv_values.cuh"
#include "wtconv_windows.cuh"
#include "wtconv_fold.h"

namespace winconv {
namespace wtconv_detail {

// Pixel origin, along one axis, of the x tile of an item whose first output there is t0: the first
// interior level-1 coefficient (s t0) / 2 less the conv's halo r and level 2's halo g2, in pixels.
__device__ __forceinline__ int fwd_tile_origin(int t0, int s, int r, int g2) { return 2 * (((s * t0) >> 1) - r - g2); }

// 4 resident blocks (64 registers, no spill) except k = 7 (2 blocks; at 3 it spills); kBound, when
// set, replaces that bound (5 for the quad-staged k = 3 instance, fwd_base_quad_blocks). At 3 blocks
// (80 registers) 36% of the cycles had no eligible warp, mostly waiting at the barrier after the
// staging and on its global loads; 4 blocks cut big_L2's fp32 forward 5.45 -> 5.07 ms.
// kTma: the TMA-staged instance (a.tma), compiled apart so that the other instances keep their
// registers (with the TMA state live across the item loop, the 16-bit k = 5 kernels spilled and the
// small shapes that cannot take TMA ran up to 5% slower).
// kFuse2 (with kTma): level 2 fused (a.fuse2, fwd_fused_layout). The box grows by level 2's halo,
// r level-1 coefficients (2 r pixels) on every side, so qh, qw, xh, xw and the origin below are
// those of the larger region; Y_1 and the float tile keep its inner part (yh x yw coefficients,
// fo pixels in), all that the level-1 and base convs read.
// kFixed (with kFuse2): the tile kFusedFwdTileH x kFusedFwdTileW, one plane per item, at compile
// time (fwd_fused_fixed_tile), so that the extents, pitches and job divisors below are constants:
// immediate offsets and shifts instead of parameter loads and index arithmetic.
// kOnly (K == 0): the runtime-k instance for k = kOnly alone (k = 1): its window passes compile
// that size only, and it takes fwd_base_blocks_per_sm(kOnly) blocks.
template <typename T, int K, bool kTma, bool kFuse2, bool kFixed, bool kPlane = false, int kBound = 0,
          int kOnly = 0>
__global__ void __launch_bounds__(kBlockThreads, kBound ? kBound : fwd_base_blocks_per_sm(kOnly ? kOnly : K))
    forward_base_kernel(const __grid_constant__ FwdBaseArgs<T> a) {
  static_assert(kBound == 0 || (K == 3 && !kTma && !kPlane), "only the quad-staged k = 3 instance takes its own bound");
  static_assert(!kFuse2 || (kTma && K > 0), "the fused forward stages with TMA");
  static_assert(!kFixed || kFuse2, "the fixed tile is a fused instance");
  // kFixed strips are all full (conv_quad_strip, conv_pair_strip's kFull): the output and level-1
  // extents (th x tw, th / 2 x tw / 2) are whole 4 x 4 strips and level 2's (th / 4 x tw / 4)
  // whole 4 x 2 strips, each with its k - 1 halo rows and columns in the tiles.
  static_assert(!kFixed || (kFusedFwdTileH % 16 == 0 && kFusedFwdTileW % 8 == 0),
                "whole strips in every phase of the fixed tile");
  // kFixed phases take at most one job per thread (for_thread_jobs<kFixed>): level-1 strips
  // (4 x 4 coefficients) beside level-2 ones, base-conv strips (4 x 4 outputs) and Haar
  // blocks (4 x 4 pixels) of one plane (static_asserts at each phase).
  static_assert(!kFixed || (kFusedFwdTileH / 4 + K - 1) * (kFusedFwdTileW / 4 + K - 1) <= kBlockThreads,
                "one Haar block per thread in the fixed tile");
  extern __shared__ __align__(128) float smem[];
  const int k = K ? K : a.k, r = k / 2, kk = k * k, s = kFuse2 ? 1 : a.stride;  // fused: stride 1
  const int c = blockIdx.x / a.g.splits, split = blockIdx.x % a.g.splits;
  const int th = kFixed ? kFusedFwdTileH : a.g.th, tw = kFixed ? kFusedFwdTileW : a.g.tw, np = kFixed ? 1 : a.g.np;
  const int qih = fwd_base_coef_extent(s, th), qiw = fwd_base_coef_extent(s, tw);
  const int g2 = kFuse2 ? r : 0;        // level 2's halo around the tile (level-1 coefficients)
  const int qh = qih + 2 * r + 2 * g2, qw = qiw + 2 * r + 2 * g2;
  const int xh = 2 * qh, xw = 2 * qw;
  const int th2 = qih / 2, tw2 = qiw / 2, eh2 = qh / 2, ew2 = qw / 2;  // level 2 (fused only)
  // Y_1 (yh x yw) and the float tile (fh x fw, its pixel (0, 0) at the box's (fo, fo)).
  const int yh = kFuse2 ? qih + 2 * r : qh, yw = kFuse2 ? qiw + 2 * r : qw;
  const int fh = 2 * yh, fw = 2 * yw, fo = 2 * g2;
  // The staging divisors: the launcher's, or (kFixed) the same values as constants.
  const bool inplace = !kFuse2 && a.tma_inplace;  // fused: the box is copied (its pitch is xw)
  const int xp = kFixed ? xw : a.xp;
  decltype(auto) fplane = fixed_or<kFixed>(a.fplane, eh2 * ew2);
  decltype(auto) frow = fixed_or<kFixed>(a.frow, ew2);
  const int fs = filter_stride(k);
  float* w0s = smem;                    // s0 * W0
  float* w1s = w0s + fs;                // 4 filters 0.5 * s1 * W1, fs apart
  float* w2s = w1s + 4 * fs;            // fused: 4 filters 0.25 * s2 * W2
  // Without TMA: x tile, Y_1, subband results. With TMA (fwd_base_tma_layout, fwd_fused_layout):
  // the boxes (128-byte aligned) and their mbarriers, Y_1, subband results, the float x tile
  // (unless in place).
  float* xs = w1s + 4 * fs;             // np x fh x fw
  float* ys = xs + np * fh * fw;        // np x 4 x yh x yw
  unsigned char* const tbuf =
      reinterpret_cast<unsigned char*>(smem) + ((kFuse2 ? 9 : 5) * fs * 4 + 127) / 128 * 128;
  const size_t tbytes = kTma ? (size_t(np) * xh * xp * sizeof(T) + 127) / 128 * 128 : 0;
  uint64_t* const bars = reinterpret_cast<uint64_t*>(tbuf + (kFuse2 ? 1 : 2) * tbytes);
  if constexpr (kTma) {
    ys = reinterpret_cast<float*>(bars + 2);
    // the float tile (in place: set per item); fused: behind Y_2 and Z_2
    xs = ys + np * 4 * yh * yw + np * 4 * qih * qiw + (kFuse2 ? np * 4 * (eh2 * ew2 + th2 * tw2) : 0);
  }
  float* zs = ys + np * 4 * yh * yw + (K == 0 ? kWindowSlack : 0);  // np x 4 x qih x qiw
  float* y2s = zs + np * 4 * qih * qiw;  // fused: np x 4 x eh2 x ew2
  float* z2s = y2s + np * 4 * eh2 * ew2;  // fused: np x 4 x th2 x tw2
  const float s0 = a.s0[c];
  const float bias = a.b0 ? s0 * a.b0[c] : 0.f;
  // Runtime k: filter rows filter_row_pitch(k) apart (filter_slot), the padding zeroed.
  const int wp = filter_row_pitch(k);
  if constexpr (K == 0) zero_filter_padding(w0s, 5, k);
  for (int i = threadIdx.x; i < (kFuse2 ? 9 : 5) * kk; i += blockDim.x) {
    if (i < kk) w0s[filter_slot(i, k)] = s0 * a.w0[int64_t(c) * kk + i];
    else if (i < 5 * kk) {
      const int e = i - kk, t = e / kk;
      float w = 0.5f * a.s1[4 * c + t] * a.w1[int64_t(4 * c) * kk + e];
      if (stride_folds_base(s)) w += s0 * folded_base_tap(a.w0 + int64_t(c) * kk, k, t, (e % kk) / k, (e % kk) % k);
      w1s[t * fs + filter_slot(e % kk, k)] = w;
    } else {  // as the level kernel folds them (weight * scale * 2^-2)
      const int e = i - 5 * kk, t = e / kk;
      w2s[t * fs + e % kk] = a.w2[int64_t(4 * c) * kk + e] * a.s2[4 * c + t] * 0.25f;
    }
  }

  // kPlane: the tile holds its whole plane; the zeros around the plane (x tile and Y_1), once
  // (StagedRegion).
  if constexpr (kPlane) zero_floats(xs, np * (xh * xw + 4 * qh * qw));

  int64_t begin, end, step;
  block_items<true>(a.g.items, a.g.splits, split, &begin, &end, &step);  // strided: halos from L2
  const ItemStep istep = item_step(a.g, step);
  // TMA: thread 0 asks for the x tile of the item at pos (its origin as below; rows and columns
  // outside x, and planes past the batch, arrive as zeros).
  const auto request_tile = [&](const ItemPos& pos, int buf) {
    const int x0y = fwd_tile_origin(pos.y0, s, r, g2), x0x = fwd_tile_origin(pos.x0, s, r, g2);
    mbarrier_expect_bytes(bars + buf, uint32_t(np * xh * xp * sizeof(T)));
    tma_load_4d(tbuf + buf * tbytes, &a.xmap, x0x - tma_box_offset(x0x, sizeof(T)), x0y, c, pos.b0, bars + buf);
  };
  // Fused (one buffer): the box of `item` (at pos), and the next item's into L2 meanwhile.
  const auto request_box = [&](const ItemPos& pos, int64_t item) {
    request_tile(pos, 0);
    if (item + step < end) {
      const ItemPos nx = next_item(pos, istep, a.g);
      const int ny = fwd_tile_origin(nx.y0, s, r, g2), nxx = fwd_tile_origin(nx.x0, s, r, g2);
      tma_prefetch_4d(&a.xmap, nxx - tma_box_offset(nxx, sizeof(T)), ny, c, nx.b0);
    }
  };
  if constexpr (kTma) {
    if (threadIdx.x == 0) {
      mbarrier_init(bars);
      mbarrier_init(bars + 1);
      mbarrier_init_fence();
    }
    __syncthreads();
    if (threadIdx.x == 0 && begin < end) {
      if (kFuse2) request_box(decode_item(a.g, begin), begin);
      else request_tile(decode_item(a.g, begin), 0);
    }
  }
  int iteration = 0;
  ItemPos pos = decode_item(a.g, begin);
  for (int64_t item = begin; item < end; item += step, ++iteration, pos = next_item(pos, istep, a.g)) {
    const int qay = (s * pos.y0) >> 1, qax = (s * pos.x0) >> 1;  // first interior coefficient
    const int x0y = fwd_tile_origin(pos.y0, s, r, g2), x0x = fwd_tile_origin(pos.x0, s, r, g2);
    __syncthreads();
    if constexpr (kFuse2) {
      // One box, this item's (requested after the previous item's Haar pass; the next one's goes to
      // L2 meanwhile). Then Y_2 from its 4 x 4 pixel blocks, and Y_1 and the float pixels from the
      // inner ones (block g2 / 2 on; the box origin is 16-byte aligned, offset 0).
      mbarrier_wait(bars, uint32_t(iteration) & 1u);
      haar2_pass_from_tile<T, true, float, kFixed>(reinterpret_cast<const T*>(tbuf), xp, 0, true, xs, xh, fw, ys, yh,
                                                   yw, g2 / 2, y2s, eh2, ew2, np, fplane, frow);
    } else if constexpr (kTma) {
      // Buffer iteration % 2 holds this item; the other one, free since the barrier above, takes
      // the next item's tile while this one is computed.
      const int buf = iteration & 1;
      if (threadIdx.x == 0 && item + step < end) request_tile(next_item(pos, istep, a.g), buf ^ 1);
      mbarrier_wait(bars + buf, uint32_t(iteration >> 1) & 1u);
      const T* tile = reinterpret_cast<const T*>(tbuf + buf * tbytes);
      if (inplace) xs = reinterpret_cast<float*>(tbuf + buf * tbytes);
      haar_pass_from_tile(tile, xp, tma_box_offset(x0x, sizeof(T)), !inplace, xs, xh, xw, ys, qh, qw, np,
                          a.hplane, a.hrow);
    } else if constexpr (!kPlane) {
      // Quads of 4 columns at multiples of 4 (xa), two rows each: the x tile and Y_1 in one pass
      // (rows loaded a.quad_vec elements at a time: load_quad_rows).
      const int xa = x0x & ~3, off = x0x - xa;
      with_quad_load_width(a.quad_vec, [&](auto width) {
        stage_tile<1>(  // two 16-bit quads in flight: fp16 forward base 5% slower (docs/wtconv.md, perf note 27)
            np * qh * a.quads.row.divisor,
            [&](int e) {
              const Pos3 q = split3(e, a.quads.plane, a.quads.row);
              const int b = pos.b0 + q.p;
              const int64_t pl = int64_t(b < a.B ? b : a.B - 1) * a.C + c;
              return load_quad_rows<decltype(width)::value>(a.x + pl * a.H * a.W, a.H, a.W, x0y + 2 * q.y,
                                                            xa + 4 * q.x, b < a.B);
            },
            [&](int e, const auto& v) {
              const Pos3 q = split3(e, a.quads.plane, a.quads.row);
              store_quad_rows<K == 0>(v, xs + q.p * xh * xw, xw, 2 * q.y, 4 * q.x - off, xw, ys + q.p * 4 * qh * qw,
                                      qh * qw, qw);
            });
      });
    } else {
      // The tile holds its whole plane: the plane's pixels alone at tile offset so = 2 r, the zeros
      // around them in place (StagedRegion); then the Haar blocks they touch.
      const int so = 2 * r;
      stage_tile<8>(
          np * int(a.xplane.divisor),
          [&](int e) {
            const Pos3 q = split3(e, a.xplane, a.xrow);
            const int b = pos.b0 + q.p, y = x0y + so + q.y, x = x0x + so + q.x;
            float v = 0.f;
            if (b < a.B && y >= 0 && x >= 0 && y < a.H && x < a.W)
              v = to_float(a.x[(int64_t(b) * a.C + c) * a.H * a.W + int64_t(y) * a.W + x]);
            return v;
          },
          [&](int e, float v) {
            const Pos3 q = split3(e, a.xplane, a.xrow);
            xs[q.p * xh * xw + (so + q.y) * xw + so + q.x] = v;
          });
      __syncthreads();
      for (int e = threadIdx.x; e < np * int(a.qplane.divisor); e += blockDim.x) {
        const Pos3 q = split3(e, a.qplane, a.qrow);
        const int p = q.p, y = so / 2 + q.y, x = so / 2 + q.x;
        const float* src = xs + p * xh * xw + (2 * y) * xw + 2 * x;
        float z[4];
        haar4(src[0], src[1], src[xw], src[xw + 1], z);
        float* dst = ys + p * 4 * qh * qw + y * qw + x;
#pragma unroll
        for (int t = 0; t < 4; ++t) dst[t * qh * qw] = z[t];
      }
    }
    __syncthreads();
    if constexpr (kFuse2) {  // the Haar pass has read the box: the next one streams in
      if (threadIdx.x == 0 && item + step < end) request_box(next_item(pos, istep, a.g), item + step);
    }
    if constexpr (K > 0) {
      // Level-1 subband convs, register-blocked (one column strip of one subband per job), + R_1.
      const int jobs = np * 4 * int(a.qstrips.divisor) * qiw;
      const float* res0 = a.rin ? a.rin + (int64_t(pos.b0) * a.C + c) * a.h1 * a.w1g : nullptr;
      const int64_t res_pstride = int64_t(a.C) * a.h1 * a.w1g;
      if constexpr (kFixed) {
        // Level 1 (qih x qiw) in 4 x 4 strips on threads 0 .. 127, level 2 (th2 x tw2) in 4 x 2
        // strips on the next 64: one job per thread and no barrier between them (level 2 in 4 x 4
        // strips, 32 jobs, measured level, and slower in the backward: perf note 39).
        constexpr int kL1Rows = kFusedFwdTileH / 2, kL1Cols = kFusedFwdTileW / 2;
        fixed_subband_conv_phase<K, 4, kL1Rows, kL1Cols, 0>(w1s, ys, yh * yw, yw, yh, zs, (const float*)nullptr, 0,
                                                            0, 0, 0, 0, 0);
        fixed_subband_conv_phase<K, 2, kL1Rows / 2, kL1Cols / 2, fixed_subband_jobs(kL1Rows, kL1Cols, 4)>(
            w2s, y2s, eh2 * ew2, ew2, eh2, z2s, (const float*)nullptr, 0, 0, 0, 0, 0, 0);
      } else if constexpr (kFuse2) {  // level 1 and level 2; R_1 joins Z_1 below
        subband_conv_phase<K, 4, 2>(np * 4 * int(a.qstrips4.divisor) * (qiw / 2), a.qcols2, a.qstrips4, qih, qiw,
                                    w1s, ys, yh * yw, yw, yh, zs, (const float*)nullptr, 0, 0, 0, 0, 0, 0);
        subband_conv_phase<K, 4, 2>(np * 4 * int(a.l2strips.divisor) * int(a.l2cols.divisor), a.l2cols, a.l2strips,
                                    th2, tw2, w2s, y2s, eh2 * ew2, ew2, eh2, z2s, (const float*)nullptr, 0, 0, 0, 0,
                                    0, 0);
      } else if (a.pair_sub)  // two columns per job (qiw even)
        subband_conv_phase<K, 4, 2>(np * 4 * int(a.qstrips4.divisor) * (qiw / 2), a.qcols2, a.qstrips4, qih, qiw,
                                    w1s, ys, qh * qw, qw, qh, zs, res0, res_pstride, a.B - pos.b0, qay, qax, a.h1,
                                    a.w1g);
      else if (strip_rows(K, qih) == 8)
        subband_conv_phase<K, 8, 1>(jobs, a.qcols, a.qstrips, qih, qiw, w1s, ys, qh * qw, qw, qh, zs, res0,
                                    res_pstride, a.B - pos.b0, qay, qax, a.h1, a.w1g);
      else
        subband_conv_phase<K, 4, 1>(jobs, a.qcols, a.qstrips, qih, qiw, w1s, ys, qh * qw, qw, qh, zs, res0,
                                    res_pstride, a.B - pos.b0, qay, qax, a.h1, a.w1g);
    } else {
      // Runtime k: the level kernels' window passes (level_subband_windows: four adjacent
      // coefficients of a row of one subband per job), + R_1 at LL before the store. One subband
      // per job, not four: a tile's rows of quads alone left most of the block waiting at the
      // barrier below (docs/wtconv.md, perf note 85).
      level_subband_windows<K, kOnly>(w1s, fs, wp, ys, qh, qw, qih, qiw, np, k, zs,
                               [&](int slot, int iy, int ix0, int ncols, float(&z)[4]) {
                                 const int b = pos.b0 + slot / 4, qy = qay + iy;
                                 if ((slot & 3) != 0 || a.rin == nullptr || b >= a.B || qy >= a.h1) return;
                                 const float* res = a.rin + (int64_t(b) * a.C + c) * a.h1 * a.w1g +
                                                    int64_t(qy) * a.w1g + qax + ix0;
#pragma unroll
                                 for (int u = 0; u < 4; ++u)
                                   if (u < ncols && qax + ix0 + u < a.w1g) z[u] += res[u];
                               });
    }
    __syncthreads();
    if constexpr (kFixed) {
      // Base conv in 4 x 4 strips (128 jobs, threads 0 .. 127) + synthesis: the strip's four
      // output rows are two level-1 coefficient rows, its four columns two level-1 coefficient
      // columns, all children of one level-2 coefficient.
      constexpr int kJobs = (kFusedFwdTileH / 4) * (kFusedFwdTileW / 4);
      static_assert(kJobs <= kBlockThreads, "one job per thread");
      for_thread_jobs<true>(kJobs, [&](int e) {
        const StripJob j =
            strip_job(e, TileDivmod(uint32_t(kFusedFwdTileW / 4)), TileDivmod(uint32_t(kFusedFwdTileH / 4)), 4);
        const int b = pos.b0, ox = pos.x0 + 4 * j.col, oy0 = pos.y0 + j.row0;
        if (b >= a.B || ox >= a.Wo || oy0 >= a.Ho) return;
        // the window of output (row0, 4 col) starts at tile pixel (row0 + r, 4 col + r) (the tile
        // starts 2 r + fo pixels before the outputs); fw % 4 == 0, so 2 floats past a 16-byte
        // boundary when r % 4 == 2.
        constexpr int kR = K / 2;
        float acc[4][4];
        conv_quad_strip<K, 4, kR % 4 == 2>(w0s, xs + (j.row0 + kR) * fw + 4 * j.col + kR, fw, acc);
        // The synthesis operands are loaded after the convolution, not hoisted into it: at the
        // register bound their registers would spill the accumulators.
        asm volatile("" ::: "memory");
        const int n = min(4, a.Ho - oy0), ncols = min(4, a.Wo - ox), zplane = qih * qiw;
        const float* zp = zs + (j.row0 >> 1) * qiw + 2 * j.col;
        T* yp = a.y + ((int64_t(b) * a.C + c) * a.Ho + oy0) * a.Wo + ox;
        const float* z2 = z2s + (j.row0 >> 2) * tw2 + j.col;
        const float v2[4] = {z2[0], z2[th2 * tw2], z2[2 * th2 * tw2], z2[3 * th2 * tw2]};
#pragma unroll
        for (int o = 0; o < 4; o += 2, zp += qiw, yp += 2 * int64_t(a.Wo)) {
          if (o >= n) break;
          float out[2][4];
#pragma unroll
          for (int v = 0; v < 2; ++v) {  // the two level-1 coefficients of this row pair
            float z[4] = {zp[v], zp[zplane + v], zp[2 * zplane + v], zp[3 * zplane + v]};
            z[0] += synth_child(v2, o >> 1, v);
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int u = 0; u < 2; ++u) out[h][2 * v + u] = bias + acc[o + h][2 * v + u] + synth_child(z, h, u);
          }
          store_rows_2x4(yp, a.Wo, out, o + 1 < n, ncols, a.y_pairs, a.y_quads);
        }
      });
    } else if (K > 0 && s == 1) {
      // Base conv, register-blocked (stride 1: outputs of a strip share input rows), + synthesis.
      // NC = 2: two adjacent output columns per job (tw even), which also share their Z loads.
      auto base_conv = [&](auto rows_tag, auto cols_tag, const TileDivmod& cols, const TileDivmod& strips) {
        constexpr int R = decltype(rows_tag)::value, NC = decltype(cols_tag)::value, KS = K ? K : 1;
        const int jobs = np * int(strips.divisor) * int(cols.divisor);
        for_thread_jobs(jobs, [&](int e) {
          const StripJob j = strip_job(e, cols, strips, R);  // slot = p
          const int p = j.slot, b = pos.b0 + p, ox = pos.x0 + j.col * NC, oy0 = pos.y0 + j.row0;
          if (b >= a.B || ox >= a.Wo || oy0 >= a.Ho) return;
          const int row = oy0 - r - x0y - fo;
          const float* src = xs + p * fh * fw + row * fw + (ox - r - x0x - fo);  // tile column j.col * NC + r
          float acc[R][NC];
          if constexpr (NC == 1) {
            float a1[R];
            conv_column_strip<KS, R, true>(w0s, src, fw, fh - row, a1);
#pragma unroll
            for (int o = 0; o < R; ++o) acc[o][0] = a1[o];
          } else {
            conv_pair_strip<KS, R, (KS / 2) % 2 == 1, true>(w0s, src, fw, fh - row, acc);
          }
          // Output rows [oy0, oy0 + n); two rows (and the NC columns, ox even when NC = 2) of one
          // coefficient share its four Z loads.
          const int n = min(min(R, th - j.row0), a.Ho - oy0), zplane = qih * qiw;
          const int ncols = min(NC, a.Wo - ox);
          const float* zp = zs + p * 4 * zplane + ((oy0 >> 1) - qay) * qiw + (ox >> 1) - qax;
          T* yp = a.y + ((int64_t(b) * a.C + c) * a.Ho + oy0) * a.Wo + ox;
          if ((oy0 & 1) == 0) {
            // NC = 2: ox is even (tile origins are multiples of the even tw), so column u's parity is
            // u, and the pair is one store when a.y_pairs.
            [[maybe_unused]] float v2[4];
            if constexpr (kFuse2) {
              // R_1 at the job's two coefficients (cy, cx), cy = row0 / 2 + o / 2, cx = j.col (the tile
              // origin is a multiple of 4 outputs): the level-2 synthesis the level kernel would have
              // stored, from their one level-2 parent (row0 / 4, j.col / 2).
              static_assert(R == 4 && NC == 2, "the fused forward takes 4 x 2 strip jobs");
              const float* z2 = z2s + (p * 4 * th2 + (j.row0 >> 2)) * tw2 + (j.col >> 1);
              v2[0] = z2[0];
              v2[1] = z2[th2 * tw2];
              v2[2] = z2[2 * th2 * tw2];
              v2[3] = z2[3 * th2 * tw2];
            }
#pragma unroll
            for (int o = 0; o < R; o += 2, zp += qiw, yp += 2 * int64_t(a.Wo)) {
              if (o >= n) break;
              float z[4] = {zp[0], zp[zplane], zp[2 * zplane], zp[3 * zplane]};
              if constexpr (kFuse2) z[0] += synth_child(v2, (o >> 1) & 1, j.col & 1);
              const auto col_parity = [&](int u) { return NC == 2 ? u : (ox + u) & 1; };
              float out[2][NC];
#pragma unroll
              for (int u = 0; u < NC; ++u) {
                out[0][u] = bias + acc[o][u] + synth_child(z, 0, col_parity(u));
                out[1][u] = bias + acc[o + 1 < R ? o + 1 : o][u] + synth_child(z, 1, col_parity(u));
              }
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                if (h == 1 && o + 1 >= n) break;
                T* row = yp + h * int64_t(a.Wo);
                if (NC == 2 && ncols == 2 && a.y_pairs) {
                  store2(row, out[h][0], out[h][NC - 1]);
                } else {
#pragma unroll
                  for (int u = 0; u < NC; ++u)
                    if (u < ncols) row[u] = from_float<T>(out[h][u]);
                }
              }
            }
          } else {  // only when a tile is one row tall
#pragma unroll
            for (int o = 0; o < R; ++o) {
              if (o >= n) break;
              const int oy = oy0 + o;
              const float* zo = zp + ((oy >> 1) - (oy0 >> 1)) * qiw;
              const float z[4] = {zo[0], zo[zplane], zo[2 * zplane], zo[3 * zplane]};
#pragma unroll
              for (int u = 0; u < NC; ++u) {
                if (u >= ncols) break;
                yp[int64_t(o) * a.Wo + u] = from_float<T>(bias + acc[o][u] + synth_child(z, oy & 1, (ox + u) & 1));
              }
            }
          }
        });
      };
      using I1 = std::integral_constant<int, 1>;
      using I2 = std::integral_constant<int, 2>;
      if constexpr (kFuse2) base_conv(std::integral_constant<int, 4>{}, I2{}, a.ocols2, a.ostrips4);  // s = 1, tw % 8 == 0
      else if (a.pair_base) base_conv(std::integral_constant<int, 4>{}, I2{}, a.ocols2, a.ostrips4);
      else if (strip_rows(K, th) == 8) base_conv(std::integral_constant<int, 8>{}, I1{}, a.ocols, a.ostrips);
      else base_conv(std::integral_constant<int, 4>{}, I1{}, a.ocols, a.ostrips);
    } else if (K == 0 && s == 1) {
      // Runtime k at stride 1: four adjacent outputs of a row per job (conv_adjacent_windows).
      const int quads = (tw + 3) / 4;
      for (int e = threadIdx.x; e < np * th * quads; e += blockDim.x) {
        const int p = e / (th * quads), rem = e % (th * quads), oy = pos.y0 + rem / quads;
        const int ox0 = pos.x0 + 4 * (rem % quads), b = pos.b0 + p;
        if (b >= a.B || oy >= a.Ho || ox0 >= a.Wo) continue;
        const int ncols = min(min(4, pos.x0 + tw - ox0), a.Wo - ox0);
        float v[4];
        with_compiled_k<K, kOnly>(k, [&](const int kw) {
          conv_adjacent_windows_by<4>(window_vector_width(kw, xw, 4), w0s, wp,
                                      xs + p * xh * xw + (oy - r - x0y) * xw + (ox0 - r - x0x), xw, kw, ncols, v);
        });
        const float* zrow = zs + p * 4 * qih * qiw + ((oy >> 1) - qay) * qiw;
        T* yrow = a.y + (int64_t(b) * a.C + c) * a.Ho * a.Wo + int64_t(oy) * a.Wo;
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          if (u >= ncols) break;
          const int ox = ox0 + u;
          const float* zp = zrow + (ox >> 1) - qax;
          const float z[4] = {zp[0], zp[qih * qiw], zp[2 * qih * qiw], zp[3 * qih * qiw]};
          yrow[ox] = from_float<T>(bias + v[u] + synth_child(z, oy & 1, ox & 1));
        }
      }
    } else {
      for (int e = threadIdx.x; e < np * th * tw; e += blockDim.x) {
        const int p = e / (th * tw), oy = pos.y0 + (e / tw) % th, ox = pos.x0 + e % tw;
        const int b = pos.b0 + p;
        if (b >= a.B || oy >= a.Ho || ox >= a.Wo) continue;
        const int py = s * oy, px = s * ox;
        float v = bias;
        if (!stride_folds_base(s))  // stride 2: the base conv is in the level-1 filters (folded_base_tap)
          with_compiled_k<K, kOnly>(k, [&](const int kw) {  // runtime k: at a compile-time k where it can be
            v += conv_window<K>(w0s, xs + p * xh * xw + (py - r - x0y) * xw + (px - r - x0x), xw, kw, wp);
          });
        const int iy = (py >> 1) - qay, ix = (px >> 1) - qax;
        const float* zp = zs + p * 4 * qih * qiw + iy * qiw + ix;
        const float z[4] = {zp[0], zp[qih * qiw], zp[2 * qih * qiw], zp[3 * qih * qiw]};
        v += synth_child(z, py & 1, px & 1);
        a.y[(int64_t(b) * a.C + c) * a.Ho * a.Wo + int64_t(oy) * a.Wo + ox] = from_float<T>(v);
      }
    }
  }
}

// Whether a fused forward takes the compile-time tile instance: its tile is kFusedFwdTileH x
// kFusedFwdTileW with one plane per item, and the box pitch the kernel then derives (xw, which
// fwd_fused_layout's xp always is) is the one prepare_forward_base set up.
template <typename T>
bool fwd_fused_fixed_tile(const FwdBaseArgs<T>& a) {
  if (a.g.th != kFusedFwdTileH || a.g.tw != kFusedFwdTileW || a.g.np != 1) return false;
  return a.xp == fwd_fused_layout(a.k, a.g.th, a.g.tw, 1, int(sizeof(T))).xp;
}

template <typename T>
cudaError_t launch_forward_base(const FwdBaseArgs<T>& args, size_t smem, cudaStream_t stream) {
  FwdBaseArgs<T> a = args;
  {
    const int r = a.k / 2, s = a.stride, th = a.g.th, tw = a.g.tw;
    const int qih = fwd_base_coef_extent(s, th), qiw = fwd_base_coef_extent(s, tw);
    const int qh = qih + 2 * r, qw = qiw + 2 * r;
    a.quad_vec = quad_load_width(a.x, a.W);
    const StagedRegion sr = staged_region(a.g.tiles_y == 1 && a.g.tiles_x == 1 && a.quad_vec != 4, a.H, a.W, r, 2 * qh, 2 * qw);
    a.plane_tile = sr.plane;
    staged_region_divisors(sr, a.xplane, a.xrow, a.qplane, a.qrow);
    a.qcols = TileDivmod(uint32_t(qiw));
    const int qr = strip_rows(a.k, qih), orows = strip_rows(a.k, th);
    a.qstrips = strip_count(qih, qr);
    a.ocols = TileDivmod(uint32_t(tw));
    a.ostrips = strip_count(th, orows);
    a.quads = quad_divisors(qh, 2 * qw, fwd_quad_lead(tw, r, s));
    // Two columns per strip job: even column counts keep every row of the x tile, Y_1 and the
    // pairs 8-byte aligned (the tiles start at multiples of 4 floats, filter_stride).
    a.pair_base = s == 1 && tw % 2 == 0;
    a.pair_sub = qiw % 2 == 0;
    a.y_pairs = a.Wo % 2 == 0 && reinterpret_cast<uintptr_t>(a.y) % (2 * sizeof(T)) == 0;
    a.y_quads = a.Wo % 4 == 0 && reinterpret_cast<uintptr_t>(a.y) % (4 * sizeof(T)) == 0;
    a.ocols2 = pair_count(tw);
    a.ostrips4 = strip_count(th, kStripRows);
    a.qcols2 = pair_count(qiw);
    a.qstrips4 = strip_count(qih, kStripRows);
  }
  const size_t launch_smem = base_launch_smem(a, smem);
  const unsigned blocks = unsigned(int64_t(a.C) * a.g.splits);
  return dispatch_kernel_size(a.k, [&](auto kc, auto only) {
    constexpr int K = decltype(kc)::value, kOnly = decltype(only)::value;
    // TMA instances for the specialised sizes only (the fused one for even r: fwd_fused_smem); the
    // runtime-k path stages as before.
    if (a.fuse2) {
      if constexpr (K != 0 && (K / 2) % 2 == 0) {
        if (fwd_fused_fixed_tile(a))
          return launch_with_smem(forward_base_kernel<T, K, true, true, true>, blocks, launch_smem, stream, a);
        return launch_with_smem(forward_base_kernel<T, K, true, true, false>, blocks, launch_smem, stream, a);
      } else {
        return cudaErrorNotSupported;  // the plan fuses only sizes with that instance (fwd_fused_smem)
      }
    }
    if constexpr (K != 0)
      if (a.tma) return launch_with_smem(forward_base_kernel<T, K, true, false, false>, blocks, launch_smem, stream, a);
    // The plane-tile or tiled instance (kOnly: the k = 1 ones, fwd_base_blocks_per_sm).
    if (a.plane_tile)
      return launch_with_smem(forward_base_kernel<T, K, false, false, false, true, 0, kOnly>, blocks, smem, stream, a);
    if constexpr (K == 3)
      if (fwd_base_quad_blocks(K, smem) == kFwdQuadBlocksK3)
        return launch_with_smem(forward_base_kernel<T, K, false, false, false, false, kFwdQuadBlocksK3>, blocks,
                                smem, stream, a);
    return launch_with_smem(forward_base_kernel<T, K, false, false, false, false, 0, kOnly>, blocks, smem, stream, a);
  });
}

template <typename T>
void prepare_forward_base(FwdBaseArgs<T>& a) {
  a.tma = a.fuse2 = false;
  if (a.fused_smem > 0 && a.w2 != nullptr && a.s2 != nullptr) {
    const FwdFusedLayout l = fwd_fused_layout(a.k, a.g.th, a.g.tw, a.g.np, int(sizeof(T)));
    if (encode_plane_box_map(&a.xmap, a.x, int(sizeof(T)), a.W, a.H, a.C, a.B, l.xp, l.xh, a.g.np)) {
      a.tma = a.fuse2 = true;
      a.xp = l.xp;
      a.fplane = TileDivmod(uint32_t(l.eh2 * l.ew2));
      a.frow = TileDivmod(uint32_t(l.ew2));
      a.l2cols = pair_count(l.tw2);
      a.l2strips = strip_count(l.th2, kStripRows);
      return;
    }
  }
  if (a.tma_smem > 0) {
    const FwdBaseTmaLayout l = fwd_base_tma_layout(a.k, a.stride, a.g.th, a.g.tw, a.g.np, int(sizeof(T)));
    a.tma = encode_plane_box_map(&a.xmap, a.x, int(sizeof(T)), a.W, a.H, a.C, a.B, l.xp, l.xh, a.g.np);
    if (a.tma) {
      a.xp = l.xp;
      a.tma_inplace = l.inplace;
      a.hplane = TileDivmod(uint32_t(l.xh / 2 * (l.xw / 4)));
      a.hrow = TileDivmod(uint32_t(l.xw / 4));
    }
  }
}

template void prepare_forward_base<float>(FwdBaseArgs<float>&);
template void prepare_forward_base<__half>(FwdBaseArgs<__half>&);
template void prepare_forward_base<__nv_bfloat16>(FwdBaseArgs<__nv_bfloat16>&);
template cudaError_t launch_forward_base<float>(const FwdBaseArgs<float>&, size_t, cudaStream_t);
template cudaError_t launch_forward_base<__half>(const FwdBaseArgs<__half>&, size_t, cudaStream_t);
template cudaError_t launch_forward_base<__nv_bfloat16>(const FwdBaseArgs<__nv_bfloat16>&, size_t, cudaStream_t);

}  // namespace wtconv_detail
}  // namespace winconv
