// WTConv launch plan: tile shapes, block splits and workspace layout, derived from the problem
// alone (host-only, plain C++, so the workspace queries also work in a CPU-only build).
//
// Every kernel is "channel-major": block j handles channel c = j / splits and a fixed set of work
// items (a tile of one level grid over np planes (b, c) of the same channel; every splits-th item
// from split, or a contiguous range: block_items), so the per-channel weights sit in shared memory
// once and the per-channel gradient partials of one block are summed in a fixed order. splits
// depends only on the problem, which keeps results bit-identical from run to run.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "winconv/wtconv.h"
#include "wtconv_layouts.h"

namespace winconv {
namespace wtconv_detail {

constexpr int kTargetBlocks = 2048;         // ~15 blocks per SM on a 132-SM H200
constexpr size_t kWorkspaceAlign = 256;

struct WtconvPlan {
  int64_t B = 1, C = 1, H = 1, W = 1, Ho = 1, Wo = 1;
  int k = 1, r = 0, L = 1, stride = 1;
  int64_t hl[kWtconvMaxLevels + 1] = {}, wl[kWtconvMaxLevels + 1] = {};  // level grids; [0] = H, W
  // Forward: X_1..X_{L-1} (raw LL chain), R_1..R_{L-1} (synthesised deeper levels).
  size_t fwd_x[kWtconvMaxLevels + 1] = {}, fwd_r[kWtconvMaxLevels + 1] = {}, fwd_bytes = 0;
  // Backward: X chain, LL chain of G = Haar cascade of dy, dX_1..dX_{L-1} (level 1 of all three
  // stored in the activation type, chain_bytes per element; deeper levels in float), gradient
  // partials.
  size_t chain_bytes = 4;
  size_t bwd_x[kWtconvMaxLevels + 1] = {}, bwd_g[kWtconvMaxLevels + 1] = {},
         bwd_dx[kWtconvMaxLevels + 1] = {}, bwd_part[kWtconvMaxLevels + 1] = {}, bwd_bytes = 0;
  // Level 2 reads the activations (x; the backward also dy) and forms X_1 = LL(x) (G_1 = LL(D))
  // on chip instead of reading a stored chain; X_1 (G_1) has no workspace, and no cascade runs
  // unless L >= 3 (level2_reads_activations).
  bool fwd_level2_direct = false, bwd_level2_direct = false;
  // Whether the forward (backward) kernel of level l >= 2 reads the activations.
  bool level_reads_activations(int l, bool backward) const {
    return l == 2 && (backward ? bwd_level2_direct : fwd_level2_direct);
  }
  WtconvTile fwd_base, bwd_base;                              // base + level 1
  size_t fwd_base_tma_smem = 0;  // > 0: the forward base may stage x with TMA (fwd_base_tma_smem())
  size_t fwd_fused_smem = 0;     // > 0: an L = 2 forward may fuse level 2 into the base kernel
  size_t bwd_base_tma_smem = 0;  // > 0: the backward base may stage x and dy with TMA
  size_t bwd_fused_smem = 0;     // > 0: an L = 2 backward may fuse level 2 into the base kernel
  WtconvTile fwd_level[kWtconvMaxLevels + 1], bwd_level[kWtconvMaxLevels + 1];  // l >= 2
  // The kernel size the level kernels of level l >= 2 run at: the central kl x kl taps of the
  // k x k filters (level_kernel_size).
  int kl[kWtconvMaxLevels + 1] = {};
};

// Pixels of x that one block's items may cover, at most. A block runs its items one after the
// other, so the last wave of a launch lasts as long as a block: with kTargetBlocks alone, big_L2
// (16 x 128 x 512^2) gave each backward base block 128 items, 2048 blocks in 5.2 waves of 396, and
// the sixth ran a whole block's time on 68 SMs. With this bound a large problem has many short
// blocks and the partly filled last wave is short (docs/wtconv.md, perf note 51). Only problems of
// more than kTargetBlocks x kMaxBlockPixels (1.3e8) elements reach it.
constexpr int64_t kMaxBlockPixels = 65536;

// Items and splits of a tile over a gh x gw grid whose cells count as cell_pixels pixels each: the
// pixels of x they cover in the base kernels (the forward's outputs s^2, the backward's level-1
// coefficients 4), and 2 in the level kernels, whose four subband convolutions per coefficient are
// about half of what a level-1 coefficient costs the base kernels.
inline void finish_tile(WtconvTile& t, int64_t B, int64_t C, int64_t gh, int64_t gw, int64_t cell_pixels) {
  // The kernels form plane indices b0 + p (p < np) in int: the last group's must stay below 2^31
  // (only batches near 2^31 with planes per item that do not divide 2^31 need fewer).
  while (t.np > 1 && ceil_div(B, t.np) * t.np > (int64_t(1) << 31)) --t.np;
  t.tiles_y = int(ceil_div(gh, t.th));
  t.tiles_x = int(ceil_div(gw, t.tw));
  t.bgroups = int(ceil_div(B, t.np));
  t.items = int64_t(t.tiles_y) * t.tiles_x * t.bgroups;
  const int64_t item_pixels = int64_t(t.np) * t.th * t.tw * cell_pixels;
  // item_pixels >= kMaxBlockPixels: a block per item already (and items * item_pixels, at large
  // strides, would overflow int64).
  const int64_t by_pixels =
      item_pixels >= kMaxBlockPixels ? t.items : ceil_div(t.items * item_pixels, kMaxBlockPixels);
  int64_t want = std::max(ceil_div(kTargetBlocks, C), by_pixels);
  want = std::min(want, std::max<int64_t>(1, int64_t(INT32_MAX) / C));  // grid.x = C x splits
  if (want > t.items) want = t.items;
  if (want < 1) want = 1;
  t.splits = int(want);
}

// One step down: fewer planes per block, then halve the longer side (rows on a tie).
inline void shrink_tile(WtconvTile& t) {
  if (t.np > 1) t.np /= 2;
  else if (t.th >= t.tw && t.th > 1) t.th /= 2;
  else if (t.tw > 1) t.tw /= 2;
}

// t.np = want planes per item (clamped to 1..B), then halve np, else the longer tile side, until
// bytes() (the shared memory of t) fits the budget.
template <typename Bytes>
inline void fit_tile(WtconvTile& t, int64_t B, int64_t want, Bytes bytes) {
  if (want > B) want = B;
  if (want < 1) want = 1;
  t.np = int(want);
  while (bytes() > kSmemBudget && (t.np > 1 || t.th * t.tw > 1)) shrink_tile(t);
}

// After fit_tile with the rule's target: up to `want` planes per item (a scaled target, at most B),
// never fewer than the rule's, and fewer while the larger item leaves the shared-memory budget or
// costs the kernel a resident block (bound: its launch bound) that the rule's item keeps.
template <typename Bytes>
inline void scale_planes(WtconvTile& t, int64_t B, int64_t want, int bound, Bytes bytes) {
  const int rule = t.np;
  const size_t blocks = resident_blocks(bytes(), bound);
  t.np = int(std::max<int64_t>(rule, std::min(want, B)));
  while (t.np > rule && (bytes() > kSmemBudget || resident_blocks(bytes(), bound) < blocks)) --t.np;
}

// Exactly `planes` per item (at most B), fewer only where the item would leave the shared-memory
// budget: a sweep's request (WtconvTileHint::fwd_np, bwd_np), bypassing every rule.
template <typename Bytes>
inline void take_planes(WtconvTile& t, int64_t B, int planes, Bytes bytes) {
  t.np = int(std::min<int64_t>(planes, B));
  while (t.np > 1 && bytes() > kSmemBudget) --t.np;
}

// An item's fixed cost in the base kernels at k <= 5, in outputs (the backward's, in level-1
// coefficients, is a quarter), fitted to note 118's measurements: wtcnx_s2 lost at 8 planes per item
// against 4, and wtcnx_s1, z5 and z8 gained at 2 against 1. The fixed cost (a barrier, the first
// staging not hidden behind work) does not grow with k while an output's work does (k^2 FMAs), so
// above k = 5 it shrinks as 25 / k^2 outputs (item_overhead_cells).
constexpr int64_t kItemOverheadOutputs = 512;

inline int64_t item_overhead_cells(int k, int64_t at_k5) { return k <= 5 ? at_k5 : at_k5 * 25 / (int64_t(k) * k); }

// What a channel's busiest block spends on its items, in cells (outputs or coefficients):
// ceil(items / splits) items, each its np planes of th x tw cells plus the fixed cost `overhead`,
// with the items and splits finish_tile gives.
inline int64_t busiest_block_cells(WtconvTile t, int64_t B, int64_t C, int64_t gh, int64_t gw, int64_t cell_pixels,
                                   int64_t overhead) {
  finish_tile(t, B, C, gh, gw, cell_pixels);
  return ceil_div(t.items, t.splits) * (int64_t(t.np) * t.th * t.tw + overhead);
}

// scale_planes for the rule's own tiles: of the planes per item from the rule's up to `want`
// that keep the budget and the resident blocks, the one whose busiest block costs least (cost();
// the fewest planes on a tie), taken only when it costs at least 5% less than the rule's. Fewer,
// larger items over the same splits can leave the last blocks' share uneven: wtcnx_s2's backward
// at 8 planes per item ran 8 items over 6 blocks. The margin stands for what the cost leaves out:
// z11 (k = 11) modelled 3% cheaper at 6 planes per item than at 4 and its forward ran 4.5% slower.
template <typename Bytes, typename Cost>
inline void balance_planes(WtconvTile& t, int64_t B, int64_t want, int bound, Bytes bytes, Cost cost) {
  const int rule = t.np;
  const size_t blocks = resident_blocks(bytes(), bound);
  const int64_t rule_cost = cost();
  int best = rule;
  int64_t best_cost = rule_cost;
  for (int np = rule + 1; np <= std::min(want, B); ++np) {
    t.np = np;
    if (bytes() > kSmemBudget || resident_blocks(bytes(), bound) < blocks) break;
    const int64_t c = cost();
    if (c < best_cost) best = np, best_cost = c;
  }
  t.np = 20 * best_cost <= 19 * rule_cost ? best : rule;
}

// balance_planes' cost of a base tile: its busiest block, the forward's in outputs (s^2 pixels
// each), the backward's in level-1 coefficients, each with its fixed cost per item.
inline int64_t base_tile_cost(const WtconvTile& t, bool backward, int64_t B, int64_t C, int64_t gh, int64_t gw, int k,
                              int s = 1) {
  return backward ? busiest_block_cells(t, B, C, gh, gw, 4, item_overhead_cells(k, kItemOverheadOutputs / 4))
                  : busiest_block_cells(t, B, C, gh, gw, int64_t(s) * s, item_overhead_cells(k, kItemOverheadOutputs));
}

// The most planes per item a scaled or balanced base tile takes, in multiples of the rule's
// target (fit_tile: 1024 outputs, 256 level-1 coefficients).
constexpr int kItemScale = 2;

// How a base tile's planes per item go past the rule's target: kRule does not (a tile asked for
// through the hint); kScaled takes up to kItemScale times it while the kernel keeps its resident
// blocks (scale_planes: the sized tiles, note 118); kBalanced takes, within the same bounds, the
// count whose busiest block costs least (balance_planes: the rule's own tiles, note 119).
enum class ItemPlanes { kRule, kScaled, kBalanced };

// log2 of the square tile that holds a whole plane for the cascade's kPlane path: the smallest
// power of two covering the plane and at least 2^levels (every level of the tile stays aligned),
// or -1 when the plane is larger than 32 x 32. Larger planes take the band path
// (wtconv_haar_cascade.cu), which has no tile: the 8- to 32-wide tiles they took before, of least
// tiles x (area + 13), ran issue-bound (docs/wtconv.md, perf notes 90, 94 and 108).
inline int cascade_plane_tile_log2(int64_t hin, int64_t win, int levels) {
  int lt = levels;
  while (lt <= 5 && ((int64_t(1) << lt) < hin || (int64_t(1) << lt) < win)) ++lt;
  return lt <= 5 ? lt : -1;
}

inline WtconvTile pick_level_tile(bool backward, int64_t B, int64_t C, int64_t gh, int64_t gw, int k,
                                  bool direct = false) {
  WtconvTile t;
  // 16 x 32 when level 2 reads the activations (it stages 4x its tile in pixels, halo included):
  // big_L2 train fp32 -3.7%, fp16 -6.2%; 32 x 32 was as fast on fp32, 2% slower on fp16
  // (docs/wtconv.md, perf note 23).
  t.th = pow2_at_least(gh, 16);
  t.tw = pow2_at_least(gw, direct ? 32 : 16);
  const auto bytes = [&] { return level_smem_floats(backward, k, t.th, t.tw, t.np) * 4; };
  fit_tile(t, B, kBlockThreads / (t.th * t.tw), bytes);
  t.smem = bytes();
  finish_tile(t, B, C, gh, gw, 2);
  return t;
}

// The forward base tile's largest rows at stride s (twice that in columns): 32 output rows, fewer
// at larger strides, whose outputs each stage s^2 pixels.
inline int fwd_base_tile_cap(int s) { return s >= 32 ? 1 : 32 / s; }

// th, tw > 0: that tile instead of the rule's (before the shared-memory fit); for tile sweeps.
// items: how the planes per item go past the rule's 1024 outputs (ItemPlanes).
// planes > 0: that many planes per item instead (take_planes); for sweeps.
inline WtconvTile pick_fwd_base_tile(int64_t B, int64_t C, int64_t Ho, int64_t Wo, int k, int s, int th = 0,
                                     int tw = 0, ItemPlanes items = ItemPlanes::kRule, int planes = 0) {
  WtconvTile t;
  const int cap = fwd_base_tile_cap(s);
  // Twice as wide as tall: halves the halo share of the staging and the per-item overhead
  // (32 x 64 outputs measured 20% faster than 32 x 32 on the large shapes).
  t.th = th > 0 ? th : pow2_at_least(Ho, cap);
  t.tw = tw > 0 ? tw : pow2_at_least(Wo, 2 * cap);
  const auto bytes = [&] { return fwd_base_smem_floats(k, s, t.th, t.tw, t.np) * 4; };
  fit_tile(t, B, 1024 / (t.th * t.tw), bytes);
  const int64_t want = kItemScale * 1024 / (t.th * t.tw);
  if (planes > 0)
    take_planes(t, B, planes, bytes);
  else if (items == ItemPlanes::kBalanced)
    balance_planes(t, B, want, fwd_base_blocks_per_sm(k), bytes,
                   [&] { return base_tile_cost(t, false, B, C, Ho, Wo, k, s); });
  else if (items == ItemPlanes::kScaled)
    scale_planes(t, B, want, fwd_base_blocks_per_sm(k), bytes);
  t.smem = bytes();
  finish_tile(t, B, C, Ho, Wo, int64_t(s) * s);
  return t;
}

// items: how the planes per item go past the rule's 256 level-1 coefficients (ItemPlanes).
// planes > 0: that many planes per item (take_planes; the runtime-k resident-block step skipped).
inline WtconvTile pick_bwd_base_tile(int64_t B, int64_t C, int64_t h1, int64_t w1, int k, int th = 0, int tw = 0,
                                     ItemPlanes items = ItemPlanes::kRule, int planes = 0) {
  WtconvTile t;
  // 16 x 32 coefficients (32 x 64 pixels), wide for the same reason as the forward tile.
  t.th = th > 0 ? th : pow2_at_least(h1, 16);
  t.tw = tw > 0 ? tw : pow2_at_least(w1, 32);
  const auto bytes = [&](int pitch) { return bwd_base_smem_floats(k, t.th, t.tw, t.np, pitch) * 4; };
  const auto plain = [&] { return 2 * (t.tw + 2 * (k / 2)); };
  fit_tile(t, B, kBlockThreads / (t.th * t.tw), [&] { return bytes(plain()); });
  const int bound = bwd_base_blocks_per_sm(k);
  const int64_t want = kItemScale * kBlockThreads / (t.th * t.tw);
  if (planes > 0)
    take_planes(t, B, planes, [&] { return bytes(plain()); });
  else if (items == ItemPlanes::kBalanced)
    balance_planes(t, B, want, bound, [&] { return bytes(plain()); },
                   [&] { return base_tile_cost(t, true, B, C, h1, w1, k); });
  else if (items == ItemPlanes::kScaled)
    scale_planes(t, B, want, bound, [&] { return bytes(plain()); });
  // The runtime-k instance takes the largest tile that keeps its launch bound's resident blocks
  // (docs/wtconv.md, perf notes 46 and 97).
  if (!specialised_kernel_size(k) && planes == 0)
    while (resident_blocks(bytes(plain()), bound) < size_t(bound) && (t.np > 1 || t.th * t.tw > 1)) shrink_tile(t);
  // Padded rows unless the padding costs a resident block (many small planes per block) or
  // leaves the budget.
  const int padded = bwd_pixel_pitch(t.tw + 2 * (k / 2));
  const bool pad = layout_keeps_blocks(bytes(padded), bytes(plain()), bound);
  t.pixel_pitch = pad ? padded : plain();
  t.smem = bytes(t.pixel_pitch);
  finish_tile(t, B, C, h1, w1, 4);
  return t;
}

// When L == 2 the chain is X_1 alone and only the level-2 kernel reads it. Storing it costs a
// cascade launch that reads x and writes X_1, which the level kernel reads back: N + N/4 + N/4
// elements for fp32 (N = x's elements), against N when the level kernel reads x itself and forms
// X_1 on chip (its halo, four times larger in pixels, is re-read mostly from L2). With L >= 3 a
// cascade must read x anyway for X_2.., and X_1 is then the cheaper input of level 2. The
// backward does the same for G_1 = LL(dy) (it runs at stride 1 only: a strided backward runs on
// the full grid, WtconvRun below). With 16-bit activations (esize 2) the backward's level 2 reads
// x and dy at every L >= 2, and its cascades write X_2.. and G_2.. alone: a stored X_1 and G_1
// would be rounded to 16 bits, a 2^-9 error (bf16) in every level >= 2 gradient term that gradient
// sums with cancellation (small grids, few planes) lifted above 1e-2 relative error, and storing
// them in float instead raised the step's peak memory above the official fused module's
// (docs/wtconv.md, notes 56 and 57). Read from x and dy they are formed in float, and need no
// workspace.
inline bool level2_reads_activations(int levels, bool backward, int esize = 4) {
  if (!backward) return levels == 2;
  return levels == 2 || (levels >= 2 && esize == 2);
}

// Splits of level l's gradient partials: the level kernel's, or for level 2 of a backward that may
// fuse it the larger of those and the base kernel's (the fused kernel writes one per base block;
// the workspace holds either, since a misaligned dy or x falls back to the level kernel).
inline int bwd_level_partial_splits(const WtconvPlan& plan, int l) {
  const int n = plan.bwd_level[l].splits;
  return l == 2 && plan.bwd_fused_smem > 0 && plan.bwd_base.splits > n ? plan.bwd_base.splits : n;
}

// The share of a tiling's computed outputs (or coefficients) that lie inside the gh x gw grid.
inline double tile_coverage(int64_t gh, int64_t gw, int th, int tw) {
  return double(gh) * double(gw) / (double(ceil_div(gh, th) * th) * double(ceil_div(gw, tw) * tw));
}
// A base tile sized to the grid it covers poorly (under kFitCoverage of its computed outputs or
// coefficients inside the gh x gw grid: a grid just past a multiple of the power-of-two tile): the
// same number of tiles along each axis, each the grid's extent over that count rounded up to whole
// units (forward: 8 x 8 outputs, backward: 4 x 4 level-1 coefficients). The items stay as many and
// each computes less outside the grid. Measured on the H200 (tile sweep, fit mode; docs/wtconv.md,
// note 78) on eight random planes of 41-61% coverage, k = 3 to 9: forward 0.85-0.97 and backward
// 0.86-0.93 of the rule's time before. Finer units lost: forward tiles of 28 rows ran 9-10% slower
// than 32. Tiles with one more item along an axis lost too. The runtime-k backward (k = 1, 9..15)
// takes its own rows unit and skips some widths (runtime_k_bwd_fit_width_ok).
constexpr double kFitCoverage = 0.65;
constexpr int kFwdFitUnit = 8, kBwdFitUnit = 4, kRuntimeKBwdFitRows = 2, kFoldedFwdFitUnit = 4;
// A sized tile holds fewer outputs than the power-of-two tile it replaces (z1's 9 x 65 plane: 16 x
// 40, where the rule's 1024 outputs per item gave one plane), and an item of one small tile leaves
// most of the block's threads idle in its strip phases: 80 strip jobs for 256 threads there, each
// item paying its staging and barriers. Sized tiles therefore take twice the planes per item the
// rule would give them (ItemPlanes::kScaled: about 2048 outputs, 512 coefficients), as long as that
// keeps the kernel's resident blocks (scale_planes). Measured on the H200 (docs/wtconv.md, note
// 118): training step 0.72x at z1, 0.88-0.92x on 10 x 298, 36 x 30 and 69 x 73 planes, 0.94-0.97x
// on two more. Doubling every tile's planes (the benchmark's 14 x 14 and 28 x 28 planes too)
// gained at 28 x 28 and lost 2.4% at 14 x 14; the rule's own tiles take kBalanced instead.
// The extent of each of `tiles` tiles over `extent`, rounded up to whole units.
inline int extent_per_tile(int64_t extent, int64_t tiles, int unit) {
  return int(ceil_div(ceil_div(extent, tiles), unit) * unit);
}
inline int fitted_tile_extent(int64_t extent, int tile, int unit) {
  return extent_per_tile(extent, ceil_div(extent, tile), unit);
}
// Tiles with a side under the unit (the few-row tiles of flat planes) keep their shape: sized, that
// side would grow past the tile.
inline bool fit_poorly_covering_tile(const WtconvTile& t, int64_t gh, int64_t gw, int unit) {
  return t.th >= unit && t.tw >= unit && tile_coverage(gh, gw, t.th, t.tw) < kFitCoverage;
}
// Whether the runtime-k backward takes a sized tile of `tw` coefficient columns: not where its
// coefficient planes' rows (tw + 2r floats, unpadded in shared memory) lie a multiple of 32 floats
// apart, which puts a column of them in one bank. Measured on the H200 (every tile of 2 x 4
// coefficient steps, 37 runtime-k planes; docs/wtconv.md, note 92): at k = 9, 24 columns (rows 32
// floats apart) ran 1.07-1.13x the rule's tile where 20 or 28 ran 0.87-0.99x, and at k = 13, 20
// columns 1.25-1.60x. Sized tiles otherwise ran 0.82-1.00x the rule's (its tile halved before).
// Timed as the rule (note 94): the three planes it changes of 27 ran 0.90-0.98x the training step.
inline bool runtime_k_bwd_fit_width_ok(int tw, int k) { return (tw + 2 * (k / 2)) % 32 != 0; }

// The kernel size a level's convolutions and correlations need on an h x w grid: a tap more than
// max(h, w) - 1 rows or columns from the filter's centre meets only the zero padding around the
// grid, from every output, so the central min(k, 2 max(h, w) - 1) square holds every tap that
// contributes and the rest contribute zeros (and get zero gradients). On the small grids of the
// deep levels and of large kernels this is most of the taps: at 64 x 384 x 14^2, k = 11, level
// 2's 4 x 4 grid runs at 7 x 7 (49 of 121 taps; docs/wtconv.md, note 114).
inline int level_kernel_size(int k, int64_t h, int64_t w) {
  return int(std::min<int64_t>(k, 2 * std::max(h, w) - 1));
}

// Base tiles a caller asks for instead of the rule's (0: the rule's), for tile sweeps
// (dev/cuda/wtconv_tile_sweep.cu); the API never sets them. A tile asked for takes the unscaled
// planes per item (ItemPlanes::kRule).
struct WtconvTileHint {
  int fwd_th = 0, fwd_tw = 0;  // forward base, outputs
  int bwd_th = 0, bwd_tw = 0;  // backward base, level-1 coefficients
  // Planes per item for whichever base tile the plan takes (0: the planner's rules); at most the
  // batch, fewer only where the item would leave the shared-memory budget. For sweeps
  // (dev/cuda/wtconv_tile_sweep.cu, WTCONV_SWEEP_NP).
  int fwd_np = 0, bwd_np = 0;
};

// Assumes wtconv_validate(problem) passed. The backward fields do not depend on the stride: the
// backward kernels run at stride 1 only, a strided backward on its stride-1 twin's plan over the
// full grid (make_wtconv_run), so a plan made at stride > 1 holds that twin's backward fields.
inline WtconvPlan make_wtconv_plan(const WtconvProblem& p, const WtconvTileHint& hint = {}) {
  WtconvPlan plan;
  plan.B = p.batch; plan.C = p.channels; plan.H = p.height; plan.W = p.width;
  plan.Ho = p.out_height(); plan.Wo = p.out_width();
  plan.k = int(p.kernel_size); plan.r = plan.k / 2; plan.L = int(p.levels); plan.stride = int(p.stride);
  plan.hl[0] = p.height; plan.wl[0] = p.width;
  for (int l = 1; l <= plan.L; ++l) {
    plan.hl[l] = (plan.hl[l - 1] + 1) / 2;
    plan.wl[l] = (plan.wl[l - 1] + 1) / 2;
  }
  const int64_t planes = plan.B * plan.C;
  plan.chain_bytes = precision_bytes(p.precision);
  auto level_bytes = [&](int l, size_t elem = 4) {
    return align_up(size_t(planes * plan.hl[l] * plan.wl[l]) * elem, kWorkspaceAlign);
  };
  const int kk = plan.k * plan.k;

  auto set_fwd_base = [&](int th, int tw, ItemPlanes items) {
    plan.fwd_base =
        pick_fwd_base_tile(plan.B, plan.C, plan.Ho, plan.Wo, plan.k, plan.stride, th, tw, items, hint.fwd_np);
    plan.fwd_base_tma_smem = fwd_base_tma_smem(plan.fwd_base, plan.W, plan.k, plan.stride, int(plan.chain_bytes),
                                               fwd_base_blocks_per_sm(plan.k));
    plan.fwd_fused_smem = fwd_fused_smem(plan.fwd_base, plan.L, plan.W, plan.k, plan.stride, int(plan.chain_bytes),
                                         fwd_base_blocks_per_sm(plan.k));
  };
  auto set_bwd_base = [&](int th, int tw, ItemPlanes items) {
    plan.bwd_base = pick_bwd_base_tile(plan.B, plan.C, plan.hl[1], plan.wl[1], plan.k, th, tw, items, hint.bwd_np);
    plan.bwd_base_tma_smem = bwd_base_tma_smem(plan.bwd_base, plan.W, plan.k, int(plan.chain_bytes));
    plan.bwd_fused_smem = bwd_fused_smem(plan.bwd_base, plan.L, plan.W, plan.k, int(plan.chain_bytes));
  };
  // The rule's tiles take up to twice its planes per item where the busiest block's cost says so
  // (balance_planes); a tile asked for through the hint keeps the unscaled rule.
  const bool fwd_rule = hint.fwd_th == 0 && hint.fwd_tw == 0, bwd_rule = hint.bwd_th == 0 && hint.bwd_tw == 0;
  set_fwd_base(hint.fwd_th, hint.fwd_tw, fwd_rule ? ItemPlanes::kBalanced : ItemPlanes::kRule);
  set_bwd_base(hint.bwd_th, hint.bwd_tw, bwd_rule ? ItemPlanes::kBalanced : ItemPlanes::kRule);
  // A plane the rule's tile covers poorly takes the tile sized to it (fitted_tile_extent): the
  // stride-1 forward and the backward, staged with or without TMA. A fused kernel keeps its tile
  // (fixed-tile instances; halved, the fused forward ran 1.3-1.5x slower, note 65), so a change
  // that would make one fused is taken back. The runtime-k backward sizes its rows in units of 2
  // and keeps the rule's tile where the sized width would conflict (runtime_k_bwd_fit_width_ok).
  // At stride 2 (the base conv folded into level 1: the kernel is level 1's convs, 4-row strips of
  // column pairs) the outputs are level-1 coefficients and the unit is 4.
  const int fwd_unit = stride_folds_base(plan.stride) ? kFoldedFwdFitUnit : kFwdFitUnit;
  if (hint.fwd_th == 0 && hint.fwd_tw == 0 && plan.stride <= 2 && plan.fwd_fused_smem == 0 &&
      fit_poorly_covering_tile(plan.fwd_base, plan.Ho, plan.Wo, fwd_unit)) {
    const WtconvPlan before = plan;
    set_fwd_base(fitted_tile_extent(plan.Ho, plan.fwd_base.th, fwd_unit),
                 fitted_tile_extent(plan.Wo, plan.fwd_base.tw, fwd_unit), ItemPlanes::kScaled);
    if (plan.fwd_fused_smem > 0) plan = before;
  }
  if (hint.bwd_th == 0 && hint.bwd_tw == 0 && plan.bwd_fused_smem == 0) {
    const WtconvPlan before = plan;
    if (fit_poorly_covering_tile(plan.bwd_base, plan.hl[1], plan.wl[1], kBwdFitUnit)) {
      const bool runtime_k = !specialised_kernel_size(plan.k);
      const int tw = fitted_tile_extent(plan.wl[1], plan.bwd_base.tw, kBwdFitUnit);
      if (!runtime_k || runtime_k_bwd_fit_width_ok(tw, plan.k))
        set_bwd_base(fitted_tile_extent(plan.hl[1], plan.bwd_base.th, runtime_k ? kRuntimeKBwdFitRows : kBwdFitUnit),
                     tw, ItemPlanes::kScaled);
    }
    if (plan.bwd_fused_smem > 0) plan = before;
  }
  plan.fwd_level2_direct = level2_reads_activations(plan.L, false);
  plan.bwd_level2_direct = level2_reads_activations(plan.L, true, int(plan.chain_bytes));
  for (int l = 2; l <= plan.L; ++l) {
    // A base kernel that may fuse level 2 computes it at k (and, when it cannot fuse at run time,
    // the level kernels then do too).
    const bool fusable = l == 2 && (plan.fwd_fused_smem > 0 || plan.bwd_fused_smem > 0);
    plan.kl[l] = fusable ? plan.k : level_kernel_size(plan.k, plan.hl[l], plan.wl[l]);
    // Level 2 reading the activations stages 4x its tile in pixels: larger tiles, less halo.
    const bool fd = plan.level_reads_activations(l, false), bd = plan.level_reads_activations(l, true);
    plan.fwd_level[l] = pick_level_tile(false, plan.B, plan.C, plan.hl[l], plan.wl[l], plan.kl[l], fd);
    plan.bwd_level[l] = pick_level_tile(true, plan.B, plan.C, plan.hl[l], plan.wl[l], plan.kl[l], bd);
  }

  size_t off = 0;
  if (!plan.fwd_level2_direct)
    for (int l = 1; l < plan.L; ++l) { plan.fwd_x[l] = off; off += level_bytes(l); }
  for (int l = 1; l < plan.L; ++l) { plan.fwd_r[l] = off; off += level_bytes(l); }
  plan.fwd_bytes = off;

  off = 0;
  auto chain_level_bytes = [&](int l) { return level_bytes(l, l == 1 ? plan.chain_bytes : 4); };
  // The cascades' levels: from 2 when level 2 reads x and dy (then none at L == 2).
  const int first_chain = plan.bwd_level2_direct ? 2 : 1;
  for (int l = first_chain; l < plan.L; ++l) { plan.bwd_x[l] = off; off += chain_level_bytes(l); }
  for (int l = first_chain; l < plan.L; ++l) { plan.bwd_g[l] = off; off += chain_level_bytes(l); }
  for (int l = 1; l < plan.L; ++l) { plan.bwd_dx[l] = off; off += chain_level_bytes(l); }
  // Partials: [C][splits][kk + 1 + 4kk] for the base kernel (slot 1), [C][splits][4 kl^2] per level.
  plan.bwd_part[1] = off;
  off += align_up(size_t(plan.C) * plan.bwd_base.splits * (5 * kk + 1) * 4, kWorkspaceAlign);
  for (int l = 2; l <= plan.L; ++l) {
    plan.bwd_part[l] = off;
    off += align_up(size_t(plan.C) * bwd_level_partial_splits(plan, l) * 4 * plan.kl[l] * plan.kl[l] * 4,
                    kWorkspaceAlign);
  }
  plan.bwd_bytes = off;
  return plan;
}

// A strided problem may run the stride-1 kernels on the full grid instead of its own strided
// schedule: the forward writes the full-resolution y into the workspace and one pass subsamples it
// into y; the backward spreads dy onto the full grid (zeros between its samples) in the workspace
// and runs the stride-1 backward on that. Same mathematics (the strided WTConv2d is the stride-1
// one subsampled), one more activation-sized pass and N more workspace elements; in exchange the
// strided problem takes the stride-1 kernels' fused, TMA-staged and register-blocked paths, which
// its own schedule lacks. Measured on the H200 (docs/wtconv.md, perf note 60): the backward is
// 1.2-2.4x faster on the full grid at strides 2-8 (on 14 x 14 planes within 10% either way); the
// forward wins there where the stride-1 forward fuses level 2, at stride 2, and at stride 3 when
// the stride-1 forward stages x with TMA, and loses elsewhere (0.84-0.93x at stride 4, 0.73-0.77x
// at stride 3 on rows off the 16-byte rule), where the strided schedule's base convolution at the
// strided outputs alone saves more than the stride-1 kernels gain. At stride 2 the own schedule
// folds the base conv into the level-1 filters (wtconv_forward_base.cu, folded_base_tap): half the
// full grid's multiply-adds, no subsample pass; it runs there unless the stride-1 forward fuses
// level 2 (docs/wtconv.md, note 124). `full` is the plan of the stride-1 problem.
inline bool forward_on_full_grid(int64_t stride, const WtconvPlan& full) {
  return stride > 1 && (full.fwd_fused_smem > 0 || (stride == 3 && full.fwd_base_tma_smem > 0));
}
inline bool backward_on_full_grid(int64_t stride) { return stride > 1; }
// At stride 2 the backward base kernel on the spread dy folds the base conv and its correlation
// into level 1 (wtconv_fold.h: folded_dx_tap, folded_corr_tap; docs/wtconv.md, note 125): half the
// multiply-adds of dx and the weight gradients. Not where the stride-1 twin fuses level 2, whose
// fused kernel keeps its own base passes; decided by the plan, so the same problem folds or not
// whatever its pointers' alignment. `full` is the plan of the stride-1 problem.
inline bool backward_folds_base(int64_t stride, const WtconvPlan& full) {
  return stride_folds_base(stride) && full.bwd_fused_smem == 0;
}

// What one forward or backward runs: the plan of its kernels (the problem's own, or its stride-1
// twin on the full grid) and its workspace.
struct WtconvRun {
  WtconvPlan plan;
  int out_stride = 1;      // > 1: the kernels run on the full grid, held at full_offset
  size_t full_offset = 0;  // the full-grid y (forward) or spread dy (backward) in the workspace
  size_t bytes = 0;        // workspace bytes
};

// Assumes wtconv_validate(problem) passed. hint: the planner's tile hint (tile sweeps), passed to
// whichever plan the run takes.
inline WtconvRun make_wtconv_run(const WtconvProblem& p, bool backward, const WtconvTileHint& hint = {}) {
  WtconvRun run;
  if (p.stride > 1) {
    WtconvProblem full = p;
    full.stride = 1;
    run.plan = make_wtconv_plan(full, hint);
    if (backward ? backward_on_full_grid(p.stride) : forward_on_full_grid(p.stride, run.plan)) {
      run.out_stride = int(p.stride);
      run.full_offset = align_up(backward ? run.plan.bwd_bytes : run.plan.fwd_bytes, kWorkspaceAlign);
      run.bytes = run.full_offset + size_t(p.x_elements()) * precision_bytes(p.precision);
      return run;
    }
  }
  run.plan = make_wtconv_plan(p, hint);
  run.bytes = backward ? run.plan.bwd_bytes : run.plan.fwd_bytes;
  return run;
}

// HBM bytes one forward / one backward moves (docs/wtconv.md, "Bytes moved per step"): every
// activation read or written once, the LL chains (float; the backward's level 1 in the activation
// type) and residuals written and read once, the gradient partials written and read once; halo
// re-reads (served mostly by L2) not counted. The backward runs at stride 1, so dy has x's N
// elements (a strided backward runs on the full grid: run_io_bytes).
inline void plan_io_bytes(const WtconvPlan& plan, size_t e, uint64_t* forward, uint64_t* backward) {
  const uint64_t planes = uint64_t(plan.B * plan.C);
  auto n = [&](int l) { return planes * uint64_t(plan.hl[l]) * uint64_t(plan.wl[l]); };
  const uint64_t N = n(0), No = planes * uint64_t(plan.Ho) * uint64_t(plan.Wo);
  const int L = plan.L;
  uint64_t chain = 0;
  for (int l = 1; l < L; ++l) chain += n(l);
  uint64_t fwd = N * e + No * e, bwd = 3 * N * e;  // base kernels
  // A fused L = 2 forward (fwd_fused_smem) moves x and y alone, a fused backward (bwd_fused_smem)
  // x, dy and dx: level 2 runs in the base kernel.
  const bool fused = plan.fwd_fused_smem > 0, bfused = plan.bwd_fused_smem > 0;
  if (L >= 2) {
    if (!fused) fwd += 4 * n(1);  // the base kernel reads R_1
    if (!bfused) bwd += e * n(1);  // the base kernel reads dX_1
    if (!plan.fwd_level2_direct) fwd += N * e + 4 * chain;  // cascade of x
    // cascades of x and dy (level 1 in e bytes unless level 2 reads x and dy, deeper in 4)
    if (!plan.bwd_level2_direct || L >= 3)
      bwd += 2 * N * e + 2 * ((plan.bwd_level2_direct ? 0 : e * n(1)) + 4 * (chain - n(1)));
  }
  for (int l = 2; l <= L; ++l) {
    // Level 2 reads X_1 (or x) and writes R_1; the backward reads X_1 and G_1 (or x and dy) and
    // writes dX_1.
    const bool fd = plan.level_reads_activations(l, false), bd = plan.level_reads_activations(l, true);
    if (!fused) fwd += (fd ? N * e : 4 * n(l - 1)) + 4 * n(l - 1) + (l < L ? 4 * n(l) : 0);
    if (!bfused)
      bwd += (bd ? 2 * N * e : (l == 2 ? e : 4) * 2 * n(l - 1)) + (l == 2 ? e : 4) * n(l - 1) + (l < L ? 4 * n(l) : 0);
  }
  const int kk = plan.k * plan.k;
  uint64_t partials = uint64_t(plan.C) * plan.bwd_base.splits * (5 * kk + 1);
  for (int l = 2; l <= L; ++l)
    partials += uint64_t(plan.C) * (bfused ? plan.bwd_base.splits : plan.bwd_level[l].splits) * 4 * plan.kl[l] *
                plan.kl[l];
  bwd += 2 * 4 * partials;
  *forward = fwd;
  *backward = bwd;
}

// The same for the runs of a problem: a run on the full grid adds its pass over the full-grid
// activation (the subsample reads the y elements it keeps and writes y; the spread reads dy and
// writes the full grid, which the stride-1 backward then reads in dy's place).
inline void run_io_bytes(const WtconvProblem& p, uint64_t* forward, uint64_t* backward) {
  const size_t e = precision_bytes(p.precision);
  const WtconvRun f = make_wtconv_run(p, false), b = make_wtconv_run(p, true);
  uint64_t unused = 0;
  plan_io_bytes(f.plan, e, forward, &unused);
  plan_io_bytes(b.plan, e, &unused, backward);
  const uint64_t N = uint64_t(p.x_elements()), No = uint64_t(p.y_elements());
  if (f.out_stride > 1) *forward += 2 * No * e;
  if (b.out_stride > 1) *backward += (No + N) * e;
}


}  // namespace wtconv_detail
}  // namespace winconv
