// The level kernels' tiles: staging of level-l coefficient blocks (from a stored chain or from
// the activations), the subband convolutions of an item and its synthesis pass.
#pragma once

#include <cstdint>

#include "cuda/common/fast_divmod.cuh"
#include "wtconv_haar.cuh"
#include "wtconv_items.cuh"
#include "wtconv_layouts.h"
#include "wtconv_quad_staging.cuh"
#include "wtconv_staging.cuh"
#include "wtconv_strips.cuh"
#include "wtconv_values.cuh"
#include "wtconv_windows.cuh"

namespace winconv {
namespace wtconv_detail {

// Index divisors of a level kernel's tile (set on the host by level_divisors): halo plane
// (eh*ew) and row (ew), coefficient tile (th*tw) and row (tw), strips per subband column.
struct LevelDivisors {
  TileDivmod plane, row, cell, col, strips;
  TileDivmod plane2, row2;  // block pairs: eh * (ew / 2) and ew / 2 (even ew; else unused)
  TileDivmod iplane, irow;  // kPlane instances: the grid's coefficients, at most the interior (staged_block)
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

}  // namespace wtconv_detail
}  // namespace winconv
