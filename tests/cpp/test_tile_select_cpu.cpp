// The tile-shape rule of the FP32 im2win GEMM (src/cuda/im2win/tile_select.h): the cases its
// model is meant to decide, on a 132-SM GPU, and the invariants every choice must keep.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cuda/im2win/shallow_select.h"
#include "cuda/im2win/tile_select.h"

namespace winconv::im2win {
namespace {

constexpr int kSms = 132;
constexpr AStageOrder kK = AStageOrder::kKMajor, kPix = AStageOrder::kPixelMajor;

#define EXPECT_TILE(got, want) EXPECT_EQ(got, want) << tile_name(got) << " instead of " << tile_name(want)

TEST(TileSelect, LongGemmWithWideNTakes64x128WhenKMajor) {
  // conv8-like: M = 1.5e6, N = 128, thousands of tiles per shape: the wave tail is negligible,
  // and 64x128 ran 2.1% ahead of 128x128 (v22).
  EXPECT_TILE(select_tile(1548800, 128, 576, kSms, kK), TileShape::k64x128);
}

TEST(TileSelect, The128x128TileNeverWinsAtTheseRates) {
  // 64x128 has at most twice 128x128's tiles on the busiest SM, half the area, and the higher
  // rate in both A orders, and the partial-round charge only adds to 128x128: it cannot win by
  // cost (it stays a candidate so that a measured rate can bring it back).
  for (AStageOrder o : {kK, kPix})
    EXPECT_GT(tile_rate_permille(TileShape::k64x128, o), tile_rate_permille(TileShape::k128x128, o));
}

TEST(TileSelect, PixelMajorAvoidsThe256ThreadTile) {
  EXPECT_TILE(select_tile(1548800, 128, 576, kSms, kPix), TileShape::k64x128);
}

TEST(TileSelect, NarrowNNeverPaysForAWideTile) {
  // N <= 64: a BN = 128 tile computes as many padded columns as real ones; N <= 32: a BN = 64
  // one does; N <= 16: a BN = 32 one does.
  for (int64_t m : {int64_t(3000), int64_t(50000), int64_t(1520768)})
    for (AStageOrder o : {kK, kPix}) {
      for (int64_t n : {33, 48, 64}) {
        const TileShape t = select_tile(m, n, 576, kSms, o);
        EXPECT_EQ(tile_bn(t), 64) << "m " << m << " n " << n << ": " << tile_name(t);
      }
      for (int64_t n : {17, 24, 32}) {
        const TileShape t = select_tile(m, n, 576, kSms, o);
        EXPECT_EQ(tile_bn(t), 32) << "m " << m << " n " << n << ": " << tile_name(t);
      }
      for (int64_t n : {1, 8, 16}) {
        const TileShape t = select_tile(m, n, 576, kSms, o);
        EXPECT_EQ(tile_bn(t), 16) << "m " << m << " n " << n << ": " << tile_name(t);
      }
    }
}

TEST(TileSelect, ThreadsOfEveryShapeFillWholeWarps) {
  // The kernel lays a warp out as 4 (M) x 8 (N) threads, each owning 8 x tile_tn outputs.
  for (TileShape t : kAllTileShapes) {
    EXPECT_EQ(tile_bn(t) % (8 * tile_tn(t)), 0) << tile_name(t);
    EXPECT_EQ(tile_bm(t) % (4 * 8), 0) << tile_name(t);
    EXPECT_EQ(tile_threads(t) % 32, 0) << tile_name(t);
  }
  EXPECT_EQ(tile_threads(TileShape::k128x32), 128);
  EXPECT_EQ(tile_threads(TileShape::k128x16), 128);
}

TEST(TileSelect, WaveTailMovesToASmallerTile) {
  // conv11-like: 288 tiles of 128x128 give 24 SMs a third tile; 576 tiles of 64x128 spread to
  // at most 5 per SM, 2.5 large-tile equivalents.
  EXPECT_TILE(select_tile(18432, 256, 2304, kSms, kK), TileShape::k64x128);
}

TEST(TileSelect, NinetySixWideNTakesTheNinetySixWideTile) {
  // conv1-like: M = 387200, N = 96; a 128-wide tile would compute 32 padded columns per 96.
  // N = 192 is two such tiles (k-major; the pixel-major 128x64 rate takes three 64-wide ones);
  // N = 100 or 256 is not.
  EXPECT_TILE(select_tile(387200, 192, 363, kSms, kK), TileShape::k128x96);
  for (AStageOrder o : {kK, kPix}) {
    EXPECT_TILE(select_tile(387200, 96, 363, kSms, o), TileShape::k128x96);
    EXPECT_NE(select_tile(387200, 100, 363, kSms, o), TileShape::k128x96);
    EXPECT_NE(select_tile(387200, 256, 363, kSms, o), TileShape::k128x96);
  }
}

TEST(TileSelect, SmallGemmTakesTheSmallerTileAndSplits) {
  // conv12-like: M = 3200, N = 512: 100 tiles of 128x128 or 200 of 64x128, each split 5 ways;
  // measured level (0.4038 against 0.4021 ms, H100), so the rate decides.
  EXPECT_TILE(select_tile(3200, 512, 4608, kSms, kK), TileShape::k64x128);
  EXPECT_EQ(select_k_splits(3200, 512, 4608, TileShape::k64x128, kSms).splits, 5);
}

TEST(TileSelect, UnderfilledGpuTakesTheSmallestArea) {
  // M = 392, N = 512 (a 7x7 layer at batch 8): at most 32 tiles, each block alone on its SM, so
  // the time follows the tile area; 64x128 gathers the fewest A elements of the two halves.
  EXPECT_TILE(select_tile(392, 512, 4608, kSms, kK), TileShape::k64x128);
  EXPECT_TILE(select_tile(392, 512, 4608, kSms, kPix), TileShape::k64x128);
}

// A shape's split plan and its predicted time at the shape's rate (the small-GEMM rule's measure).
double plan_ns(int64_t m, int64_t n, int64_t k, TileShape t, AStageOrder o, int sms = kSms) {
  return small_gemm_plan_ns(m, n, k, sms, t, o);
}

TEST(TileSelect, ChoiceIsNeverPredictedSlowerThanAnotherShape) {
  // N <= 64 bypasses the model (NarrowNNeverPaysForAWideTile); small M makes the small-GEMM rule
  // likely, which minimises each shape's predicted plan time (the narrow tiles among them)
  // instead of the unsplit cost.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> m_dist(1, 40000);
  std::uniform_int_distribution<int64_t> n_dist(65, 2048);
  std::uniform_int_distribution<int64_t> k_dist(1, 8192);
  int small = 0, large = 0;
  for (int i = 0; i < 20000; ++i) {
    const int64_t m = m_dist(rng), n = n_dist(rng), k = k_dist(rng);
    const bool small_gemm = is_small_gemm(m, n, kSms);
    ++(small_gemm ? small : large);
    for (AStageOrder o : {kK, kPix}) {
      const TileShape t = select_tile(m, n, k, kSms, o);
      for (TileShape other : kAllTileShapes) {
        const bool narrow = tile_bn(other) < 64;
        if (small_gemm)
          ASSERT_LE(plan_ns(m, n, k, t, o), plan_ns(m, n, k, other, o))
              << "m " << m << " n " << n << " k " << k << ": " << tile_name(t) << " vs " << tile_name(other);
        else if (!narrow)
          ASSERT_LE(tile_cost(m, n, k, kSms, t, o), tile_cost(m, n, k, kSms, other, o))
              << "m " << m << " n " << n << " k " << k << ": " << tile_name(t) << " vs " << tile_name(other);
      }
      if (!small_gemm) ASSERT_GE(tile_bn(t), 64) << tile_name(t);
    }
  }
  EXPECT_GT(small, 500);  // both regimes drawn often
  EXPECT_GT(large, 500);
}

TEST(TileSelect, SmallGemmsChooseTheShapeWithItsSplitPlan) {
  // A 1x1 layer of 2048 channels at batch 1 (49 pixels, 512 filters): 4 tiles of 64x128, split 4
  // ways, ran 0.052 ms; 16 tiles of 128x32 split 4 ways 0.042, 32 of 128x16 split 4 ways 0.039
  // (H100, sweep_layers.csv).
  EXPECT_TILE(select_tile(49, 512, 2048, kSms, kK), TileShape::k128x16);
  EXPECT_EQ(select_k_splits(49, 512, 2048, TileShape::k128x16, kSms).splits, 4);
  // A 64-filter 1x1 layer of 256 channels at batch 1 (3136 pixels): 25 tiles of 128x64 were split
  // 2 ways (0.0213 ms); 100 of 128x16 run unsplit (0.0156).
  EXPECT_TILE(select_tile(3136, 64, 256, kSms, kK), TileShape::k128x16);
  // A 3x3 layer of 64 channels at batch 1 (3136 pixels): 128x64 split 4 ways (0.027 ms) ahead of
  // 128x16 (0.031 NCHW, 1.40x in NHWC), which the 16-wide tile's long-GEMM rate would take.
  EXPECT_TILE(select_tile(3136, 64, 576, kSms, kK), TileShape::k128x64);
  EXPECT_TILE(select_tile(3136, 64, 576, kSms, kPix), TileShape::k128x64);
  // The 1x1 layer at batch 8 has 196 tiles of 128x64, under two rounds: a small GEMM since v28.
  // 128x32 ran 0.0315 ms NCHW and 0.0312 NHWC against 128x64's 0.0326 and 0.0359 (sweep_layers.csv).
  EXPECT_TILE(select_tile(8 * 3136, 64, 256, kSms, kK), TileShape::k128x32);
  EXPECT_TILE(select_tile(8 * 3136, 64, 256, kSms, kPix), TileShape::k128x32);
  // Two rounds and more stay with the long-GEMM rule: the 192-filter 3x3 layer of 192 channels at
  // 17x17, batch 32 (290 tiles of 64x128, 2.2 rounds), keeps 128x64 unsplit (0.190 ms NCHW), where
  // the split model would take 128x96 split 6 ways (0.276).
  EXPECT_FALSE(is_small_gemm(32 * 289, 192, kSms));
  EXPECT_TILE(select_tile(32 * 289, 192, 1728, kSms, kK), TileShape::k128x64);
}

TEST(TileSelect, PartialUnsplitRoundOfWideTilesCostsAWholeRound) {
  // A 256-channel 3x3 layer at 14x14, batch 128 (M = 25088, N = 256, K = 2304): 392 tiles of
  // 128x128 are 2.97 per SM but 1.48 rounds of its 264 slots; unsplit, the partial round ran as
  // long as a whole one (0.884 ms, against 0.654 for 784 tiles of 64x128). The same holds for
  // the 1x1 layer of that size (K = 1024) and for a 5x5 layer of N = 100 (391 tiles). Since
  // v22's rates 128x128 loses to 64x128 anyway. 128x96 is a 128-thread shape since v27: the 392
  // tiles of a 384-channel 3x3 layer at batch 64 fit its 396 slots (3 per SM) and ran in one
  // round, 0.760 ms NCHW against 64x128's 0.781 split (0.902 against 0.835 in NHWC; H100). As
  // 256 threads they took two rounds, 1.045 ms.
  EXPECT_EQ(select_k_splits(25088, 256, 2304, TileShape::k128x128, kSms).splits, 1);
  // Charged two whole rounds of 2 tiles, not the even spread's ceil(392 / 132) = 3.
  EXPECT_EQ(busiest_sm_tiles(25088, 256, 2304, kSms, TileShape::k128x128), 4);
  EXPECT_TILE(select_tile(25088, 256, 2304, kSms, kK), TileShape::k64x128);
  EXPECT_TILE(select_tile(25088, 256, 1024, kSms, kK), TileShape::k64x128);
  EXPECT_TILE(select_tile(50048, 100, 425, kSms, kK), TileShape::k64x128);
  EXPECT_TILE(select_tile(12544, 384, 3456, kSms, kK), TileShape::k128x96);
  EXPECT_EQ(busiest_sm_tiles(12544, 384, 3456, kSms, TileShape::k128x96), 3);
  // Whole rounds only: 528 tiles on 264 slots (batch 172) keep 128x128's cost per SM.
  EXPECT_EQ(busiest_sm_tiles(33712, 256, 2304, kSms, TileShape::k128x128), 4);
  // The 128-thread shapes keep the even spread: 280 unsplit tiles of 64x128 (K = 256) are 3 on
  // the busiest SM, not two whole rounds of 264 slots' 2 each.
  EXPECT_EQ(select_k_splits(8960, 256, 256, TileShape::k64x128, kSms).splits, 1);
  EXPECT_EQ(busiest_sm_tiles(8960, 256, 256, kSms, TileShape::k64x128), 3);
}

TEST(TileSelect, TailSplitRoundOfWideTilesKeepsItsCost) {
  // A 128-channel 3x3 layer at 28x28 without padding, batch 64 (M = 43264, N = 128, K = 1152):
  // 338 tiles of 128x128, whose tail the split rule divides 3 ways: the split blocks fill the
  // slots, so no whole-round charge. (It ran 0.330 ms, the fastest shape measured, against
  // 0.356 for 64x128 split 8 ways, which the rule takes at v22's rates: one of its two losses.)
  const KSplit ks = select_k_splits(43264, 128, 1152, TileShape::k128x128, kSms);
  EXPECT_EQ(ks.splits, 3);
  EXPECT_GT(ks.head_tiles, 0);
  EXPECT_EQ(busiest_sm_tiles(43264, 128, 1152, kSms, TileShape::k128x128), 3);
}

TEST(TileSelect, OtherSmCountsShiftTheTail) {
  // The conv11-like GEMM on a GPU with 144 SMs: 288 tiles of 128x128 are exactly two per SM
  // (three on the busiest of 132, where they are split 4 ways).
  EXPECT_EQ(busiest_sm_tiles(18432, 256, 2304, 144, TileShape::k128x128), 2);
  EXPECT_EQ(busiest_sm_tiles(18432, 256, 2304, kSms, TileShape::k128x128), 3);
  // M = 4264, N = 192: 34 x 3 tiles of 128x64 are at most one per SM on either GPU; 67 x 2 of
  // 64x128 are two on 2 of 132 SMs, so 128x64 wins there. On 144 SMs every wide shape leaves SMs
  // idle, and the small-GEMM rule weighs the shapes with their split plans.
  EXPECT_TILE(select_tile(4264, 192, 2304, kSms, kK), TileShape::k128x64);
  const TileShape t144 = select_tile(4264, 192, 2304, 144, kK);
  for (TileShape other : kAllTileShapes)
    EXPECT_LE(plan_ns(4264, 192, 2304, t144, kK, 144), plan_ns(4264, 192, 2304, other, kK, 144)) << tile_name(other);
}

TEST(TileSelect, ShallowReductionsChargeTheRowsEachShapeComputes) {
  // The k-major 32- and 64-wide tiles stop after the real rows of the last step; the others
  // compute whole 16-deep steps, and the pixel-major stage always does.
  EXPECT_EQ(tile_reduction_rows(18, TileShape::k128x64, kK), 18);
  EXPECT_EQ(tile_reduction_rows(18, TileShape::k128x32, kK), 18);
  EXPECT_EQ(tile_reduction_rows(18, TileShape::k128x96, kK), 32);
  EXPECT_EQ(tile_reduction_rows(18, TileShape::k64x128, kK), 32);
  EXPECT_EQ(tile_reduction_rows(18, TileShape::k128x64, kPix), 32);
  EXPECT_EQ(tile_reduction_rows(576, TileShape::k128x96, kK), 576);
  // 160 filters on a 2-channel 3x3 (C*R*S = 18, batch 32, 96^2): 128x64 ran 1.39x faster than
  // 128x96, which the rule took when it charged no rows (H100, sweep_wide_shallow_layers.csv).
  EXPECT_TILE(select_tile(32 * 96 * 96, 160, 18, kSms, kK), TileShape::k128x64);
  // 128 filters on a 1-channel 3x3 (9 rows, one step): 128x64 1.14x ahead of 64x128.
  EXPECT_TILE(select_tile(128 * 128 * 128, 128, 9, kSms, kK), TileShape::k128x64);
  // A 3-channel 3x3 (27 rows) keeps 64x128 (1.08x ahead of 128x64 in the scalar NHWC gather,
  // level in NCHW); 160 filters at a whole number of steps keep 128x96 (192 columns for 160).
  EXPECT_TILE(select_tile(32 * 112 * 112, 128, 27, kSms, kK), TileShape::k64x128);
  EXPECT_TILE(select_tile(32 * 96 * 96, 160, 576, kSms, kK), TileShape::k128x96);
}

TEST(KSplit, NoSplitWhenTheTilesFillTheGpu) {
  // conv8-like: thousands of tiles.
  const KSplit ks = select_k_splits(1548800, 128, 576, TileShape::k128x128, kSms);
  EXPECT_EQ(ks.splits, 1);
  EXPECT_EQ(ks.tiles_per_split, 36);
}

TEST(KSplit, ShallowReductionsAreNotSplit) {
  // Fewer than two splits' worth of k-steps: the pipeline would not fill.
  EXPECT_EQ(select_k_splits(200, 64, (2 * kMinKTilesPerSplit - 1) * kBK, TileShape::k64x128, kSms).splits, 1);
}

TEST(KSplit, NoDeviceMeansNoSplit) {
  EXPECT_EQ(select_k_splits(200, 512, 4608, TileShape::k64x128, 0).splits, 1);
}

TEST(KSplit, SplitsThatLeaveTheBusiestSmAsBusyAreNotTaken) {
  // 98 tiles of 128x128, 27 k-steps (a 5x5 layer at batch 32): two or three splits still give
  // some SM a whole tile's work, and the partial tiles cost extra (measured 11-22% slower).
  EXPECT_EQ(select_k_splits(12512, 100, 425, TileShape::k128x128, kSms).splits, 1);
  // conv12 at batch 128: 100 tiles of 128x128, 288 k-steps. Two splits predict nothing (measured
  // 1% slower); five give the busiest SM 4 blocks of 58 steps (measured 16% faster).
  EXPECT_EQ(select_k_splits(3200, 512, 4608, TileShape::k128x128, kSms).splits, 5);
}

TEST(KSplit, AFewDeepTilesSplitToTheCap) {
  // conv12 at batch 8: 16 tiles of 64x128, 288 k-steps (measured 4.8x with 8 splits).
  const KSplit ks = select_k_splits(200, 512, 4608, TileShape::k64x128, kSms);
  EXPECT_EQ(ks.splits, kMaxKSplits);
  EXPECT_EQ(ks.tiles_per_split, 36);
}

TEST(KSplit, PartialTilesNeverOutgrowTheIm2colMatrix) {
  // A 1x1 layer with 2048 input and 512 output channels at batch 8 (28 tiles of 64x128): eight
  // splits would hold 8 * 512 floats per pixel against im2col's 2048; four fit.
  const KSplit ks = select_k_splits(392, 512, 2048, TileShape::k64x128, kSms);
  EXPECT_EQ(ks.splits, 4);
}

TEST(KSplit, TheTailOfTheLastRoundIsSplit) {
  // conv6 at batch 128 (M = 12800, N = 512, K_gemm = 2304) in 64x128 tiles: 800 tiles, 6 whole
  // rounds on 132 SMs and 8 tiles more. The head (792 tiles, 198 of the 200 tile rows) runs
  // unsplit; the 8 tail tiles are split.
  const KSplit ks = select_k_splits(12800, 512, 2304, TileShape::k64x128, kSms);
  EXPECT_EQ(ks.head_tiles, 792);
  EXPECT_EQ(ks.m_begin, 198 * 64);
  EXPECT_GE(ks.splits, 2);
}

TEST(KSplit, WholeRoundsAreNotSplit) {
  // 6 * 132 tiles of 64x128 exactly (N = 128): every SM runs 6; nothing to balance.
  EXPECT_EQ(select_k_splits(792 * 64, 128, 2304, TileShape::k64x128, kSms).splits, 1);
}

TEST(KSplit, SplitsCoverTheReductionExactlyAndNoneIsEmpty) {
  std::mt19937 rng(7);
  const TileShape shapes[] = {TileShape::k128x128, TileShape::k64x128, TileShape::k128x64};
  for (int trial = 0; trial < 20000; ++trial) {
    const int64_t m = 1 + rng() % 40000, n = 1 + rng() % 1024, k_gemm = 1 + rng() % 9600;
    const int k_tiles = int((k_gemm + kBK - 1) / kBK);
    const TileShape t = shapes[rng() % 3];
    const KSplit ks = select_k_splits(m, n, k_gemm, t, kSms);
    ASSERT_GE(ks.splits, 1);
    ASSERT_LE(ks.splits, kMaxKSplits);
    // Splits [0, splits - 1) are full; the last holds the rest, at least one step.
    const int last = k_tiles - (ks.splits - 1) * ks.tiles_per_split;
    ASSERT_GE(last, 1) << m << " " << n << " " << k_gemm;
    ASSERT_LE(last, ks.tiles_per_split) << m << " " << n << " " << k_gemm;
    if (ks.splits > 1) {
      ASSERT_GE(ks.tiles_per_split, kMinKTilesPerSplit);
      // The partial tiles of the split rows never outgrow the im2col matrix.
      ASSERT_LE(double(ks.splits) * double(m - ks.m_begin) * double(n), double(k_gemm) * double(m))
          << m << " " << n << " " << k_gemm;
      // Only a GEMM that leaves SMs idle in its last round is split.
      ASSERT_NE(tile_count(m, n, t) % kSms, 0) << m << " " << n;
      // A tail split's head is whole rounds of whole tile rows, and the split rows follow it.
      const int64_t n_tiles = tile_cols(n, t);
      ASSERT_GE(ks.head_tiles, 0);
      ASSERT_LT(ks.head_tiles, tile_count(m, n, t));
      ASSERT_EQ(ks.head_tiles % n_tiles, 0);
      if (ks.head_tiles > 0) ASSERT_EQ(ks.head_tiles, tail_split_head(m, n, t, kSms));
      ASSERT_EQ(ks.m_begin, ks.head_tiles / n_tiles * tile_bm(t));
    } else {
      ASSERT_EQ(ks.head_tiles, 0);
    }
  }
}

// A partial last tile row or column is a tile too.
TEST(TileSelect, TileGridCountsPartialTiles) {
  EXPECT_EQ(tile_rows(392, TileShape::k64x128), 7);    // 6 full rows + 8 pixels
  EXPECT_EQ(tile_rows(392, TileShape::k128x128), 4);
  EXPECT_EQ(tile_cols(100, TileShape::k128x96), 2);
  EXPECT_EQ(tile_count(200, 512, TileShape::k64x128), 16);  // 4 rows x 4 cols
  EXPECT_EQ(tile_count(1, 1, TileShape::k128x128), 1);
}

// A GEMM shorter than one tile row is still 4 deep tiles and splits to the cap, as the conv12
// batch-8 case does (AFewDeepTilesSplitToTheCap).
TEST(KSplit, GemmShorterThanOneTileRowStillSplits) {
  const KSplit ks = select_k_splits(50, 512, 4608, TileShape::k64x128, kSms);
  EXPECT_EQ(ks.splits, kMaxKSplits);
  EXPECT_EQ(ks.tiles_per_split, 36);
}

// 4 tiles of 64x128 with exactly 64 k-steps take 8 splits of exactly kMinKTilesPerSplit steps,
// and 8 splits of 200 x 128 partial tiles are exactly the im2col matrix (200 x 1024): both
// limits are inclusive.
TEST(KSplit, SplitLimitsAreInclusive) {
  const KSplit ks = select_k_splits(200, 128, 64 * kBK, TileShape::k64x128, kSms);
  EXPECT_EQ(ks.splits, kMaxKSplits);
  EXPECT_EQ(ks.tiles_per_split, kMinKTilesPerSplit);
}

// The tail split's memory cap counts its own rows [m_begin, M): the conv6 tail (8 tiles of
// 64x128, 2 tile rows) splits 8 ways; counting all 12800 rows would cap it at 4.
TEST(KSplit, TailSplitMemoryCapCountsOnlyTheSplitRows) {
  const KSplit ks = select_k_splits(12800, 512, 2304, TileShape::k64x128, kSms);
  EXPECT_EQ(ks.head_tiles, 792);
  EXPECT_EQ(ks.splits, 8);
  EXPECT_EQ(ks.tiles_per_split, 18);
}

// A tail split costs two more launches (the head's and the reduction's). M = 23552, N = 256 in 64x128 tiles: 736 tiles, 5 rounds and 76
// tiles; the tail split saves less than the two launches, so the GEMM stays unsplit.
TEST(KSplit, TailSplitPaysForItsExtraLaunches) {
  EXPECT_EQ(select_k_splits(23552, 256, 2304, TileShape::k64x128, kSms).splits, 1);
  EXPECT_EQ(select_k_splits(19392, 192, 576, TileShape::k128x64, kSms).splits, 1);
}

// On a predicted tie the fewer splits win (fewer partial
// tiles in the workspace, less reduction traffic). M = 14336, N = 320, K = 2304 in 128x128
// tiles: the tail's 5 and 7 splits predict exactly the same time.
TEST(KSplit, PredictedTieTakesTheFewerSplits) {
  const KSplit ks = select_k_splits(14336, 320, 2304, TileShape::k128x128, kSms);
  EXPECT_EQ(ks.head_tiles, 264);
  EXPECT_EQ(ks.splits, 5);
}

TEST(ShallowSelect, TakesShallowNarrowNchwOnChipLayersOnly) {
  // Arguments: NCHW, on-chip windows, C, R, S, horizontal stride, filters.
  // Overlapping rows at stride 1: 3x3 stems of 8 to 96 filters (conv7), reductions up to 64, of
  // at most 49 rows beyond 64 filters.
  EXPECT_TRUE(shallow_direct_selected(true, true, 3, 3, 3, 1, 16));
  EXPECT_TRUE(shallow_direct_selected(true, true, 3, 3, 3, 1, 64));
  EXPECT_TRUE(shallow_direct_selected(true, true, 3, 3, 3, 1, 96));
  EXPECT_FALSE(shallow_direct_selected(true, true, 3, 3, 3, 1, 97));   // the GEMM
  EXPECT_TRUE(shallow_direct_selected(true, true, 7, 3, 3, 1, 64));    // 63 deep
  EXPECT_FALSE(shallow_direct_selected(true, true, 7, 3, 3, 1, 65));
  EXPECT_TRUE(shallow_direct_selected(true, true, 1, 7, 7, 1, 96));    // 49 deep
  EXPECT_TRUE(shallow_direct_selected(true, true, 4, 4, 4, 1, 64));    // 64 deep
  EXPECT_TRUE(shallow_direct_selected(true, true, 1, 1, 1, 1, 1));
  // Overlapping rows at stride 2: 96 filters up to 48 deep, 32 beyond; stride 4: 32.
  EXPECT_TRUE(shallow_direct_selected(true, true, 3, 3, 3, 2, 96));
  EXPECT_FALSE(shallow_direct_selected(true, true, 3, 3, 3, 2, 97));
  EXPECT_TRUE(shallow_direct_selected(true, true, 2, 4, 4, 2, 64));
  EXPECT_FALSE(shallow_direct_selected(true, true, 6, 3, 3, 2, 64));   // 54 deep
  EXPECT_TRUE(shallow_direct_selected(true, true, 6, 3, 3, 2, 32));
  EXPECT_TRUE(shallow_direct_selected(true, true, 1, 8, 8, 4, 32));
  EXPECT_FALSE(shallow_direct_selected(true, true, 1, 8, 8, 4, 64));
  EXPECT_FALSE(shallow_direct_selected(true, true, 3, 5, 5, 3, 16));   // 75 deep
  // Windows side by side (S <= stride): 32 filters up to 8 deep, 16 up to 48, none beyond.
  EXPECT_TRUE(shallow_direct_selected(true, true, 8, 1, 1, 1, 32));
  EXPECT_FALSE(shallow_direct_selected(true, true, 16, 1, 1, 1, 32));
  EXPECT_TRUE(shallow_direct_selected(true, true, 16, 1, 1, 1, 16));
  EXPECT_FALSE(shallow_direct_selected(true, true, 64, 1, 1, 1, 16));  // a 1x1 layer, 64 deep
  EXPECT_FALSE(shallow_direct_selected(true, true, 64, 1, 1, 1, 1));
  EXPECT_TRUE(shallow_direct_selected(true, true, 3, 4, 4, 4, 16));    // a 4x4 patchify layer
  EXPECT_FALSE(shallow_direct_selected(true, true, 3, 4, 4, 4, 32));
  EXPECT_FALSE(shallow_direct_selected(true, true, 3, 4, 4, 4, 96));
  EXPECT_FALSE(shallow_direct_selected(true, true, 3, 2, 2, 2, 64));
  EXPECT_FALSE(shallow_direct_selected(true, true, 16, 3, 1, 1, 32));  // width 1: side by side
  EXPECT_TRUE(shallow_direct_selected(true, true, 16, 3, 1, 1, 16));
  // Not the kernel's: too deep, NHWC, materialized windows.
  EXPECT_FALSE(shallow_direct_selected(true, true, 5, 4, 4, 1, 16));   // 80 deep
  EXPECT_FALSE(shallow_direct_selected(true, true, 3, 7, 7, 1, 16));   // 147 deep
  EXPECT_FALSE(shallow_direct_selected(false, true, 3, 3, 3, 1, 16));  // NHWC
  EXPECT_FALSE(shallow_direct_selected(true, false, 3, 3, 3, 1, 16));  // materialized windows
}

// The filter counts the rule gives, on each side of its thresholds.
TEST(ShallowSelect, MaxFiltersByOverlapStrideAndDepth) {
  EXPECT_EQ(shallow_max_filters(3, 3, 3, 1), kShallowWideMaxFilters);
  EXPECT_EQ(shallow_max_filters(1, 7, 7, 1), kShallowWideMaxFilters);  // 49 deep
  EXPECT_EQ(shallow_max_filters(2, 5, 5, 1), kShallowMaxFilters);      // 50 deep
  EXPECT_EQ(shallow_max_filters(4, 4, 4, 1), kShallowMaxFilters);      // 64 deep
  EXPECT_EQ(shallow_max_filters(3, 3, 3, 2), kShallowWideMaxFilters);
  EXPECT_EQ(shallow_max_filters(3, 4, 4, 2), kShallowWideMaxFilters);  // 48 deep
  EXPECT_EQ(shallow_max_filters(1, 7, 7, 2), kShallowNarrowMaxFilters);  // 49 deep
  EXPECT_EQ(shallow_max_filters(3, 3, 3, 3), kShallowSideBySideMaxFilters);  // 3 wide at stride 3
  EXPECT_EQ(shallow_max_filters(1, 5, 5, 3), kShallowNarrowMaxFilters);  // overlapping at stride 3
  EXPECT_EQ(shallow_max_filters(3, 3, 3, 4), shallow_max_filters(27, 1, 1, 1));  // side by side alike
  EXPECT_EQ(shallow_max_filters(8, 1, 1, 1), kShallowNarrowMaxFilters);
  EXPECT_EQ(shallow_max_filters(9, 1, 1, 1), kShallowSideBySideMaxFilters);
  EXPECT_EQ(shallow_max_filters(48, 1, 1, 1), kShallowSideBySideMaxFilters);
  EXPECT_EQ(shallow_max_filters(49, 1, 1, 1), 0);
  EXPECT_EQ(shallow_max_filters(65, 1, 1, 1), 0);
  EXPECT_EQ(shallow_max_filters(5, 13, 1, 1), 0);                   // 65 deep
}

// The direct kernel's channel group: the widest whose warps (jobs x groups) give every SM four,
// never wider than twice the filters; 4 where none does.
TEST(ShallowSelect, ChannelGroupByWarpsPerSm) {
  constexpr int kFour = int(kShallowMinWarpsPerSm) * kSms;  // 528 warps on 132 SMs
  static_assert(kShallowMinWarpsPerSm == 4, "the cases below are at four warps per SM");
  // 64 filters: 4 groups of 16, 8 of 8.
  EXPECT_EQ(shallow_filters_per_thread(kFour / 4, 64, kSms), 16);      // 528 warps of 16
  EXPECT_EQ(shallow_filters_per_thread(kFour / 4 - 1, 64, kSms), 8);   // 524 of 16, 1048 of 8
  EXPECT_EQ(shallow_filters_per_thread(kFour / 8, 64, kSms), 8);       // 528 of 8
  EXPECT_EQ(shallow_filters_per_thread(kFour / 8 - 1, 64, kSms), 4);
  EXPECT_EQ(shallow_filters_per_thread(25, 64, kSms), 4);              // a 56^2 plane at batch 1
  EXPECT_EQ(shallow_filters_per_thread(3088, 64, kSms), 16);           // conv7 at batch 8
  // Group counts round up: 37 filters are 3 groups of 16, 5 of 8.
  EXPECT_EQ(shallow_filters_per_thread(176, 37, kSms), 16);            // 528 warps of 16
  EXPECT_EQ(shallow_filters_per_thread(175, 37, kSms), 8);             // 525 of 16, 875 of 8
  EXPECT_EQ(shallow_filters_per_thread(105, 37, kSms), 4);             // 525 of 8
  // At most twice the filters: 8 filters never take 16, 4 or fewer never 8.
  EXPECT_EQ(shallow_filters_per_thread(1 << 20, 9, kSms), 16);
  EXPECT_EQ(shallow_filters_per_thread(1 << 20, 8, kSms), 8);
  EXPECT_EQ(shallow_filters_per_thread(kFour - 1, 8, kSms), 4);
  EXPECT_EQ(shallow_filters_per_thread(1 << 20, 5, kSms), 8);
  EXPECT_EQ(shallow_filters_per_thread(1 << 20, 4, kSms), 4);
  EXPECT_EQ(shallow_filters_per_thread(1 << 20, 1, kSms), 4);
  // Scales with the SMs; a zero count counts as one SM.
  EXPECT_EQ(shallow_filters_per_thread(132, 64, 2 * kSms), 8);   // 1056 warps of 8
  EXPECT_EQ(shallow_filters_per_thread(100, 64, 2 * kSms), 4);
  EXPECT_EQ(shallow_filters_per_thread(132, 64, 33), 16);
  EXPECT_EQ(shallow_filters_per_thread(4, 16, 0), 16);            // 4 warps of 16
  EXPECT_EQ(shallow_filters_per_thread(2, 16, 0), 8);             // 4 warps of 8
  EXPECT_EQ(shallow_filters_per_thread(1, 16, 0), 4);
  EXPECT_EQ(shallow_filters_per_thread(1, 64, 0), 16);
}

}  // namespace
}  // namespace winconv::im2win
