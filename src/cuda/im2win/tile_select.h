// The tile-shape rule for the FP32 im2win GEMM (docs/conv2d.md, "Tile selection rule").
//
// Predicted time of a shape = (tiles on the busiest SM) x (tile area) x (reduction rows a tile
// computes + its fixed work) / (the shape's rate).
// Tiles spread evenly over the SMs, so the busiest SM runs ceil(tiles / SMs) of them (whole
// rounds of slots for a 256-thread shape whose last round is partial and unsplit:
// busiest_sm_tiles); the tile area counts the padded columns a BN wider than N wastes, the rows
// the padded rows of a last reduction step that a shape computes (tile_reduction_rows). This one
// formula covers the wave tail (conv11: 288 tiles of 128x128 on 132 SMs leave a third round to
// 24 SMs; 576 of 64x128 spread better) and the tile efficiency on long GEMMs. The shape it picks
// is then split along the reduction where its tiles leave SMs idle (select_k_splits).
// Small GEMMs, whose wide shape of the most tiles fills fewer than two rounds of the SMs (batch 1
// to 8 layers; is_small_gemm), take the shape and its split plan together instead
// (select_small_gemm_tile, v24, v28).
//
// The rates are relative throughputs measured with every shape on long GEMMs and depend on how
// the A stage is stored:
//   - k-major A (NCHW and the scalar NHWC gather): 64x128 is fastest. v6 measured 128x128 ahead
//     on conv8 (H200); since the reduction table (v8) 64x128 has run ahead of it on the long
//     k-major GEMMs timed (conv8 2.1%; eight 56^2-112^2 layers of 128-256 filters and C*R*S 27
//     to 576 3.6-8.2% NCHW, up to 12% in the scalar NHWC gather; H100, docs/conv2d.md, v22).
//     At these rates 128x128 cannot win by cost in either order (64x128 has at most twice its
//     tiles per SM, at half the area); it stays a candidate for a rate measured otherwise.
//     64x128 gathers half the A elements per FMA of 128x64 and runs ahead of that too.
//   - pixel-major A (NHWC vector gather): the 256-thread 128x128 tile is the slowest of the three
//     (capped at 128 registers it reads A as float2 pairs); the 128-thread tiles keep 3 blocks
//     per SM at more registers.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "cuda/im2win/conv_gemm_params.h"
#include "cuda/im2win/tile_shape.h"

namespace winconv::im2win {

// How the GEMM kernel stores its A (window) stage in shared memory.
enum class AStageOrder { kKMajor, kPixelMajor };

// NHWC with C % 4 == 0 takes the vector gather (16-byte channel copies into a pixel-major stage);
// NCHW and the scalar NHWC gather stage A k-major.
inline AStageOrder a_stage_order(bool nhwc, int64_t channels) {
  return nhwc && channels % 4 == 0 ? AStageOrder::kPixelMajor : AStageOrder::kKMajor;
}

// The GEMM's tile grid: rows along M, columns along N.
inline int64_t tile_rows(int64_t m, TileShape t) { return (m + tile_bm(t) - 1) / tile_bm(t); }
inline int64_t tile_cols(int64_t n, TileShape t) { return (n + tile_bn(t) - 1) / tile_bn(t); }
inline int64_t tile_count(int64_t m, int64_t n, TileShape t) { return tile_rows(m, t) * tile_cols(n, t); }

// Relative throughput of a full SM with this shape, per mille of the fastest shape.
inline int tile_rate_permille(TileShape t, AStageOrder order) {
  const bool k_major = order == AStageOrder::kKMajor;
  switch (t) {
    case TileShape::k128x128: return k_major ? 1000 : 920;
    case TileShape::k64x128: return k_major ? 1020 : 1000;
    case TileShape::k128x64: return k_major ? 910 : 990;
    // Measured (tile sweep, N = 96 and 192 layers): 930-967 with the reduction table, ~915 with
    // the padded digit walk, ~927 pixel-major; one figure picks the fastest shape on all of them.
    // Those were 8x6 threads; v27's 8x12 runs 1.03-1.16x faster on k-major layers and large grids
    // (0.85-0.90x on small pixel-major ones). Not refit: the picks it changes were re-swept and
    // replay within the stored bounds.
    case TileShape::k128x96: return 950;
    // Chosen by N alone (N <= 32), and a candidate of small GEMMs only (select_small_gemm_tile):
    // measured on conv8 (N = 128) against 128x128 (k-major) and 64x128 (pixel-major), it is not a
    // candidate of the long-GEMM cost (docs/conv2d.md, v13).
    case TileShape::k128x32: return k_major ? 780 : 830;
    // Chosen by N alone (N <= 16), and a candidate of small GEMMs only, at its own rate there
    // (small_gemm_rate_permille).
    case TileShape::k128x16: return k_major ? 700 : 740;
  }
  return 1;
}

// Reduction splits (split-K) for a GEMM whose tiles leave SMs idle (docs/conv2d.md, v7 and
// v10). Two forms:
//   - every tile split (v7): for GEMMs of about one tile per SM or fewer (conv12: 100 tiles);
//   - only the tail split (v10): the tiles of the last, partial round. The head, whole rounds
//     of tiles on every SM, runs unsplit in one launch; the tail's tiles are split in a second
//     one, so the SMs that the tail would leave idle share its work (conv6: 800 tiles on 132
//     SMs, 6 rounds and 8 tiles; the busiest SM ran 7 tiles' work where 6.06 is the average).
// Predicted time of a plan = its GEMM launches + the reduction pass:
//   GEMM: the busiest SM runs ceil(blocks / SMs) blocks of their BK-deep steps, at one SM's
//         FP32 rate times sm_share_rate of the warps resident on it (a lone 4-warp block runs
//         at ~0.9 of a full SM: two splits of 100 64x128 tiles, one and two blocks per SM,
//         measured 8-13% faster); each launch after the first adds kLaunchNs;
//   reduction: the s partial tiles of the split rows written and read once more (8 * s * rows
//         * N bytes) plus a launch.
// A form is taken when it beats the unsplit GEMM by its margin (what the model leaves out):
// kMinSplitGain for every tile split (two splits of 100 tiles on 132 SMs, say, predict no gain,
// since the busiest SM still runs a whole tile's work: measured 1-22% slower), kMinTailSplitGain
// for the tail. Each split keeps at least kMinKTilesPerSplit steps (the 4-stage pipeline fills),
// and the partial tiles never outgrow the im2col matrix (s * rows * N <= K_gemm * M floats).
// The rates are H200 figures; elsewhere they move the trade-off only through their ratio.
constexpr int kMaxKSplits = 8;
constexpr int kMinKTilesPerSplit = 8;
constexpr double kSmFlopsPerNs = 300.0;   // one SM in the GEMM kernel (~40 TFLOPS / 132 SMs)
constexpr double kPartialBytesPerNs = 3000.0;
constexpr double kLaunchNs = 3000.0;
constexpr double kMinSplitGain = 1.15;
constexpr double kMinTailSplitGain = 1.05;

struct KSplit {
  int splits = 1;           // splits that run (none empty)
  int tiles_per_split = 0;  // BK-deep steps per split (the last may have fewer)
  // Tiles [0, head_tiles) run unsplit before the split ones; head_tiles is a whole number of
  // tile rows, so the split tiles cover the output rows [m_begin, M). 0: every tile is split.
  int64_t head_tiles = 0;
  int64_t m_begin = 0;
};

// The splits that `requested` becomes: steps per split rounded up, so none is empty.
inline KSplit k_split_of(int k_tiles, int requested) {
  KSplit ks;
  ks.tiles_per_split = (k_tiles + requested - 1) / requested;
  ks.splits = (k_tiles + ks.tiles_per_split - 1) / ks.tiles_per_split;
  return ks;
}

// The share of a full SM's rate that the resident warps reach: 8 or more saturate it.
inline double sm_share_rate(int64_t resident_warps) {
  return resident_warps >= 8 ? 1.0 : 0.78 + 0.0275 * double(resident_warps);
}

// Predicted time in ns of one launch of `blocks` tiles of shape t, each `steps` BK-deep steps.
// shape_rate: the shape's throughput relative to kSmFlopsPerNs (1 where only plans of one shape
// are compared).
inline double gemm_launch_ns(int64_t blocks, int steps, TileShape t, int num_sms, double shape_rate = 1.0) {
  if (blocks <= 0) return 0.0;
  const int64_t busiest = (blocks + num_sms - 1) / num_sms;
  const double rate = kSmFlopsPerNs * shape_rate * sm_share_rate(busiest * (tile_threads(t) / 32));
  return double(busiest) * steps * (2.0 * tile_bm(t) * tile_bn(t) * kBK) / rate;
}

// Predicted time in ns of the GEMM (m x n, k_tiles BK-deep steps) with these splits.
inline double k_split_cost_ns(int64_t m, int64_t n, int k_tiles, TileShape t, int num_sms, const KSplit& ks,
                              double shape_rate = 1.0) {
  const int64_t tiles = tile_count(m, n, t);
  if (ks.splits <= 1) return gemm_launch_ns(tiles, k_tiles, t, num_sms, shape_rate);
  const double head =
      ks.head_tiles > 0 ? gemm_launch_ns(ks.head_tiles, k_tiles, t, num_sms, shape_rate) + kLaunchNs : 0.0;
  const double split =
      gemm_launch_ns((tiles - ks.head_tiles) * ks.splits, ks.tiles_per_split, t, num_sms, shape_rate);
  const double reduce = 8.0 * ks.splits * double(m - ks.m_begin) * double(n) / kPartialBytesPerNs + kLaunchNs;
  return head + split + reduce;
}

// The head of a tail split: the whole rounds of tiles on every SM, cut back to whole tile rows
// (0 when there is no tail, or no whole row before it).
inline int64_t tail_split_head(int64_t m, int64_t n, TileShape t, int num_sms) {
  const int64_t tiles = tile_count(m, n, t), n_tiles = tile_cols(n, t);
  const int64_t head = tiles / num_sms * num_sms / n_tiles * n_tiles;
  return head < tiles ? head : 0;
}

// The GEMM is m x n with reduction depth k_gemm, run in tiles of shape t.
inline KSplit select_k_splits(int64_t m, int64_t n, int64_t k_gemm, TileShape t, int num_sms) {
  const int k_tiles = int((k_gemm + kBK - 1) / kBK);
  const KSplit unsplit = k_split_of(k_tiles, 1);
  if (num_sms <= 0) return unsplit;
  const double unsplit_cost = k_split_cost_ns(m, n, k_tiles, t, num_sms, unsplit);
  // The best s splits of the rows [m_begin, m) after head_tiles unsplit tiles.
  auto best_of = [&](int64_t head_tiles, int64_t m_begin, double* cost) {
    KSplit best = unsplit;
    *cost = unsplit_cost;
    for (int s = 2; s <= kMaxKSplits && s * kMinKTilesPerSplit <= k_tiles; ++s) {
      if (double(s) * double(m - m_begin) * double(n) > double(k_gemm) * double(m)) break;  // memory cap
      KSplit ks = k_split_of(k_tiles, s);
      if (ks.tiles_per_split < kMinKTilesPerSplit) continue;
      ks.head_tiles = head_tiles;
      ks.m_begin = m_begin;
      const double c = k_split_cost_ns(m, n, k_tiles, t, num_sms, ks);
      if (c < *cost) { best = ks; *cost = c; }
    }
    return best;
  };
  double cost = 0.0;
  const KSplit all = best_of(0, 0, &cost);
  if (unsplit_cost >= kMinSplitGain * cost) return all;
  const int64_t head = tail_split_head(m, n, t, num_sms);
  if (head == 0) return unsplit;
  const KSplit tail = best_of(head, head / tile_cols(n, t) * tile_bm(t), &cost);
  return unsplit_cost >= kMinTailSplitGain * cost ? tail : unsplit;
}

// Tiles on the busiest SM. Tiles spread evenly over the SMs, so it runs ceil(tiles / SMs) of
// them, with one exception, measured on the 256-thread shapes (128x128, and 128x96 while it ran
// 256 threads, before v27; two resident blocks per SM, 2 * SMs slots): once the tiles outnumber
// the slots, the blocks of the last, partial round land on slots as they free up, two to an SM
// on some, and that round takes as long as a whole one. The 256-channel 3x3 layer at 14x14 (392
// tiles of 128x128 on 264 slots) ran 0.884 ms at batch 128, as long as 528 tiles (two whole
// rounds) at batch 172, where a round alone took 0.448 ms (H100). A tail split (select_k_splits)
// replaces that round with split blocks that fill the slots, so a shape that takes one is
// charged tiles / SMs as before (the same layer at batch 108: 332 tiles, tail split 5 ways,
// 0.637 ms). The 128-thread shapes (3 or 4 resident) showed no such loss: 784 tiles of 64x128
// took 1.46 times their one-round time for 1.48 rounds.
inline int64_t busiest_sm_tiles(int64_t m, int64_t n, int64_t k_gemm, int num_sms, TileShape t) {
  const int64_t tiles = tile_count(m, n, t);
  constexpr int kWideBlocksPerSm = 2;  // 256 threads x 128 registers: half the register file
  const int64_t slots = int64_t(kWideBlocksPerSm) * num_sms;
  if (tile_threads(t) == 256 && tiles > slots && select_k_splits(m, n, k_gemm, t, num_sms).splits == 1)
    return (tiles + slots - 1) / slots * kWideBlocksPerSm;
  return (tiles + num_sms - 1) / num_sms;
}

// The reduction rows a tile of shape t multiplies for a depth of k_gemm. The k-major tiles of at
// most 64 columns stop their last BK-deep step after the real rows (the kernel's partial-step
// loop, conv_fp32_simt_kernel.cuh); the others multiply whole steps, zero rows included. Only
// shallow reductions feel it: at C*R*S = 18 (2-channel 3x3) the wider shapes compute 32 rows
// for 18, and the rule without it took 128x96 for 160 filters, 1.39x slower than 128x64 (H100,
// batch 128; docs/conv2d.md, v23).
inline int64_t tile_reduction_rows(int64_t k_gemm, TileShape t, AStageOrder order) {
  if (order == AStageOrder::kKMajor && tile_bn(t) <= 64) return k_gemm;
  return (k_gemm + kBK - 1) / kBK * kBK;
}

// A tile's fixed work (pipeline fill, the epilogue's pass through shared memory and its stores),
// in reduction rows of the tile's FMAs. Fitted on the shallow layers of
// dev/cuda/sweep_wide_shallow_layers.csv (C*R*S 9 to 75, 80-384 filters): every value from 16 to
// 32 gives the same picks there (1.007x the fastest shape in geometric mean), 14 and below keep
// two of the 1.14x losses, 64 brings back the 1-channel 3x3's (1.14x).
constexpr int64_t kTileFixedRows = 24;

// Predicted time of the GEMM (m x n, reduction depth k_gemm) with this shape, in units of
// FMA-area over rate (only comparisons between shapes of one problem mean anything).
inline double tile_cost(int64_t m, int64_t n, int64_t k_gemm, int num_sms, TileShape t, AStageOrder order) {
  const int64_t rows = tile_reduction_rows(k_gemm, t, order) + kTileFixedRows;
  return double(busiest_sm_tiles(m, n, k_gemm, num_sms, t)) * double(tile_bm(t) * tile_bn(t)) * double(rows) /
         double(tile_rate_permille(t, order));
}

// The shapes' rates in small GEMMs: their long-GEMM rates, but 500 / 540 (k-major / pixel-major)
// for the 16-wide tile instead of 700 / 740. At its long-GEMM rate the split model took 128x16
// on small GEMMs where other shapes were 1.05-1.40x faster (3x3 layers and a 7x7 stem at batch
// 1; odd_17 NHWC at batch 8 2.9x); at 500 it takes it where it leads, mostly at batch 1 (1x1
// layers of 256-2048 channels, conv6, patchify layers: 41 picks 1.07x faster than 128x32 in
// geometric mean, 0.89-1.18x). Fitted on the stored batch-1 and -8 sweeps
// (tests/data/tile_sweeps): every k-major rate from 400 to 550 picks within 0.3% of the same
// times; at 600 it takes conv9 NHWC at batch 1 (1.39x slower; docs/conv2d.md, v25).
inline int small_gemm_rate_permille(TileShape t, AStageOrder order) {
  if (t == TileShape::k128x16) return order == AStageOrder::kKMajor ? 500 : 540;
  return tile_rate_permille(t, order);
}

// Predicted time in ns of shape t with its split plan (select_k_splits) in a small GEMM, at the
// shape's small-GEMM rate.
inline double small_gemm_plan_ns(int64_t m, int64_t n, int64_t k_gemm, int num_sms, TileShape t, AStageOrder order) {
  const KSplit ks = select_k_splits(m, n, k_gemm, t, num_sms);
  return k_split_cost_ns(m, n, int((k_gemm + kBK - 1) / kBK), t, num_sms, ks,
                         small_gemm_rate_permille(t, order) / 1000.0);
}

// Small GEMMs (is_small_gemm: under two rounds of tiles in the wide shape of the most; v24, v28):
// the shape and its split plan are chosen together, each shape's plan (select_k_splits)
// predicted at the shape's rate (k_split_cost_ns), where the rule for large GEMMs picks the
// shape as if unsplit and then splits it. The narrow tiles are candidates here: they are more
// blocks for the idle SMs (a 1x1 layer of 2048 channels at batch 1, 49 pixels x 512 filters,
// ran 128x32 split 4 ways in 0.042 ms and 128x16 split 4 ways in 0.039, against 64x128's 0.052;
// H100, sweep_layers.csv).
inline TileShape select_small_gemm_tile(int64_t m, int64_t n, int64_t k_gemm, int num_sms, AStageOrder order) {
  TileShape best = TileShape::k64x128;
  double best_ns = INFINITY;
  for (TileShape t : kAllTileShapes) {
    const double ns = small_gemm_plan_ns(m, n, k_gemm, num_sms, t, order);
    if (ns < best_ns) best = t, best_ns = ns;
  }
  return best;
}

// A small GEMM: the wide shape of the most tiles (64x128; 128x64 at N <= 64) fills fewer than
// kSmallGemmRounds rounds of the SMs. Until v28 the bound was one round; between one and two,
// the long-GEMM rule picked the shape as if unsplit and took one or two wide tiles per SM
// where more, narrower or split blocks ran faster: layers at batches 1-8 (128x64 or 64x128 up
// to 1.19x slower than 128x32: conv9 NHWC at batch 8), x10 at batch 32 (128x96 unsplit, 116
// tiles of 4 warps, 1.14x NCHW and 1.23x NHWC slower than 128x64 split 3 ways). A bound of 2.25
// rounds or more would take a split plan that loses: u_192 at batch 32 (2.2 rounds of 64x128),
// 128x96 split 6 ways, 1.45x slower than 128x64 unsplit (H100 sweeps, docs/conv2d.md, v28).
constexpr int64_t kSmallGemmRounds = 2;
inline bool is_small_gemm(int64_t m, int64_t n, int num_sms) {
  return tile_count(m, n, n <= 64 ? TileShape::k128x64 : TileShape::k64x128) < kSmallGemmRounds * num_sms;
}

inline TileShape select_tile(int64_t m, int64_t n, int64_t k_gemm, int num_sms, AStageOrder order) {
  // N <= 64: a BN = 128 tile is at least half padding (N <= 32: a BN = 64 one; N <= 16: a BN = 32
  // one). The cost model charges that only through the tile count, which stops counting once
  // every tile runs alone on its SM.
  if (n <= 16) return TileShape::k128x16;
  if (n <= 32) return TileShape::k128x32;
  if (is_small_gemm(m, n, num_sms)) return select_small_gemm_tile(m, n, k_gemm, num_sms, order);
  if (n <= 64) return TileShape::k128x64;
  TileShape best = TileShape::k128x128;
  double best_cost = tile_cost(m, n, k_gemm, num_sms, best, order);
  for (TileShape t : {TileShape::k64x128, TileShape::k128x64, TileShape::k128x96}) {
    const double cost = tile_cost(m, n, k_gemm, num_sms, t, order);
    if (cost < best_cost) best = t, best_cost = cost;
  }
  return best;
}

}  // namespace winconv::im2win
