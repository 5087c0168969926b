// Backward, base conv fused with level 1. It runs at stride 1 (a strided backward runs on dy spread
// onto the full grid: plan.h, WtconvRun), so the full-resolution output gradient D is dy. Per tile
// of level-1 coefficients (2x2 pixels each) it reads x and dy with a halo and dX_1, forms
// Y_1 = Haar(x) and G_1 = Haar(D) on chip and writes
//   dx = s0 * (flipped W0) conv D + synthesis of (s_1 * (flipped W_1) conv G_1, + dX_1 at LL),
// plus per-block partial sums of the correlations C0 = corr(x, D), sum(D) and C_1 = corr(Y_1, G_1)
// (fixed order, no atomics). HBM: reads x, dy, dX_1; writes dx and C x splits x (5kk + 1) partials.
// With level 2 fused (L = 2, kFuse2) it forms dX_1 itself, from Y_2 = Haar(LL(Y_1)) and
// G_2 = Haar(LL(G_1)) over a larger box, and also writes level 2's C x splits x 4kk partials.
// At stride 2 (a.fold_base, unfused) D is dy spread, G_1 is dy / 2 in every subband, and the base
// conv and its correlation fold into level 1 (wtconv_fold.h): dx is the synthesis of the level-1
// correlations with folded filters, all eight warps run the level-1 correlations, and C0 is formed
// from them when the partials are written.
#include <type_traits>

#include "cuda/common/tensor_map.h"
#include "cuda/common/tma.cuh"
#include "wtconv_kernels.cuh"
#include "wtconv_correlations.cuh"
#include "wtconv_fold.h"
#include "wtconv_haar.cuh"
#include "wtconv_items.cuh"
#include "wtconv_level_tiles.cuh"
#include "wtconv_quad_staging.cuh"
#include "wtconv_staging.cuh"
#include "wtconv_strips.cuh"
#include "wtconv_values.cuh"
#include "wtconv_windows.cuh"

namespace winconv {
namespace wtconv_detail {

// Pixel origin, along one axis, of the boxes of an item whose first level-1 coefficient there is
// t0: r coefficients of halo, and g2 more pixels for level 2's (fused).
__device__ __forceinline__ int bwd_box_origin(int t0, int r, int g2) { return 2 * (t0 - r) - g2; }

// One quad of x and the same quad of dy, as loaded (load_quad_rows).
template <typename Q>
struct QuadPair {
  Q x, d;
};

// kTma: the TMA-staged instances (a.tma: the unfused fp32 one, tiles starting 16-byte aligned, and
// every fused one), compiled apart so that the other instances keep their registers
// (bwd_base_tma_smem, bwd_fused_smem).
// kFuse2 (with kTma): level 2 fused (a.fuse2, bwd_fused_layout). The boxes grow by level 2's halo,
// 2 r pixels on every side, Y_1 and G_1 keep the inner region, and the level-2 convs and
// correlations run beside the level-1 ones. fp32: the boxes are the pixel tiles (the inner tile
// gp pixels in); 16-bit (kCopy): the boxes land in the G_1 and dY regions and the Haar passes
// convert the inner pixels into float tiles, x first (whose box G_1 then overwrites), then dy.
// kFixed (with kFuse2): the tile kFusedBwdTileH x kFusedBwdTileW coefficients, one plane per
// item, at compile time (bwd_fused_fixed_tile): extents, pitches, row lengths and job divisors
// become constants, as in the forward.
// kOnly (K == 0): the runtime-k instance for k = kOnly alone (k = 1): its correlation rings and
// window passes compile that size only, and it takes bwd_base_blocks_per_sm(kOnly) blocks.
// kHalves (runtime k, k != 1): each dx job on a lane pair (bwd_dx_half_jobs, wtconv_layouts.h).
// kFold (unfused; a.fold_base): stride 2's base conv and base correlation folded into level 1,
// compiled apart so that the stride-1 instances keep their code (as a runtime flag, their steps
// ran 1-3% slower).
template <typename T, int K, bool kTma, bool kFuse2, bool kFixed, bool kPlane = false, int kOnly = 0,
          bool kHalves = false, bool kFold = false>
__global__ void __launch_bounds__(kBlockThreads, bwd_base_blocks_per_sm(kOnly ? kOnly : K))
    backward_base_kernel(const __grid_constant__ BwdBaseArgs<T> a) {
  static_assert(!kFuse2 || (kTma && K > 0), "the fused backward stages with TMA");
  static_assert(!kFixed || kFuse2, "the fixed tile is a fused instance");
  static_assert(!kHalves || (K == 0 && kOnly == 0), "dx jobs in halves: the runtime-k instance, k != 1");
  static_assert(!kFold || !kFuse2, "the fused backward keeps its base passes");
  // kFixed strips are all full (conv_quad_strip, conv_pair_strip's kFull): the level-1 and pixel
  // extents (th x tw, 2 th x 2 tw) are whole 4 x 4 strips and level 2's (th / 2 x tw / 2) whole
  // 4 x 2 strips, each with its k - 1 halo rows and columns in the tiles.
  static_assert(!kFixed || (kFusedBwdTileH % 8 == 0 && kFusedBwdTileW % 4 == 0),
                "whole strips in every phase of the fixed tile");
  // kFixed phases take at most one job per thread: level-1 strips (4 x 4 coefficients each) beside
  // level-2 ones, dx strips (4 x 4 pixels) and Haar blocks (4 x 4 pixels) of one plane
  // (static_asserts at each phase), so they run without job loops (for_thread_jobs<true>). With
  // the 4 x 2 strips of before, the 16-bit instance spilled that way and kept its loops (perf
  // notes 37 and 39).
  static_assert(!kFixed || (kFusedBwdTileH / 2 + K - 1) * (kFusedBwdTileW / 2 + K - 1) <= kBlockThreads,
                "one Haar block per thread in the fixed tile");
  constexpr bool kCopy = kFuse2 && sizeof(T) != 4;
  extern __shared__ __align__(128) float smem[];
  constexpr int KM = K > 0 ? K : kOnly > 0 ? kOnly : 15;  // the sums of a kernel row
  const int k = K ? K : a.k, r = k / 2, kk = k * k;
  const int c = blockIdx.x / a.g.splits, split = blockIdx.x % a.g.splits;
  const int th = kFixed ? kFusedBwdTileH : a.g.th, tw = kFixed ? kFusedBwdTileW : a.g.tw, np = kFixed ? 1 : a.g.np;
  // Y_1 and G_1: np x 4 planes of eh x ew coefficients, rows lp floats apart (ew but at runtime k,
  // bwd_level_pitch), whose TMA and fused instances (compile-time k) take ew for both.
  const int eh = th + 2 * r, ew = tw + 2 * r, lp = bwd_level_pitch(k, ew), plane = eh * lp;
  const int gp = kFuse2 && !kCopy ? 2 * r : 0;  // fused fp32: level 2's halo around the pixel tile
  // The fused layout (bwd_fused_layout; constants in the fixed-tile instance).
  const BwdFusedLayout fl = kFuse2 ? bwd_fused_layout(k, th, tw, np, int(sizeof(T))) : BwdFusedLayout{};
  const int pw = kFixed ? fl.pitch : a.pitch;  // (>= 2 ew, plan)
  const int ph = 2 * eh + 2 * gp, pplane = ph * pw;  // pixel tile rows
  const int th2 = th / 2, tw2 = tw / 2, eh2 = th2 + 2 * r, ew2 = tw2 + 2 * r;  // level 2 (fused only)
  // Staging divisors: the launcher's, or (kFixed) the same values as constants.
  decltype(auto) fplane = fixed_or<kFixed>(a.fplane, eh2 * ew2);
  decltype(auto) frow = fixed_or<kFixed>(a.frow, ew2);
  // Correlation jobs: [0, 4k) level 1, [4k, 8k) base, fused [8k, 12k) level 2 (subband, kernel row).
  const int jobs = (kFuse2 ? 12 : 8) * k, parts = corr_parts_per_warp(k);
  const int fs = filter_stride(k);
  float* w0f = smem;                  // s0 * W0 flipped
  float* w1f = w0f + fs;              // 4 filters s1 * W1 flipped, fs apart
  float* w2f = w1f + 4 * fs;          // fused: 4 filters s2 * W2 flipped
  float* xs = w1f + 4 * fs;           // np x pplane (16-byte aligned: paired correlation loads)
  float* ds = xs + np * pplane;       // np x pplane
  // TMA (bwd_base_tma_layout, bwd_fused_layout): the boxes land in xs and ds, moved to 128-byte
  // boundaries; the mbarrier sits behind everything else.
  BwdBaseTmaLayout tl;
  unsigned char* const sbase = reinterpret_cast<unsigned char*>(smem);
  float* ys = ds + np * pplane;       // np x 4 x plane
  if constexpr (kFuse2) {
    xs = reinterpret_cast<float*>(sbase + fl.xs);
    ds = reinterpret_cast<float*>(sbase + fl.ds);
    ys = reinterpret_cast<float*>(sbase + fl.ys);
  } else if constexpr (kTma) {
    tl = bwd_base_tma_layout(k, th, tw, np, pw);
    xs = reinterpret_cast<float*>(sbase + tl.xs);
    ds = reinterpret_cast<float*>(sbase + tl.ds);
    ys = ds + np * pplane;
  }
  // The pixel tiles of the base conv and correlation (fused fp32: inside the boxes, 2 r pixels in).
  const float* const xi = xs + gp * pw + gp;
  const float* const di = ds + gp * pw + gp;
  float* gs = ys + np * 4 * plane;    // np x 4 x plane
  float* dz = gs + np * 4 * plane;    // np x 4 x th x tw subband convs + dX_1 (compile-time k only)
  float *y2s = nullptr, *g2s = nullptr, *dz2 = nullptr;  // fused: np x 4 x eh2 x ew2 (Y_2, G_2), np x 4 x th2 x tw2
  if constexpr (kFuse2) {
    gs = reinterpret_cast<float*>(sbase + fl.gs);
    dz = reinterpret_cast<float*>(sbase + fl.dz);
    y2s = reinterpret_cast<float*>(sbase + fl.y2s);
    g2s = reinterpret_cast<float*>(sbase + fl.g2s);
    dz2 = reinterpret_cast<float*>(sbase + fl.dz2);
  }
  // parts x jobs x k, written after the items: fused and runtime-k over the tiles from xs on
  // (bwd_base_smem_floats), otherwise behind dz.
  float* red = kFuse2 || K == 0 ? xs : dz + np * 4 * th * tw;
  float* red_sum = red + parts * jobs * k;  // parts x 4

  const float s0 = a.s0[c];
  // Runtime k: filter rows filter_row_pitch(k) apart (filter_slot), the padding zeroed.
  const int wp = filter_row_pitch(k);
  if constexpr (K == 0) zero_filter_padding(w0f, 5, k);
  for (int i = threadIdx.x; i < (kFuse2 ? 9 : 5) * kk; i += blockDim.x) {
    if (i < kk) {
      w0f[filter_slot(i, k)] = s0 * a.w0[int64_t(c) * kk + (kk - 1 - i)];
    } else if (!kFuse2 || i < 5 * kk) {
      const int e = i - kk, t = e / kk, ij = e % kk;
      float w = a.s1[4 * c + t] * a.w1[int64_t(4 * c + t) * kk + (kk - 1 - ij)];
      if constexpr (kFold) w += s0 * folded_dx_tap(a.w0 + int64_t(c) * kk, k, t, ij / k, ij % k);
      w1f[t * fs + filter_slot(ij, k)] = w;
    } else {  // as the level kernel folds them
      const int e = i - 5 * kk, t = e / kk, ij = e % kk;
      w2f[t * fs + ij] = a.s2[4 * c + t] * a.w2[int64_t(4 * c + t) * kk + (kk - 1 - ij)];
    }
  }
  // Correlation jobs: [0, 4k) level 1 (subband, kernel row); [4k, 8k) base (row quarter, kernel row).
  // The first half of the block (whole warps) takes the level jobs, the second half the base jobs,
  // so no warp diverges between the two loops; parts = 32 / k = (blockDim / 2) / 4k either way.
  // Level warp w takes subband w, lane = ci + k * part (corr_parts_per_warp): a half-warp reads
  // consecutive rows of one plane. Spreading the subbands over the lanes put rows of four planes
  // on one bank pair (4-way conflicts on the 8-byte loads). Base lanes keep (quarter, kernel row)
  // fastest; their rows are conflict-free when the pixel pitch is padded (bwd_pixel_pitch).
  // Fused: the last two part slots of each level warp (lane / k >= parts - 2) take level 2's
  // subband instead, in two parts of th/4 rows of tw/2 positions, and level 1 keeps parts - 2
  // parts of th/4 rows of tw positions: the warp runs one loop, whose trip counts the two kinds of
  // lane share (with one level-2 part, its th/2 rows ran after level 1's and the warp issued 1.5x).
  static_assert(kBlockThreads == 256, "four level warps, one per subband, then the base warps");
  // A thread's role from its index, derived afresh in each item from a thread index read there
  // (opaque_thread_index): computed once, the values stayed live across the item loop and spilled
  // at the register bound, and their reloads stalled every item's correlation start (perf note
  // 36; the fixed-tile instance kept them until its 4 x 4 strips needed the registers, note 39).
  const int lparts = kFuse2 ? parts - 2 : parts;  // level-1 parts
  // row_part: the level rows a thread takes, for_strided_rows(row_part, ...). Folded, the second
  // half of the block runs level jobs too, laid out as the first half's (warp w: subband w % 4),
  // on the row parts after the first half's, and keeps its sums in the base jobs' slots of red.
  struct CorrRole {
    bool base_job, l2_job, corr_thread;
    int job, part, sb, ci, row_part;
  };
  const auto corr_role = [&](int tid) {
    const int half = kBlockThreads / 2, local = tid % half, lane = tid % 32;
    CorrRole o;
    if (kFold) {
      const bool upper = tid >= half;
      o.base_job = o.l2_job = false;
      o.sb = local / 32;
      o.ci = lane % k;
      o.part = lane / k;
      o.row_part = (upper ? lparts : 0) + o.part;
      o.job = (upper ? 4 * k : 0) + o.sb * k + o.ci;
      o.corr_thread = o.part < parts;
      return o;
    }
    o.base_job = tid >= half;
    o.l2_job = kFuse2 && !o.base_job && lane / k >= lparts;
    o.job = o.base_job ? 4 * k + local % (4 * k) : (o.l2_job ? 8 * k : 0) + (local / 32) * k + lane % k;
    o.part = o.base_job ? local / (4 * k) : lane / k - (o.l2_job ? lparts : 0);
    o.corr_thread = (o.l2_job ? lane / k : o.part) < parts;
    const int jb = o.base_job ? o.job - 4 * k : o.job - (o.l2_job ? 8 * k : 0);
    o.sb = jb / k;  // level: subband; base: quarter
    o.ci = jb % k;
    o.row_part = o.part;
    return o;
  };
  double tot[KM];
#pragma unroll
  for (int j = 0; j < KM; ++j) tot[j] = 0.0;
  double tot_sum = 0.0;
  // Quad-read correlations (corr_row_quads) when every row of the tile meets their alignment: the
  // subband rows (y at column 0, g at column r) and the pixel rows (x at r, D at 2r). Their reads
  // past a row (at most 3 floats) land in the next row or the next array (xs, ds, ys, gs are
  // followed by ds, ys, gs, dz), and those before it (kOy <= r, kOg <= 2r) in the same row.
  // The fixed tile meets them by construction (bwd_fused_fixed_tile checks its layout), so its
  // instance has the quad paths alone, and its level rows (tw and tw2 positions) whole chunks.
  constexpr int kR = K / 2;
  const bool level_quads = kFixed || (plane % 4 == 0 && quad_corr_ok(ys, ew, 0, gs + r, ew, kR % 4, tw));
  const bool base_quads =
      kFixed || (pplane % 4 == 0 && quad_corr_ok(xi + r, pw, kR % 4, di + 2 * r, pw, (2 * kR) % 4, 2 * tw));
  const bool l2_quads =
      kFixed || (kFuse2 && (eh2 * ew2) % 4 == 0 && quad_corr_ok(y2s, ew2, 0, g2s + r, ew2, kR % 4, tw2));

  // kPlane: the tile holds its whole plane; the zeros around the plane (x and D tiles, Y_1 and G_1),
  // once (StagedRegion).
  if constexpr (kPlane) zero_floats(xs, 2 * np * pplane + 8 * np * plane);

  int64_t begin, end, step;
  block_items<true>(a.g.items, a.g.splits, split, &begin, &end, &step);  // strided: halos from L2
  // One mbarrier for both boxes; fused, one per box (bar: x, bar + 1: dy), so that the x pass
  // starts while the dy box is still on its way.
  uint64_t* const bar = reinterpret_cast<uint64_t*>(sbase + (kFuse2 ? fl.bar : tl.bar));
  if constexpr (kTma) {
    if (threadIdx.x == 0) {
      mbarrier_init(bar);
      if constexpr (kFuse2) mbarrier_init(bar + 1);
      mbarrier_init_fence();
    }
    __syncthreads();
  }
  const ItemStep istep = item_step(a.g, step);
  int iteration = 0;
  ItemPos pos = decode_item(a.g, begin);
  for (int64_t item = begin; item < end; item += step, ++iteration, pos = next_item(pos, istep, a.g)) {
    const int g2 = kFuse2 ? 2 * r : 0;  // fused: the boxes' extra pixels for level 2's halo
    const int py0 = bwd_box_origin(pos.y0, r, g2), px0 = bwd_box_origin(pos.x0, r, g2);
    __syncthreads();
    if constexpr (kTma) {
      // One box of x and one of dy (zeros outside the planes and past the batch). The next item's
      // boxes go to L2 meanwhile: its load then waits on L2, not HBM.
      if (threadIdx.x == 0) {
        if constexpr (kFuse2) {
          mbarrier_expect_bytes(bar, uint32_t(fl.box_bytes));
          tma_load_4d(sbase + fl.xbox, &a.xmap, px0, py0, c, pos.b0, bar);
          mbarrier_expect_bytes(bar + 1, uint32_t(fl.box_bytes));
          tma_load_4d(sbase + fl.dbox, &a.dmap, px0, py0, c, pos.b0, bar + 1);
        } else {
          mbarrier_expect_bytes(bar, uint32_t(2 * size_t(np) * ph * pw * sizeof(T)));
          tma_load_4d(xs, &a.xmap, px0, py0, c, pos.b0, bar);
          tma_load_4d(ds, &a.dmap, px0, py0, c, pos.b0, bar);
        }
        if (item + step < end) {
          const ItemPos nx = next_item(pos, istep, a.g);
          const int ny = bwd_box_origin(nx.y0, r, g2), nxx = bwd_box_origin(nx.x0, r, g2);
          tma_prefetch_4d(&a.xmap, nxx, ny, c, nx.b0);
          tma_prefetch_4d(&a.dmap, nxx, ny, c, nx.b0);
        }
      }
      const uint32_t parity = uint32_t(iteration) & 1u;
      mbarrier_wait(bar, parity);
      if constexpr (kCopy) {
        // Y_1, G_1 over the inner region (from block r / 2 on) and its pixels as floats, Y_2 and
        // G_2 (X_1, G_1's LL in float, as the level kernel forms them). The x box sits in
        // G_1's region: the dy pass writes G_1 only after the barrier.
        const T* xbox = reinterpret_cast<const T*>(sbase + fl.xbox);
        const T* dbox = reinterpret_cast<const T*>(sbase + fl.dbox);
        haar2_pass_from_tile<T, true, float, kFixed>(xbox, fl.box_pitch, 0, true, xs, fl.box_rows, pw, ys, eh, ew,
                                                   r / 2, y2s, eh2, ew2, np, fplane, frow);
        __syncthreads();
        mbarrier_wait(bar + 1, parity);
        haar2_pass_from_tile<T, true, float, kFixed>(dbox, fl.box_pitch, 0, true, ds, fl.box_rows, pw, gs, eh, ew,
                                                   r / 2, g2s, eh2, ew2, np, fplane, frow);
      } else if constexpr (kFuse2) {  // Y_1, G_1 over the inner region (from block r / 2 on), Y_2 and G_2
        haar2_pass_from_tile<float, true, float, kFixed>(xs, pw, 0, false, xs, ph, pw, ys, eh, ew, r / 2, y2s,
                                                           eh2, ew2, np, fplane, frow);
        mbarrier_wait(bar + 1, parity);
        haar2_pass_from_tile<float, true, float, kFixed>(ds, pw, 0, false, ds, ph, pw, gs, eh, ew, r / 2, g2s,
                                                           eh2, ew2, np, fplane, frow);
      } else {
        haar_pass_from_tile(xs, pw, 0, false, xs, ph, pw, ys, eh, ew, np, a.hplane, a.hrow);
        haar_pass_from_tile(ds, pw, 0, false, ds, ph, pw, gs, eh, ew, np, a.hplane, a.hrow);
      }
    } else if constexpr (!kPlane) {
      // Quads of 4 columns, two rows each, of x and dy: the x and D tiles and Y_1, G_1 in one pass
      // (rows loaded a.quad_vec elements at a time: load_quad_rows).
      const int xa = px0 & ~3, off = px0 - xa;
      with_quad_load_width(a.quad_vec, [&](auto width) {
        constexpr int kV = decltype(width)::value;
        // 16-bit raw rows at k = 5: two quads in flight per thread (a raw quad holds half the
        // registers of a float one); fp16 backward base -3.4% on big_L2. At k = 3 it measured neutral
        // and at k = 7 1-2% slower (more spills at the register bound), so they keep one
        // (docs/wtconv.md, perf note 27); element loads arrive as floats (load_quad_rows) and keep one.
        constexpr int kQuadsInFlight = sizeof(T) == 2 && K == 5 && kV > 1 ? 2 : 1;
        stage_tile<kQuadsInFlight>(
            np * eh * a.quads.row.divisor,
            [&](int e) {
              const Pos3 q = split3(e, a.quads.plane, a.quads.row);
              const int b = pos.b0 + q.p;
              const int64_t pl = (int64_t(b < a.B ? b : a.B - 1) * a.C + c) * a.H * a.W;
              const int y = py0 + 2 * q.y, x = xa + 4 * q.x;
              return QuadPair<LoadedQuad<T, kV>>{load_quad_rows<kV>(a.x + pl, a.H, a.W, y, x, b < a.B),
                                                 load_quad_rows<kV>(a.dy + pl, a.H, a.W, y, x, b < a.B)};
            },
            [&](int e, const auto& v) {
              const Pos3 q = split3(e, a.quads.plane, a.quads.row);
              const int col0 = 4 * q.x - off;
              store_quad_rows<K == 0>(v.x, xs + q.p * pplane, pw, 2 * q.y, col0, 2 * ew, ys + q.p * 4 * plane,
                                      plane, lp);
              store_quad_rows<K == 0>(v.d, ds + q.p * pplane, pw, 2 * q.y, col0, 2 * ew, gs + q.p * 4 * plane,
                                      plane, lp);
            });
      });
    } else {
      // The tile holds its whole plane: the plane's pixels alone at tile offset so = 2 r, the zeros
      // around them in place (StagedRegion); then the Haar blocks they touch.
      const int so = 2 * r;
      stage_tile<4>(
          np * int(a.pplane.divisor),
          [&](int e) {
            const Pos3 q = split3(e, a.pplane, a.prow);
            const int b = pos.b0 + q.p, y = py0 + so + q.y, x = px0 + so + q.x;
            float2 v = make_float2(0.f, 0.f);  // (x, D)
            if (b < a.B && y >= 0 && x >= 0 && y < a.H && x < a.W) {
              const int64_t at = (int64_t(b) * a.C + c) * a.H * a.W + int64_t(y) * a.W + x;
              v.x = to_float(a.x[at]);
              v.y = to_float(a.dy[at]);
            }
            return v;
          },
          [&](int e, float2 v) {
            const Pos3 q = split3(e, a.pplane, a.prow);  // recomputed: the tile rows are padded
            xs[q.p * pplane + (so + q.y) * pw + so + q.x] = v.x;
            ds[q.p * pplane + (so + q.y) * pw + so + q.x] = v.y;
          });
      __syncthreads();
      for (int e = threadIdx.x; e < np * int(a.plane.divisor); e += blockDim.x) {
        const Pos3 q = split3(e, a.plane, a.row);
        const int p = q.p, yy = so / 2 + q.y, xx = so / 2 + q.x, rem = yy * lp + xx;
        const float* xp = xs + p * pplane + (2 * yy) * pw + 2 * xx;
        const float* dp = ds + p * pplane + (2 * yy) * pw + 2 * xx;
        float z[4], g[4];
        haar4(xp[0], xp[1], xp[pw], xp[pw + 1], z);
        haar4(dp[0], dp[1], dp[pw], dp[pw + 1], g);
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          ys[(p * 4 + t) * plane + rem] = z[t];
          gs[(p * 4 + t) * plane + rem] = g[t];
        }
      }
    }
    __syncthreads();
    if constexpr (K > 0) {
      // Level-1 subband convs, register-blocked (one column strip of one subband per job), + dX_1.
      const int jobs = np * 4 * int(a.qstrips.divisor) * tw;
      const T* res0 = a.dxin ? a.dxin + (int64_t(pos.b0) * a.C + c) * a.h1 * a.w1g : nullptr;
      const int64_t res_pstride = int64_t(a.C) * a.h1 * a.w1g;
      if constexpr (kFixed) {
        // Level 1 (th x tw) in 4 x 4 strips on threads 0 .. 127, level 2 (th2 x tw2) in 4 x 2 strips
        // on the next 64: one job per thread and no barrier between them.
        fixed_subband_conv_phase<K, 4, kFusedBwdTileH, kFusedBwdTileW, 0>(
            w1f, gs, plane, ew, eh, dz, res0, res_pstride, a.B - pos.b0, pos.y0, pos.x0, a.h1, a.w1g);
        fixed_subband_conv_phase<K, 2, kFusedBwdTileH / 2, kFusedBwdTileW / 2,
                                 fixed_subband_jobs(kFusedBwdTileH, kFusedBwdTileW, 4)>(
            w2f, g2s, eh2 * ew2, ew2, eh2, dz2, (const T*)nullptr, 0, 0, 0, 0, 0, 0);
      } else if (a.pair_sub)  // two columns per job (tw even)
        subband_conv_phase<K, kStripRows, 2>(
            np * 4 * int(a.qstrips4.divisor) * (tw / 2), a.qcols2, a.qstrips4, th, tw, w1f, gs, plane, ew, eh, dz,
            res0, res_pstride, a.B - pos.b0, pos.y0, pos.x0, a.h1, a.w1g);
      else if (strip_rows(K, th) == 8)
        subband_conv_phase<K, 8, 1>(jobs, a.qcols, a.qstrips, th, tw, w1f, gs, plane, ew, eh, dz, res0, res_pstride,
                                    a.B - pos.b0, pos.y0, pos.x0, a.h1, a.w1g);
      else
        subband_conv_phase<K, 4, 1>(jobs, a.qcols, a.qstrips, th, tw, w1f, gs, plane, ew, eh, dz, res0, res_pstride,
                                    a.B - pos.b0, pos.y0, pos.x0, a.h1, a.w1g);
      if constexpr (kFuse2 && !kFixed)  // level 2's subband convs (dY_2 without dX_2: level 2 is the last)
        subband_conv_phase<K, kStripRows, 2>(np * 4 * int(a.l2strips.divisor) * int(a.l2cols.divisor), a.l2cols,
                                             a.l2strips, th2, tw2, w2f, g2s, eh2 * ew2, ew2, eh2, dz2,
                                             (const T*)nullptr, 0, 0, 0, 0, 0, 0);
      __syncthreads();
      // dx: base conv of D, register-blocked over strips of two pixel columns (the pixel tile is
      // 2 tw wide, so always even), + synthesis of dz: a 2 x 2 pixel block shares its dz loads.
      const int pth = 2 * th;
      auto dx_conv = [&](auto rows_tag) {
        constexpr int R = decltype(rows_tag)::value;
        const int jobs = np * int(a.pstrips.divisor) * tw;
        for_thread_jobs(jobs, [&](int e) {
          const StripJob j = strip_job(e, a.qcols, a.pstrips, R);  // slot = p
          const int col = 2 * j.col, p = j.slot, b = pos.b0 + p, x = 2 * pos.x0 + col, y0 = 2 * pos.y0 + j.row0;
          if (b >= a.B || x >= a.W || y0 >= a.H) return;
          float acc[R][2];
          if (kFold) {  // the base conv is in the level-1 filters
#pragma unroll
            for (int o = 0; o < R; ++o) acc[o][0] = acc[o][1] = 0.f;
          } else {
            conv_pair_strip<K, R, (K / 2) % 2 == 1, true>(
                w0f, di + p * pplane + (j.row0 + r) * pw + (col + r), pw, ph - gp - (j.row0 + r), acc);
          }
          // Pixel rows [y0, y0 + n), y0 even, columns x, x + 1 (x even): one coefficient each pair.
          const int n = min(min(R, pth - j.row0), a.H - y0), ncols = min(2, a.W - x), dzplane = th * tw;
          const float* dp = dz + (p * 4 * th + (j.row0 >> 1)) * tw + j.col;
          T* dxp = a.dx + ((int64_t(b) * a.C + c) * a.H + y0) * a.W + x;
#pragma unroll
          for (int o = 0; o < R; o += 2, dp += tw, dxp += 2 * int64_t(a.W)) {
            if (o >= n) break;
            float d[4] = {dp[0], dp[dzplane], dp[2 * dzplane], dp[3 * dzplane]};
            if constexpr (kFuse2) {
              // + dX_1 at this coefficient: level 2's synthesis that the level kernel would have
              // stored (coefficient (cy, cx) of the tile; its origin is even).
              const int cy = (j.row0 >> 1) + (o >> 1), cx = j.col, z2plane = th2 * tw2;
              const float* z2 = dz2 + (p * 4 * th2 + (cy >> 1)) * tw2 + (cx >> 1);
              const float v[4] = {z2[0], z2[z2plane], z2[2 * z2plane], z2[3 * z2plane]};
              d[0] += to_float(from_float<T>(0.5f * synth_child(v, cy & 1, cx & 1)));
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              if (h == 1 && o + 1 >= n) break;
              const float o0 = acc[o + h][0] + 0.5f * synth_child(d, h, 0);
              const float o1 = acc[o + h][1] + 0.5f * synth_child(d, h, 1);
              T* row = dxp + h * int64_t(a.W);
              if (ncols == 2 && a.dx_pairs) {
                store2(row, o0, o1);
              } else {
                row[0] = from_float<T>(o0);
                if (ncols == 2) row[1] = from_float<T>(o1);
              }
            }
          }
        });
      };
      if constexpr (kFixed) {
        // The fixed tile: 4 x 4 pixel strips + synthesis, the strip's rows two coefficient rows and
        // its columns two coefficient columns, all children of one level-2 coefficient. Its 128
        // jobs go to the base-correlation half of the block (threads 128 .. 255), whose
        // correlations are shorter than the level half's (perf note 39).
        constexpr int kJobs = (2 * kFusedBwdTileH / 4) * (2 * kFusedBwdTileW / 4);
        static_assert(kJobs <= kBlockThreads, "one job per thread");
        for_thread_jobs<true, kBlockThreads - kJobs>(kJobs, [&](int e) {
          const StripJob j = strip_job(e, TileDivmod(uint32_t(2 * kFusedBwdTileW / 4)),
                                       TileDivmod(uint32_t(2 * kFusedBwdTileH / 4)), 4);
          const int col = 4 * j.col, b = pos.b0, x = 2 * pos.x0 + col, y0 = 2 * pos.y0 + j.row0;
          if (b >= a.B || x >= a.W || y0 >= a.H) return;
          // The window of pixel (row0, col) starts at (row0 + r, col + r) of the D tile, which
          // starts gp pixels into its rows (pitches and regions multiples of 4 floats).
          constexpr int kGp = kCopy ? 0 : 2 * kR, kOff = (kGp + kR) % 4;
          static_assert(kOff == 0 || kOff == 2, "quad strips start on a pair");
          float acc[4][4];
          conv_quad_strip<K, 4, kOff == 2>(w0f, di + (j.row0 + kR) * pw + col + kR, pw, acc);
          // The synthesis operands are loaded after the convolution, not hoisted into it.
          asm volatile("" ::: "memory");
          const int n = min(4, a.H - y0), ncols = min(4, a.W - x), dzplane = th * tw, z2plane = th2 * tw2;
          const float* dp = dz + (j.row0 >> 1) * tw + 2 * j.col;
          const float* z2 = dz2 + (j.row0 >> 2) * tw2 + j.col;
          const float v[4] = {z2[0], z2[z2plane], z2[2 * z2plane], z2[3 * z2plane]};
          T* dxp = a.dx + ((int64_t(b) * a.C + c) * a.H + y0) * a.W + x;
#pragma unroll
          for (int o = 0; o < 4; o += 2, dp += tw, dxp += 2 * int64_t(a.W)) {
            if (o >= n) break;
            float out[2][4];
#pragma unroll
            for (int w = 0; w < 2; ++w) {  // the row pair's two coefficients; cy even + o / 2
              float d[4] = {dp[w], dp[dzplane + w], dp[2 * dzplane + w], dp[3 * dzplane + w]};
              d[0] += to_float(from_float<T>(0.5f * synth_child(v, o >> 1, w)));
#pragma unroll
              for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int u = 0; u < 2; ++u) out[h][2 * w + u] = acc[o + h][2 * w + u] + 0.5f * synth_child(d, h, u);
            }
            store_rows_2x4(dxp, a.W, out, o + 1 < n, ncols, a.dx_pairs, a.dx_quads);
          }
        });
      } else {
        // 4-row strips: with 8 rows the kernel spills at the 3-blocks-per-SM register bound (the
        // correlation's double totals stay live), and 2 blocks per SM measured 6% slower; with the
        // totals in shared memory, 8 rows fit but gained nothing (docs/wtconv.md, perf note 15).
        dx_conv(std::integral_constant<int, kStripRows>{});
      }
    } else {
      // dx, runtime k: two adjacent level-1 coefficients (a 2 x 4 pixel block) per job, the
      // subband convolutions two outputs at a time and the pixel ones four (conv_adjacent_windows);
      // each output's sums in conv_window's order. Four coefficients per job left half the threads
      // of a 16 x 32 tile idle (docs/wtconv.md, perf note 45). k = 13 and 15 ran one coefficient
      // per thread until note 97: conv_window's two shared loads per multiply-add (the weight and
      // the input) were 70% of that kernel's shared loads at k = 15.
      const int pairs = (tw + 1) / 2;
      // kHalves: each job in two halves on a lane pair (lanes 2m, 2m + 1), half h taking subbands
      // 2h and 2h + 1 and pixel row h (items of at most half a block's worth of jobs:
      // bwd_dx_half_jobs). The halves run the same code on their own data, so the pair does not
      // diverge; they trade their two subband results with one shuffle each, and each window keeps
      // its vector loads and its sums' order (the same bits as whole jobs).
      constexpr int kJobParts = kHalves ? 2 : 1, kSubbands = 4 / kJobParts;
      for (int e = threadIdx.x; e < kJobParts * np * th * pairs; e += blockDim.x) {
        const int job = e / kJobParts, h = e % kJobParts;
        const int p = job / (th * pairs), rem = job % (th * pairs), ty = rem / pairs, tx0 = 2 * (rem % pairs);
        const int b = pos.b0 + p, qy = pos.y0 + ty, qx0 = pos.x0 + tx0;
        if (b >= a.B || qy >= a.h1 || qx0 >= a.w1g) continue;  // both halves alike
        const int ncols = min(min(2, tw - tx0), a.w1g - qx0);
        float d[4][2];  // [subband][coefficient]
        const float* gsrc = gs + p * 4 * plane + ty * lp + tx0;  // the four subband planes share the phase
        const int t0 = kSubbands * h;  // this lane's first subband
        // The window passes at a compile-time k where it can be (with_compiled_kernel_size).
        with_compiled_k<K, kOnly>(k, [&](const int kw) {
          with_window_loads(window_vector_width(kw, lp, 2), gsrc, [&](auto loads) {
#pragma unroll
            for (int t = 0; t < kSubbands; ++t)
              adjacent_windows<2>(loads, w1f + (t0 + t) * fs, wp, gsrc + (t0 + t) * plane, lp, kw, ncols, d[t]);
          });
        });
        if constexpr (kHalves) {
          const unsigned pair_mask = 3u << (threadIdx.x & 30);
#pragma unroll
          for (int t = 0; t < 2; ++t)
#pragma unroll
            for (int u = 0; u < 2; ++u) {
              const float mine = d[t][u], other = __shfl_xor_sync(pair_mask, mine, 1);
              d[t][u] = h ? other : mine;
              d[2 + t][u] = h ? mine : other;
            }
        }
        const int64_t pl = int64_t(b) * a.C + c;
        if (a.dxin) {
          const T* res = a.dxin + pl * a.h1 * a.w1g + int64_t(qy) * a.w1g + qx0;
#pragma unroll
          for (int u = 0; u < 2; ++u)
            if (u < ncols) d[0][u] += to_float(res[u]);
        }
        const int npix = min(2 * ncols, a.W - 2 * qx0);  // pixels of a row inside the plane
        // Pixel rows: the job's two, or a half's own.
        const int dy0 = kHalves ? h : 0, dy1 = kHalves ? h + 1 : 2;
#pragma unroll
        for (int dy = dy0; dy < dy1; ++dy) {
          const int y = 2 * qy + dy;
          if (y >= a.H) break;
          const float* drow = ds + p * pplane + (2 * ty + dy + r) * pw + (2 * tx0 + r);
          float base[4] = {0.f, 0.f, 0.f, 0.f};  // folded: the base conv is in the level-1 filters
          if (!kFold)
            with_compiled_k<K, kOnly>(k, [&](const int kw) {
              conv_adjacent_windows_by<4>(window_vector_width(kw, pw, 4), w0f, wp, drow, pw, kw, npix, base);
            });
          T* dst = a.dx + pl * a.H * a.W + int64_t(y) * a.W + 2 * qx0;
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            if (u >= ncols) break;
            const float du[4] = {d[0][u], d[1][u], d[2][u], d[3][u]};
#pragma unroll
            for (int dx = 0; dx < 2; ++dx)
              if (2 * u + dx < npix) dst[2 * u + dx] = from_float<T>(base[2 * u + dx] + 0.5f * synth_child(du, dy, dx));
          }
        }
      }
    }
    const CorrRole role = corr_role(opaque_thread_index());
    const bool base_job = role.base_job, l2_job = role.l2_job;
    const int part = role.part, sb = role.sb, ci = role.ci;
    if (role.corr_thread) {
      float acc[KM];
#pragma unroll
      for (int j = 0; j < KM; ++j) acc[j] = 0.f;
      float dsum = 0.f;
      with_compiled_kernel_size<K, kOnly>(k, [&](auto kc) {
        using KC = decltype(kc);  // K, or the runtime k's ring (runtime-k instance)
        if (!base_job) {
          // Level 1, or (fused) level 2 with the same loop over its planes.
          const float* yb = l2_job ? y2s : ys;
          const float* gb = l2_job ? g2s : gs;
          const int lplane = l2_job ? eh2 * ew2 : plane, lpitch = l2_job ? ew2 : lp;
          const int row_parts = l2_job ? parts - lparts : kFold ? 2 * lparts : lparts;
          for_strided_rows<kFixed>(role.row_part, row_parts, l2_job ? th2 : th, np, [&](int p, int ty) {
            const float* yrow = yb + (p * 4 + sb) * lplane + (ty + ci) * lpitch;
            const float* grow = gb + (p * 4 + sb) * lplane + (ty + r) * lpitch + r;
            if constexpr (K > 0)
              corr_row_maybe_quads<K, 0, kR % 4, false, kFixed>(l2_job ? l2_quads : level_quads, acc, yrow, grow,
                                                                 l2_job ? tw2 : tw, k);
            else
              corr_row<KC::value>(acc, yrow, grow, tw, k);
            // Folded: sum(D) is twice the sum of G_1's LL over the tile (G_1 = dy / 2), on one lane
            // per warp of subband 0.
            if (kFold && sb == 0 && ci == 0)
              for (int n = 0; n < tw; ++n) dsum += grow[n];
          });
        } else {
          for_strided_rows<kFixed>(sb + 4 * part, 4 * parts, 2 * th, np, [&](int p, int py) {
            const float* xrow = xi + p * pplane + (py + r + ci) * pw + r;
            const float* drow = di + p * pplane + (py + 2 * r) * pw + 2 * r;
            if constexpr (K > 0)
              corr_row_maybe_quads<K, kR % 4, (2 * kR) % 4, true>(base_quads, acc, xrow, drow, 2 * tw, k, &dsum);
            else
              corr_row<KC::value, true>(acc, xrow, drow, 2 * tw, k, &dsum);
          });
        }
      });
#pragma unroll
      for (int j = 0; j < KM; ++j) tot[j] += double(acc[j]);
      tot_sum += double(dsum);
    }
  }
  __syncthreads();
  const CorrRole role = corr_role(int(threadIdx.x));
  if (role.corr_thread) {
#pragma unroll
    for (int j = 0; j < KM; ++j)
      if (K > 0 || j < k) red[(role.part * jobs + role.job) * k + j] = float(tot[j]);
    if (role.base_job && role.ci == 0) red_sum[role.part * 4 + role.sb] = float(tot_sum);
    // Folded: the sums of G_1's LL, slot 0 of a part from the first half, slot 1 from the second.
    if (kFold && role.sb == 0 && role.ci == 0) red_sum[role.part * 4 + (role.job >= 4 * k)] = float(tot_sum);
  }
  __syncthreads();
  // Partial layout per (channel, split): [0, kk) C0, [kk] sum(D), [kk + 1, 5kk + 1) C_1.
  // C_1t[i][j] of the block; folded, the second half's sums too (in the base jobs' slots).
  const auto level_corr = [&](int t, int i, int j) {
    float sum = 0.f;
    for (int q = 0; q < lparts; ++q) {
      sum += red[(q * jobs + t * k + i) * k + j];
      if (kFold) sum += red[(q * jobs + 4 * k + t * k + i) * k + j];
    }
    return sum;
  };
  float* out = a.partial + (int64_t(c) * a.g.splits + split) * (5 * kk + 1);
  for (int e = threadIdx.x; e < 5 * kk + 1; e += blockDim.x) {
    float sum = 0.f;
    if (e < kk) {
      const int i = e / k, j = e % k;
      if (kFold) {  // C0 from the level-1 correlations (folded_corr_tap)
        const FoldedCorrTap f = folded_corr_tap(k, i, j);
        for (int t = 0; t < 4; ++t) {
          const float ct = level_corr(t, f.u, f.v);
          sum += fold_sign_negative(t, f.pa, f.pb) ? -ct : ct;
        }
      } else {
        for (int u = 0; u < 4; ++u)
          for (int q = 0; q < parts; ++q) sum += red[(q * jobs + 4 * k + u * k + i) * k + j];
      }
    } else if (e == kk) {
      if (kFold)
        for (int q = 0; q < parts; ++q) sum += 2.f * (red_sum[q * 4] + red_sum[q * 4 + 1]);
      else
        for (int u = 0; u < 4; ++u)
          for (int q = 0; q < parts; ++q) sum += red_sum[q * 4 + u];
    } else {
      const int f = e - kk - 1;
      sum = level_corr(f / kk, (f / k) % k, f % k);
    }
    out[e] = sum;
  }
  if constexpr (kFuse2) {  // level 2's partials, as the level kernel lays them out
    float* out2 = a.partial2 + (int64_t(c) * a.g.splits + split) * 4 * kk;
    for (int e = threadIdx.x; e < 4 * kk; e += blockDim.x) {
      float sum = 0.f;
      for (int q = 0; q < parts - lparts; ++q) sum += red[(q * jobs + 8 * k) * k + e];
      out2[e] = sum;
    }
  }
}

// Whether a fused backward takes the compile-time tile instance: its tile is kFusedBwdTileH x
// kFusedBwdTileW coefficients with one plane per item, and the pitch the kernel then derives is
// the one prepare_backward_base set up.
template <typename T>
bool bwd_fused_fixed_tile(const BwdBaseArgs<T>& a) {
  if (a.g.th != kFusedBwdTileH || a.g.tw != kFusedBwdTileW || a.g.np != 1) return false;
  const BwdFusedLayout l = bwd_fused_layout(a.k, a.g.th, a.g.tw, 1, int(sizeof(T)));
  return a.pitch == l.pitch && bwd_fused_quads_ok(l, a.k, a.g.th, a.g.tw);
}

template <typename T>
cudaError_t launch_backward_base(const BwdBaseArgs<T>& args, size_t smem, cudaStream_t stream) {
  BwdBaseArgs<T> a = args;
  {
    const int r = a.k / 2, th = a.g.th, tw = a.g.tw, eh = th + 2 * r, ew = tw + 2 * r;
    // FastDivmod here, where the other WTConv kernels take TileDivmod: with TileDivmod this kernel's
    // fp16 build ran 6% slower (docs/wtconv.md, perf note 25).
    a.quad_vec = std::min(quad_load_width(a.x, a.W), quad_load_width(a.dy, a.W));
    // Generic staging: staged pixels per plane (unpadded) and per row, their Haar blocks likewise.
    const StagedRegion sr = staged_region(a.g.tiles_y == 1 && a.g.tiles_x == 1 && a.quad_vec != 4, a.H, a.W, r, 2 * eh, 2 * ew);
    a.plane_tile = sr.plane;
    staged_region_divisors(sr, a.pplane, a.prow, a.plane, a.row);
    a.qcols = FastDivmod(uint32_t(tw));
    const int qr = strip_rows(a.k, th), pr = kStripRows;
    a.qstrips = strip_count<FastDivmod>(th, qr);
    a.pstrips = strip_count<FastDivmod>(2 * th, pr);
    a.quads = quad_divisors<FastDivmod>(eh, 2 * ew, bwd_quad_lead(tw, r));
    a.pair_sub = tw % 2 == 0;  // even ew and plane: 8-byte aligned G_1 rows
    a.dx_pairs = a.W % 2 == 0 && reinterpret_cast<uintptr_t>(a.dx) % (2 * sizeof(T)) == 0;
    a.dx_quads = a.W % 4 == 0 && reinterpret_cast<uintptr_t>(a.dx) % (4 * sizeof(T)) == 0;
    a.qcols2 = pair_count<FastDivmod>(tw);
    a.qstrips4 = strip_count<FastDivmod>(th, kStripRows);
  }
  const size_t launch_smem = base_launch_smem(a, smem);
  const unsigned blocks = unsigned(int64_t(a.C) * a.g.splits);
  return dispatch_kernel_size(a.k, [&](auto kc, auto only) {
    constexpr int K = decltype(kc)::value, kOnly = decltype(only)::value;
    // The fused instances (every dtype; the plan fuses only k = 5: bwd_fused_smem).
    if constexpr (K != 0 && (K / 2) % 2 == 0) {
      if (a.fuse2 && bwd_fused_fixed_tile(a))
        return launch_with_smem(backward_base_kernel<T, K, true, true, true>, blocks, launch_smem, stream, a);
      if (a.fuse2) return launch_with_smem(backward_base_kernel<T, K, true, true, false>, blocks, launch_smem, stream, a);
    }
    if (a.fuse2) return cudaErrorNotSupported;  // the plan fuses only sizes with that instance (bwd_fused_smem)
    // The unfused instances, folded (stride 2) or not.
    const auto unfused = [&](auto fold_tag) {
      constexpr bool kFold = decltype(fold_tag)::value;
      // An unfused TMA instance where the tiles can start 16-byte aligned (fp32, even r: k = 5 among
      // the specialised sizes). With the boxes copied into the tiles instead (k = 3, 7; 16-bit) the
      // spills it added cost more than the staging it saved (docs/wtconv.md, perf note 29).
      if constexpr (std::is_same<T, float>::value && K != 0 && (K / 2) % 2 == 0) {
        if (a.tma)
          return launch_with_smem(backward_base_kernel<T, K, true, false, false, false, 0, false, kFold>, blocks,
                                  launch_smem, stream, a);
      }
      // The plane-tile or tiled instance (kOnly: the k = 1 ones, bwd_base_blocks_per_sm), either with
      // its dx jobs in halves at runtime k.
      const auto plane_or_tiled = [&](auto halves) {
        constexpr bool kHalves = decltype(halves)::value;
        if (a.plane_tile)
          return launch_with_smem(backward_base_kernel<T, K, false, false, false, true, kOnly, kHalves, kFold>, blocks,
                                  smem, stream, a);
        return launch_with_smem(backward_base_kernel<T, K, false, false, false, false, kOnly, kHalves, kFold>, blocks,
                                smem, stream, a);
      };
      if constexpr (K == 0 && kOnly == 0) {
        if (bwd_dx_half_jobs(a.k, a.g.th, a.g.tw, a.g.np)) return plane_or_tiled(std::true_type{});
      }
      return plane_or_tiled(std::false_type{});
    };
    return a.fold_base ? unfused(std::true_type{}) : unfused(std::false_type{});
  });
}

// The x and dy tensor maps, boxes of box_w x box_h x 1 x np; false when either cannot be encoded.
template <typename T>
bool encode_bwd_maps(BwdBaseArgs<T>& a, int box_w, int box_h) {
  return encode_plane_box_map(&a.xmap, a.x, int(sizeof(T)), a.W, a.H, a.C, a.B, box_w, box_h, a.g.np) &&
         encode_plane_box_map(&a.dmap, a.dy, int(sizeof(T)), a.W, a.H, a.C, a.B, box_w, box_h, a.g.np);
}

template <typename T>
void prepare_backward_base(BwdBaseArgs<T>& a) {
  a.tma = a.fuse2 = false;
  const int r = a.k / 2;
  if (a.fused_smem > 0 && a.w2 != nullptr && a.s2 != nullptr && a.partial2 != nullptr) {
    const BwdFusedLayout l = bwd_fused_layout(a.k, a.g.th, a.g.tw, a.g.np, int(sizeof(T)));
    if (encode_bwd_maps(a, l.box_pitch, l.box_rows)) {
      a.tma = a.fuse2 = true;
      a.pitch = l.pitch;
      a.fplane = TileDivmod(uint32_t(l.eh2 * l.ew2));
      a.frow = TileDivmod(uint32_t(l.ew2));
      a.l2cols = pair_count<FastDivmod>(l.tw2);
      a.l2strips = strip_count<FastDivmod>(l.th2, kStripRows);
      return;
    }
  }
  if (a.tma_smem > 0) {
    const BwdBaseTmaLayout l = bwd_base_tma_layout(a.k, a.g.th, a.g.tw, a.g.np, a.pitch);
    a.tma = encode_bwd_maps(a, a.pitch, l.ph);
    if (a.tma) {
      const int ew = a.g.tw + 2 * r;
      a.hplane = TileDivmod(uint32_t(l.ph / 2 * (ew / 2)));
      a.hrow = TileDivmod(uint32_t(ew / 2));
    }
  }
}

template void prepare_backward_base<float>(BwdBaseArgs<float>&);
template void prepare_backward_base<__half>(BwdBaseArgs<__half>&);
template void prepare_backward_base<__nv_bfloat16>(BwdBaseArgs<__nv_bfloat16>&);
template cudaError_t launch_backward_base<float>(const BwdBaseArgs<float>&, size_t, cudaStream_t);
template cudaError_t launch_backward_base<__half>(const BwdBaseArgs<__half>&, size_t, cudaStream_t);
template cudaError_t launch_backward_base<__nv_bfloat16>(const BwdBaseArgs<__nv_bfloat16>&, size_t, cudaStream_t);

}  // namespace wtconv_detail
}  // namespace winconv
