// The WTConv launch plan (host-only): every kernel's tile covers its grid, fits its shared-memory
// budget, and the workspace regions are aligned and disjoint, on random valid problems. The GPU
// tests only see the shapes they run; the plan decides tiles for every shape a user may pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/wtconv/wtconv_plan.h"
#include "winconv/wtconv.h"

namespace winconv {
namespace wtconv_detail {
namespace {

WtconvProblem random_problem(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  // Sizes from 1 to a few thousand, with the small and odd extremes over-represented.
  auto extent = [&] {
    switch (pick(0, 3)) {
      case 0: return pick(1, 9);
      case 1: return pick(10, 130);
      case 2: return pick(131, 1100);
      default: return pick(1100, 4100);
    }
  };
  WtconvProblem p;
  p.batch = pick(1, 70);
  p.channels = pick(1, 600);
  p.height = extent();
  p.width = extent();
  p.kernel_size = 2 * pick(0, (kWtconvMaxKernelSize - 1) / 2) + 1;
  p.levels = pick(1, kWtconvMaxLevels);
  p.stride = pick(1, 5);
  const Precision precisions[] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  p.precision = precisions[pick(0, 2)];
  return p;
}

std::string describe(const WtconvProblem& p) {
  return "B" + std::to_string(p.batch) + " C" + std::to_string(p.channels) + " " + std::to_string(p.height) + "x" +
         std::to_string(p.width) + " k" + std::to_string(p.kernel_size) + " L" + std::to_string(p.levels) + " s" +
         std::to_string(p.stride) + " e" + std::to_string(p.precision == Precision::kFP32 ? 4 : 2);
}

void expect_tile_covers(const WtconvTile& t, int64_t B, int64_t C, int64_t gh, int64_t gw, int64_t cell_pixels,
                        size_t budget, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_GE(t.th, 1);
  EXPECT_GE(t.tw, 1);
  EXPECT_GE(t.np, 1);
  EXPECT_GE(int64_t(t.tiles_y) * t.th, gh);
  EXPECT_GE(int64_t(t.tiles_x) * t.tw, gw);
  EXPECT_LT(int64_t(t.tiles_y - 1) * t.th, gh);  // no empty tile rows
  EXPECT_LT(int64_t(t.tiles_x - 1) * t.tw, gw);
  EXPECT_GE(int64_t(t.bgroups) * t.np, B);
  EXPECT_EQ(t.items, int64_t(t.tiles_y) * t.tiles_x * t.bgroups);
  EXPECT_GE(t.splits, 1);
  EXPECT_LE(t.splits, t.items);
  EXPECT_LE(C * t.splits, int64_t(INT32_MAX));  // grid.x of a channel-major launch
  EXPECT_GE(t.splits, std::min(t.items, ceil_div(kTargetBlocks, C)));
  // A block's items cover at most kMaxBlockPixels (and one item) of x, unless each block already
  // has one item or the grid is at its limit.
  const int64_t item_pixels = int64_t(t.np) * t.th * t.tw * cell_pixels;
  if (t.splits < t.items && C * (t.splits + 1) <= int64_t(INT32_MAX))
    EXPECT_LT(ceil_div(t.items, t.splits) * item_pixels, kMaxBlockPixels + item_pixels);
  EXPECT_GT(t.smem, 0u);
  EXPECT_LE(t.smem, budget);
}

// Every filter starts 16-byte aligned; the specialised sizes keep packed filters (their strips read
// k * k floats in a run), the runtime-k instance rows of whole quads (its windows read each row's
// weights as quads), and filter_slot puts every weight of a row in its own slot of that row.
TEST(WtconvPlan, FilterStrideKeepsEveryFilterSixteenByteAligned) {
  for (int k = 1; k <= kWtconvMaxKernelSize; k += 2) {
    const int wp = filter_row_pitch(k);
    EXPECT_EQ(filter_stride(k) % 4, 0) << "k=" << k;
    EXPECT_GE(filter_stride(k), k * wp) << "k=" << k;
    EXPECT_LT(filter_stride(k), k * wp + 4) << "k=" << k;
    if (specialised_kernel_size(k)) {
      EXPECT_EQ(wp, k) << "k=" << k;
    } else {
      EXPECT_EQ(wp % 4, 0) << "k=" << k;
      EXPECT_LT(wp, k + 4) << "k=" << k;
    }
    for (int ij = 0; ij < k * k; ++ij) {
      EXPECT_EQ(filter_slot(ij, k) / wp, ij / k) << "k=" << k << " ij=" << ij;
      EXPECT_EQ(filter_slot(ij, k) % wp, ij % k) << "k=" << k << " ij=" << ij;
    }
  }
}

TEST(WtconvPlan, ForwardBaseCoefficientExtentCoversEveryTile) {
  // The forward base kernel convolves the level-1 coefficients (s * oy) / 2 of its th outputs,
  // starting at (s * y0) / 2 for a tile origin y0 = ty * th; fwd_base_coef_extent must bound them.
  for (int s = 1; s <= 9; ++s)
    for (int t = 1; t <= 64; ++t)
      for (int ty = 0; ty < 8; ++ty) {
        const int y0 = ty * t, first = (s * y0) >> 1;
        const int last = (s * (y0 + t - 1)) >> 1;
        EXPECT_LT(last - first, fwd_base_coef_extent(s, t)) << "s=" << s << " t=" << t << " y0=" << y0;
      }
}

// The quad staging reads a tile row as quads_per_row(cols, lead) aligned quads from origin & ~3:
// they must cover the row for every tile column, and when the lead is claimed to be the same for
// every tile (0 for r even) it must be exactly that, or the last columns of some tile are lost.
void expect_quads_cover(int origin, int cols, int lead, bool exact) {
  const int start = origin & ~3, actual = origin - start;
  EXPECT_TRUE(actual == 0 || actual == 2) << "origin=" << origin;
  if (exact) EXPECT_EQ(actual, lead) << "origin=" << origin;
  EXPECT_GE(start + 4 * quads_per_row(cols, lead), origin + cols) << "origin=" << origin << " lead=" << lead;
}

TEST(WtconvPlan, QuadStagingRowsCoverEveryTileColumn) {
  for (int r = 0; r <= kWtconvMaxKernelSize / 2; ++r)
    for (int tw = 1; tw <= 130; ++tw)
      for (int tx = 0; tx < 40; ++tx) {
        SCOPED_TRACE("r=" + std::to_string(r) + " tw=" + std::to_string(tw) + " tx=" + std::to_string(tx));
        const int blead = bwd_quad_lead(tw, r);
        expect_quads_cover(bwd_base_x_origin(tx, tw, r), 2 * (tw + 2 * r), blead, tw % 2 == 0);
        for (int s = 1; s <= 5; ++s) {
          const int qw = fwd_base_coef_extent(s, tw) + 2 * r, flead = fwd_quad_lead(tw, r, s);
          expect_quads_cover(fwd_base_x_origin(tx, tw, r, s), 2 * qw, flead, (s * tw) % 4 == 0);
        }
      }
}

TEST(WtconvPlan, PaddedPixelPitchIsTheNextOddMultipleOfFour) {
  for (int ew = 1; ew <= 200; ++ew) {
    const int p = bwd_pixel_pitch(ew);
    EXPECT_GE(p, 2 * ew) << "ew=" << ew;
    EXPECT_EQ(p % 8, 4) << "ew=" << ew;  // 16-byte rows; 8 consecutive rows on 8 bank pairs
    EXPECT_LT(p, 2 * ew + 8) << "ew=" << ew;
  }
}

TEST(WtconvPlan, BackwardBasePixelRowsArePaddedUnlessThatCostsAResidentBlock) {
  const auto blocks = [](size_t smem) {
    return std::min<size_t>(bwd_base_blocks_per_sm(5), kSmemPerSm / (smem + kSmemReservedPerBlock));
  };
  // Large planes (16 x 32 coefficient tiles): padded (72 -> 76 floats at k = 5), still 3 blocks.
  WtconvProblem big;
  big.batch = 16; big.channels = 128; big.height = 512; big.width = 512; big.kernel_size = 5; big.levels = 2;
  const WtconvTile tb = make_wtconv_plan(big).bwd_base;
  EXPECT_EQ(tb.pixel_pitch, 76);
  EXPECT_EQ(blocks(tb.smem), size_t(bwd_base_blocks_per_sm(5)));
  // 7 x 7 planes, 16 per block: padding would cost a block, so the rows stay 2 ew wide.
  WtconvProblem small = big;
  small.batch = 64; small.channels = 768; small.height = 7; small.width = 7;
  const WtconvTile ts = make_wtconv_plan(small).bwd_base;
  const int ew = ts.tw + 2 * (small.kernel_size / 2);
  EXPECT_EQ(ts.pixel_pitch, 2 * ew);
  EXPECT_LT(blocks(bwd_base_smem_floats(5, ts.th, ts.tw, ts.np, bwd_pixel_pitch(ew)) * 4), blocks(ts.smem));
}

TEST(WtconvPlan, RuntimeKSubbandRowsSpanAnOddNumberOfBankPairs) {
  // The runtime-k backward's correlation lanes read k consecutive subband rows at one column with
  // 8-byte loads: an odd number of 8-byte pairs a row puts 16 consecutive rows on 16 distinct
  // bank pairs (perf note 102). The padding is the least that does so; the specialised sizes keep
  // their rows of whole 16 bytes.
  for (int k : {1, 9, 11, 13, 15}) {
    for (int tw = 2; tw <= 64; tw += 2) {
      const int ew = tw + 2 * (k / 2), lp = bwd_level_pitch(k, ew);
      EXPECT_EQ((lp / 2) % 2, 1) << "k=" << k << " tw=" << tw;
      EXPECT_TRUE(lp == ew || lp == ew + 2) << "k=" << k << " tw=" << tw;
      EXPECT_EQ(lp == ew, (ew / 2) % 2 == 1) << "k=" << k << " tw=" << tw;
    }
  }
  for (int k : {3, 5, 7})
    for (int ew = 4; ew <= 80; ew += 2) EXPECT_EQ(bwd_level_pitch(k, ew), ew) << "k=" << k;
  // At the 16 x 32 tile: k = 1, 9 and 13 are padded (32, 40, 44 floats), 11 and 15 are not.
  EXPECT_EQ(bwd_level_pitch(1, 32), 34);
  EXPECT_EQ(bwd_level_pitch(9, 40), 42);
  EXPECT_EQ(bwd_level_pitch(11, 42), 42);
  EXPECT_EQ(bwd_level_pitch(13, 44), 46);
  EXPECT_EQ(bwd_level_pitch(15, 46), 46);
}

TEST(WtconvPlan, BackwardBaseHoldsItsLaunchBoundOfBlocks) {
  // A block of large planes (padded rows included) fits as many blocks per SM as its launch bound
  // asks for: 4 at 3 x 3, 3 at 5 x 5.
  EXPECT_EQ(bwd_base_blocks_per_sm(3), 4);
  EXPECT_EQ(bwd_base_blocks_per_sm(5), 3);
  WtconvProblem p;
  p.batch = 16; p.channels = 128; p.height = 512; p.width = 512; p.levels = 2;
  for (int k : {3, 5}) {
    p.kernel_size = k;
    const WtconvTile t = make_wtconv_plan(p).bwd_base;
    EXPECT_EQ(t.pixel_pitch, bwd_pixel_pitch(t.tw + 2 * (k / 2))) << "k=" << k;
    EXPECT_EQ(std::min<size_t>(bwd_base_blocks_per_sm(k), kSmemPerSm / (t.smem + kSmemReservedPerBlock)),
              size_t(bwd_base_blocks_per_sm(k)))
        << "k=" << k;
  }
}

TEST(WtconvPlan, QuadStagedThreeByThreeForwardTakesFiveBlocksWhereTheyFit) {
  // The 5-block quad-staged k = 3 instance (48 registers) runs only plans whose shared memory holds
  // 5 of its blocks; the others keep the 4-block instance. Random problems, strided ones on the
  // full grid where they run there: the stride-1 and stride-2 planes of the random shape sets take
  // 5, the larger tiles of the strided schedule (strides >= 3) and of flat planes often cannot.
  WtconvProblem u11;
  u11.batch = 16; u11.channels = 384; u11.height = 69; u11.width = 73; u11.kernel_size = 3; u11.levels = 2;
  EXPECT_EQ(fwd_base_quad_blocks(3, make_wtconv_run(u11, false).plan.fwd_base.smem), 5);
  EXPECT_EQ(fwd_base_quad_blocks(5, make_wtconv_run(u11, false).plan.fwd_base.smem), fwd_base_blocks_per_sm(5));
  std::mt19937 rng(20261202);
  int planned = 0, five = 0;
  for (int n = 0; n < 3000; ++n) {
    WtconvProblem p = random_problem(rng);
    p.kernel_size = 3;
    if (!wtconv_validate(p).ok()) continue;
    ++planned;
    SCOPED_TRACE(describe(p));
    const size_t smem = make_wtconv_run(p, false).plan.fwd_base.smem;
    const int blocks = fwd_base_quad_blocks(3, smem);
    if (blocks == 5) {
      ++five;
      EXPECT_EQ(resident_blocks(smem, 5), size_t(5)) << "smem " << smem;
    } else {
      EXPECT_EQ(blocks, fwd_base_blocks_per_sm(3));
      EXPECT_LT(resident_blocks(smem, 5), size_t(5)) << "smem " << smem;
    }
  }
  EXPECT_GT(planned, 2000);
  EXPECT_GT(five, planned / 4);
}

TEST(WtconvPlan, LargeProblemsSplitIntoShortBlocks) {
  // big_L2 (16 x 128 x 512^2): kTargetBlocks alone gave 16 splits per channel, 128 backward items
  // (16 x 32 coefficients each) per block; the pixel bound gives 64, 32 items of 2048 pixels, and
  // the forward (32 x 64 outputs) 64 splits of 32 items too.
  WtconvProblem big;
  big.batch = 16; big.channels = 128; big.height = 512; big.width = 512; big.kernel_size = 5; big.levels = 2;
  const WtconvPlan plan = make_wtconv_plan(big);
  EXPECT_EQ(plan.bwd_base.items, 2048);
  EXPECT_EQ(plan.bwd_base.splits, 64);
  EXPECT_EQ(plan.fwd_base.items, 2048);
  EXPECT_EQ(plan.fwd_base.splits, 64);
  // The WTConvNeXt stages and the paper's shapes stay below the bound: kTargetBlocks decides.
  const int64_t shapes[][6] = {{64, 96, 56, 56, 5, 5}, {64, 192, 28, 28, 5, 4}, {64, 384, 14, 14, 5, 3},
                               {64, 768, 7, 7, 5, 2},  {8, 64, 256, 256, 5, 3}, {8, 64, 256, 256, 5, 5}};
  for (const auto& s : shapes) {
    WtconvProblem p;
    p.batch = s[0]; p.channels = s[1]; p.height = s[2]; p.width = s[3]; p.kernel_size = int(s[4]);
    p.levels = int(s[5]);
    SCOPED_TRACE(describe(p));
    const WtconvPlan q = make_wtconv_plan(p);
    const int64_t target = ceil_div(kTargetBlocks, p.channels);
    EXPECT_EQ(q.fwd_base.splits, std::min(q.fwd_base.items, target));
    EXPECT_EQ(q.bwd_base.splits, std::min(q.bwd_base.items, target));
    for (int l = 2; l <= q.L; ++l) {
      EXPECT_EQ(q.fwd_level[l].splits, std::min(q.fwd_level[l].items, target));
      EXPECT_EQ(q.bwd_level[l].splits, std::min(q.bwd_level[l].items, target));
    }
  }
}

// The kernels form a plane index b0 + p (p < np) in int. With batches near 2^31 and planes per item
// that do not divide 2^31 (the sized and balanced base tiles), the last group's indices wrapped
// negative: bgroups * np must stay <= 2^31 for every tile of every plan.
TEST(WtconvPlan, PlaneIndicesOfTheLastGroupFitInt) {
  auto check = [](const WtconvTile& t, const char* what) {
    EXPECT_LE(int64_t(t.bgroups) * t.np, int64_t(1) << 31) << what << " np " << t.np << " bgroups " << t.bgroups;
  };
  std::mt19937_64 rng(31);
  for (int i = 0; i < 400; ++i) {
    WtconvProblem p;
    p.batch = i == 0 ? INT32_MAX : INT32_MAX - int64_t(rng() % 300);  // i = 0: 1 x 1, k = 3, L = 1 below
    p.channels = 1;
    p.height = i == 0 ? 1 : 1 + int64_t(rng() % 2);
    p.width = i == 0 ? 1 : 1 + int64_t(rng() % 3);
    p.kernel_size = i == 0 ? 3 : 1 + 2 * int64_t(rng() % 8);
    p.levels = i == 0 ? 1 : 1 + int64_t(rng() % 8);
    SCOPED_TRACE(describe(p));
    const WtconvPlan plan = make_wtconv_plan(p);
    check(plan.fwd_base, "fwd_base");
    check(plan.bwd_base, "bwd_base");
    for (int l = 2; l <= plan.L; ++l) {
      check(plan.fwd_level[l], "fwd_level");
      check(plan.bwd_level[l], "bwd_level");
    }
  }
}

// A fused backward writes level 2's partials once per base block, more blocks than the level
// kernel's on this plane: the workspace region holds the base kernel's count.
TEST(WtconvPlan, FusedBackwardLevelTwoPartialsFitTheBaseBlocks) {
  WtconvProblem p;
  p.batch = 1; p.channels = 1; p.height = 64; p.width = 64; p.kernel_size = 5; p.levels = 2;
  const WtconvPlan plan = make_wtconv_plan(p);
  ASSERT_GT(plan.bwd_fused_smem, 0u);
  ASSERT_GT(plan.bwd_base.splits, plan.bwd_level[2].splits);
  const size_t need = size_t(plan.C) * plan.bwd_base.splits * 4 * plan.kl[2] * plan.kl[2] * 4;
  EXPECT_GE(plan.bwd_bytes - plan.bwd_part[2], need);
}

// grid.x = C x splits stays in int32 where many channels meet items of many pixels each (here
// a strided problem whose base tiles each exceed kMaxBlockPixels).
TEST(WtconvPlan, ChannelsTimesSplitsFitGridX) {
  WtconvProblem p;
  p.batch = 1; p.channels = 2048; p.height = 1; p.width = 536870911; p.kernel_size = 3; p.levels = 1;
  p.stride = 182;
  ASSERT_TRUE(wtconv_validate(p).ok());
  for (bool backward : {false, true}) {
    const WtconvRun run = make_wtconv_run(p, backward);
    const WtconvTile& t = backward ? run.plan.bwd_base : run.plan.fwd_base;
    EXPECT_LE(run.plan.C * int64_t(t.splits), int64_t(INT32_MAX)) << (backward ? "backward" : "forward");
  }
}

TEST(WtconvPlan, RuntimeKernelSizeBackwardFitsItsBlocksWithTheLargestTile) {
  // The runtime-k backward base (k = 9..15) runs at 2 blocks per SM (128 registers: one kernel
  // holds the correlation rings of every size), its k = 1 instance at 4 (its own ring alone: perf
  // note 107), and the tiles are fitted to those blocks' shared memory: 16 x 32 at every size, 13
  // and 15 included (they stepped down to 16 x 16 to fit the three blocks of before, whose paired
  // dx jobs left half the block idle: perf note 97).
  WtconvProblem p;
  p.batch = 8; p.channels = 64; p.height = 128; p.width = 128; p.levels = 2;
  for (int k : {1, 9, 11, 13, 15}) {
    p.kernel_size = k;
    const WtconvTile t = make_wtconv_plan(p).bwd_base;
    const int blocks = k == 1 ? 4 : 2;
    EXPECT_EQ(bwd_base_blocks_per_sm(k), blocks) << "k=" << k;
    EXPECT_EQ(resident_blocks(t.smem, blocks), size_t(blocks)) << "k=" << k;
    EXPECT_EQ(t.th, 16) << "k=" << k;
    EXPECT_EQ(t.tw, 32) << "k=" << k;
  }
  for (int k : {3, 5, 7}) EXPECT_EQ(bwd_base_blocks_per_sm(k), k == 3 ? 4 : 3) << "k=" << k;
}

TEST(WtconvPlan, RandomProblemsTilesCoverGridsAndFitSharedMemory) {
  std::mt19937 rng(20261129);
  int planned = 0;
  for (int n = 0; n < 3000; ++n) {
    const WtconvProblem p = random_problem(rng);
    if (!wtconv_validate(p).ok()) continue;
    ++planned;
    SCOPED_TRACE(describe(p));
    const WtconvPlan plan = make_wtconv_plan(p);
    expect_tile_covers(plan.fwd_base, p.batch, p.channels, plan.Ho, plan.Wo, int64_t(p.stride) * p.stride,
                       kSmemBudget, "forward base");
    expect_tile_covers(plan.bwd_base, p.batch, p.channels, plan.hl[1], plan.wl[1], 4, kSmemBudget, "backward base");
    const int ew = plan.bwd_base.tw + 2 * plan.r;
    EXPECT_TRUE(plan.bwd_base.pixel_pitch == 2 * ew || plan.bwd_base.pixel_pitch == bwd_pixel_pitch(ew));
    EXPECT_EQ(plan.bwd_base.smem, bwd_base_smem_floats(plan.k, plan.bwd_base.th, plan.bwd_base.tw,
                                                       plan.bwd_base.np, plan.bwd_base.pixel_pitch) * 4);
    for (int l = 2; l <= plan.L; ++l) {
      expect_tile_covers(plan.fwd_level[l], p.batch, p.channels, plan.hl[l], plan.wl[l], 2, kSmemBudget,
                         "forward level " + std::to_string(l));
      expect_tile_covers(plan.bwd_level[l], p.batch, p.channels, plan.hl[l], plan.wl[l], 2, kSmemBudget,
                         "backward level " + std::to_string(l));
    }
    for (int l = 1; l <= plan.L; ++l) {
      EXPECT_EQ(plan.hl[l], (plan.hl[l - 1] + 1) / 2);
      EXPECT_EQ(plan.wl[l], (plan.wl[l - 1] + 1) / 2);
    }
  }
  EXPECT_GT(planned, 2000);  // the generator mostly makes valid problems
}

// A TMA box must start 16-byte aligned in x (an unaligned start is an illegal instruction on the
// GPU): the box origin is the tile origin minus tma_box_offset, which is even and under 16 bytes.
TEST(WtconvPlan, TmaBoxOriginsAreSixteenByteAligned) {
  for (int esize : {2, 4})
    for (int origin = -64; origin <= 64; origin += 2) {
      const int off = tma_box_offset(origin, esize), per16 = 16 / esize;
      EXPECT_GE(off, 0);
      EXPECT_LT(off, per16);
      EXPECT_EQ(off % 2, 0);
      EXPECT_EQ(((origin - off) % per16 + per16) % per16, 0) << "origin " << origin << " esize " << esize;
    }
}

// Where the plan lets the base kernels stage with TMA, the boxes fit the map's rules (sides <= 256,
// rows of whole 16 bytes, room for the largest offset), start on 128-byte boundaries, and cost no
// resident block; the kernels lay out their shared memory with the same functions.
TEST(WtconvPlan, RandomProblemsTmaLayoutsFitTheBoxRules) {
  std::mt19937 rng(20261130);
  int fwd = 0, bwd = 0, fused = 0, bfused = 0, bfused16 = 0;
  const auto resident = [](size_t b, int bound) {
    const size_t n = kSmemPerSm / (b + kSmemReservedPerBlock);
    return n < size_t(bound) ? n : size_t(bound);
  };
  for (int n = 0; n < 4000; ++n) {
    WtconvProblem p = random_problem(rng);
    if (n % 2) p.width = (p.width + 7) / 8 * 8;  // rows of whole 16 bytes half the time
    if (n % 4 == 1) p.kernel_size = 5;           // a specialised size with even r a quarter of the time
    if (!wtconv_validate(p).ok()) continue;
    SCOPED_TRACE(describe(p));
    const WtconvPlan plan = make_wtconv_plan(p);
    const int esize = p.precision == Precision::kFP32 ? 4 : 2, per16 = 16 / esize;
    // A box of xh rows of xp elements over a tile xw wide: rows of whole 16 bytes, room for the
    // largest offset of a tile origin (tma_box_offset) unless the box is read in place, sides <= 256.
    const auto expect_box = [&](int xp, int xw, int xh, bool inplace) {
      EXPECT_EQ((p.width * esize) % 16, 0);
      EXPECT_EQ((xp * esize) % 16, 0);
      EXPECT_GE(xp, xw + (inplace ? 0 : per16 - 2));
      EXPECT_LE(xp, 256);
      EXPECT_LE(xh, 256);
    };
    // A TMA layout of `smem` bytes within the budget and holding the plain layout's resident blocks.
    const auto expect_fits = [&](size_t smem, size_t plain, int bound) {
      EXPECT_LE(smem, kSmemBudget);
      EXPECT_GE(resident(smem, bound), resident(plain, bound));
    };
    if (plan.fwd_base_tma_smem > 0) {
      ++fwd;
      const WtconvTile& t = plan.fwd_base;
      const FwdBaseTmaLayout l = fwd_base_tma_layout(plan.k, plan.stride, t.th, t.tw, t.np, esize);
      EXPECT_EQ(plan.fwd_base_tma_smem, l.bytes());
      EXPECT_TRUE(specialised_kernel_size(plan.k));  // the sizes with a TMA kernel instance
      expect_box(l.xp, l.xw, l.xh, l.inplace);
      EXPECT_EQ(l.filter_bytes % 128, 0u);
      EXPECT_EQ(l.buffer_bytes % 128, 0u);
      EXPECT_GE(l.buffer_bytes, size_t(t.np) * l.xh * l.xp * esize);
      EXPECT_EQ((l.xw / 2) % 2, 0);
      if (l.inplace) {  // every tile origin x0 - 2r is 16-byte aligned
        EXPECT_EQ(esize, 4);
        for (int64_t tx = 0; tx < t.tiles_x; ++tx) EXPECT_EQ(tma_box_offset(fwd_base_x_origin(int(tx), t.tw, plan.r, 1), 4), 0);
      }
      expect_fits(plan.fwd_base_tma_smem, t.smem, fwd_base_blocks_per_sm(plan.k));
    }
    if (plan.fwd_fused_smem > 0) {
      ++fused;
      const WtconvTile& t = plan.fwd_base;
      const FwdFusedLayout l = fwd_fused_layout(plan.k, t.th, t.tw, t.np, esize);
      EXPECT_EQ(plan.fwd_fused_smem, l.bytes());
      EXPECT_EQ(plan.L, 2);
      EXPECT_EQ(plan.stride, 1);
      EXPECT_EQ(t.th % 4, 0);
      EXPECT_EQ(t.tw % 8, 0);
      EXPECT_EQ(l.th2 * 4, t.th);                       // level 2's tile is a quarter of the outputs
      EXPECT_EQ(l.qh, (t.th + 1) / 2 + 4 * plan.r);     // level 1 + its halo + level 2's halo
      EXPECT_EQ(l.yh, t.th / 2 + 2 * plan.r);           // Y_1 and the float tile: level 1 + its halo
      EXPECT_EQ(l.yw, t.tw / 2 + 2 * plan.r);
      // The kernel reads the box from column 0 (no lead-in): every origin x0 - 4r is 16-byte aligned.
      expect_box(l.xp, l.xw, l.xh, true);
      EXPECT_EQ(l.xp, l.xw);
      for (int64_t tx = 0; tx < t.tiles_x; ++tx) EXPECT_EQ(tma_box_offset(int(tx) * t.tw - 4 * plan.r, esize), 0);
      EXPECT_EQ(l.filter_bytes % 128, 0u);
      EXPECT_EQ(l.box_bytes % 128, 0u);
      expect_fits(plan.fwd_fused_smem, t.smem, fwd_base_blocks_per_sm(plan.k));
    }
    if (plan.bwd_base_tma_smem > 0) {
      ++bwd;
      const WtconvTile& t = plan.bwd_base;
      const BwdBaseTmaLayout l = bwd_base_tma_layout(plan.k, t.th, t.tw, t.np, t.pixel_pitch);
      EXPECT_EQ(plan.bwd_base_tma_smem, l.bytes);
      EXPECT_TRUE(specialised_kernel_size(plan.k));
      EXPECT_EQ(esize, 4);
      EXPECT_EQ(l.xs % 128, 0u);
      EXPECT_EQ(l.ds % 128, 0u);
      EXPECT_GE(l.ds, l.xs + size_t(t.np) * l.ph * t.pixel_pitch * 4);
      EXPECT_EQ(l.bar % 8, 0u);
      EXPECT_GE(l.bytes, bwd_base_smem_floats(plan.k, t.th, t.tw, t.np, t.pixel_pitch) * 4);
      EXPECT_EQ(t.pixel_pitch % 4, 0);
      EXPECT_LE(t.pixel_pitch, 256);
      for (int64_t tx = 0; tx < t.tiles_x; ++tx) EXPECT_EQ(tma_box_offset(bwd_base_x_origin(int(tx), t.tw, plan.r), 4), 0);
      expect_fits(plan.bwd_base_tma_smem, t.smem, bwd_base_blocks_per_sm(plan.k));
    }
    if (plan.bwd_fused_smem > 0) {
      ++bfused;
      if (esize == 2) ++bfused16;
      const WtconvTile& t = plan.bwd_base;
      const BwdFusedLayout l = bwd_fused_layout(plan.k, t.th, t.tw, t.np, esize);
      EXPECT_EQ(plan.bwd_fused_smem, l.bytes);
      EXPECT_EQ(l.copy, esize == 2);
      EXPECT_EQ(plan.L, 2);
      EXPECT_EQ(plan.k, 5);
      EXPECT_EQ(t.th % 2, 0);
      EXPECT_EQ(t.tw % 4, 0);
      EXPECT_EQ(l.th2 * 2, t.th);                         // level 2's tile is a quarter of the coefficients
      EXPECT_EQ(l.box_rows, 2 * (t.th + 4 * plan.r));     // level 1's tile + its halo + level 2's halo
      expect_box(l.box_pitch, 2 * (t.tw + 4 * plan.r), l.box_rows, true);
      // The pixel tiles: the whole box (fp32, read in place) or its inner part (16-bit, converted).
      EXPECT_EQ(l.ph, l.copy ? 2 * (t.th + 2 * plan.r) : l.box_rows);
      EXPECT_GE(l.pitch, l.copy ? 2 * (t.tw + 2 * plan.r) : l.box_pitch);
      EXPECT_EQ(l.pitch % 4, 0);
      // Every region 128-byte aligned, in order, none overlapping the next.
      const size_t tile = size_t(t.np) * l.ph * l.pitch * 4;
      const size_t order[] = {l.xs, l.ds, l.ys, l.gs, l.y2s, l.g2s, l.dz, l.dz2, l.end};
      for (size_t i = 0; i + 1 < sizeof(order) / sizeof(order[0]); ++i) {
        EXPECT_EQ(order[i] % 128, 0u);
        EXPECT_LT(order[i], order[i + 1]);
      }
      EXPECT_GE(l.ds, l.xs + tile);
      EXPECT_GE(l.ys, l.ds + tile);
      EXPECT_EQ(l.xbox % 128, 0u);
      EXPECT_EQ(l.dbox % 128, 0u);
      EXPECT_EQ(l.box_bytes, size_t(t.np) * l.box_rows * l.box_pitch * esize);
      if (l.copy) {  // the boxes borrow G_1's region (x) and dY_1's and dY_2's (dy)
        EXPECT_EQ(l.xbox, l.gs);
        EXPECT_EQ(l.dbox, l.dz);
        EXPECT_LE(l.gs + l.box_bytes, l.y2s);
        EXPECT_LE(l.dz + l.box_bytes, l.end);
      } else {
        EXPECT_EQ(l.xbox, l.xs);
        EXPECT_EQ(l.dbox, l.ds);
      }
      EXPECT_LE(size_t(bwd_fused_red_floats(plan.k)) * 4, l.ys - l.xs);  // the partials reuse the pixel tiles
      EXPECT_GE(l.bar, l.end);
      EXPECT_EQ(l.bar % 8, 0u);
      EXPECT_EQ(l.bytes, l.bar + 16);  // one mbarrier per box
      // Every box origin 2 (x0 - 2r) is 16-byte aligned, as the copy engine requires.
      for (int64_t tx = 0; tx < t.tiles_x; ++tx)
        EXPECT_EQ(tma_box_offset(bwd_base_x_origin(int(tx), t.tw, 2 * plan.r), esize), 0);
      expect_fits(plan.bwd_fused_smem, t.smem, bwd_base_blocks_per_sm(plan.k));
      // The level-2 partials' workspace holds one slot per base block.
      EXPECT_GE(bwd_level_partial_splits(plan, 2), t.splits);
    }
  }
  EXPECT_GT(fwd, 200);  // the generator reaches all four layouts (304, 389, 29 and 110 times with this seed)
  EXPECT_GT(bwd, 40);
  EXPECT_GT(fused, 0);
  EXPECT_GT(bfused, 0);
  EXPECT_GT(bfused16, 0);
}

// Workspace regions [offset, offset + bytes) of one pass, in the order the plan lays them out.
void expect_disjoint_aligned(std::vector<std::pair<size_t, size_t>> regions, size_t total, const char* what) {
  SCOPED_TRACE(what);
  std::sort(regions.begin(), regions.end());
  size_t end = 0;
  for (const auto& [off, bytes] : regions) {
    EXPECT_EQ(off % kWorkspaceAlign, 0u);
    EXPECT_GE(off, end);
    EXPECT_GT(bytes, 0u);
    end = off + bytes;
  }
  EXPECT_LE(end, total);
}

TEST(WtconvPlan, RandomProblemsWorkspaceRegionsAreAlignedAndDisjoint) {
  std::mt19937 rng(7);
  for (int n = 0; n < 1000; ++n) {
    const WtconvProblem p = random_problem(rng);
    if (!wtconv_validate(p).ok()) continue;
    SCOPED_TRACE(describe(p));
    const WtconvPlan plan = make_wtconv_plan(p);
    const size_t planes = size_t(p.batch * p.channels), kk = size_t(plan.k) * plan.k;
    auto grid = [&](int l, size_t elem) { return planes * size_t(plan.hl[l]) * size_t(plan.wl[l]) * elem; };
    std::vector<std::pair<size_t, size_t>> fwd, bwd;
    for (int l = 1; l < plan.L; ++l) {
      if (!plan.fwd_level2_direct) fwd.push_back({plan.fwd_x[l], grid(l, 4)});
      fwd.push_back({plan.fwd_r[l], grid(l, 4)});
      const size_t chain = l == 1 ? plan.chain_bytes : 4;
      if (!plan.bwd_level2_direct || l >= 2) {  // X_1 and G_1 are not stored when level 2 reads x, dy
        bwd.push_back({plan.bwd_x[l], grid(l, chain)});
        bwd.push_back({plan.bwd_g[l], grid(l, chain)});
      }
      bwd.push_back({plan.bwd_dx[l], grid(l, chain)});
    }
    bwd.push_back({plan.bwd_part[1], size_t(p.channels) * plan.bwd_base.splits * (5 * kk + 1) * 4});
    for (int l = 2; l <= plan.L; ++l) {
      // A backward that fuses level 2 writes its partials per base block: room for the larger count.
      const size_t splits = l == 2 && plan.bwd_fused_smem > 0
                                ? size_t(std::max(plan.bwd_level[l].splits, plan.bwd_base.splits))
                                : size_t(plan.bwd_level[l].splits);
      bwd.push_back({plan.bwd_part[l], size_t(p.channels) * splits * 4 * plan.kl[l] * plan.kl[l] * 4});
    }
    expect_disjoint_aligned(fwd, plan.fwd_bytes, "forward workspace");
    expect_disjoint_aligned(bwd, plan.bwd_bytes, "backward workspace");
    EXPECT_EQ(plan.chain_bytes, p.precision == Precision::kFP32 ? 4u : 2u);
  }
}

// A strided run on the full grid runs the plan of the stride-1 problem, with the full-grid
// activation (N elements) after that plan's workspace, aligned; the workspace queries report the
// runs' sizes. The backward takes the full grid at every stride > 1, the forward by its rule.
TEST(WtconvPlan, StridedRunsOnTheFullGrid) {
  std::mt19937 rng(11);
  int forward_full = 0, forward_strided = 0;
  for (int n = 0; n < 1000; ++n) {
    const WtconvProblem p = random_problem(rng);
    if (!wtconv_validate(p).ok()) continue;
    SCOPED_TRACE(describe(p));
    WtconvProblem unit = p;
    unit.stride = 1;
    const WtconvPlan full = make_wtconv_plan(unit);
    const size_t e = p.precision == Precision::kFP32 ? 4 : 2;
    for (const bool backward : {false, true}) {
      const WtconvRun run = make_wtconv_run(p, backward);
      const bool on_full = p.stride > 1 && (backward || forward_on_full_grid(p.stride, full));
      if (!backward) (on_full ? forward_full : forward_strided) += p.stride > 1;
      const size_t plan_bytes = backward ? run.plan.bwd_bytes : run.plan.fwd_bytes;
      if (on_full) {
        EXPECT_EQ(run.out_stride, p.stride);
        EXPECT_EQ(run.plan.stride, 1);
        EXPECT_EQ(run.plan.Ho, p.height);
        EXPECT_EQ(run.plan.Wo, p.width);
        EXPECT_EQ(run.full_offset % kWorkspaceAlign, 0u);
        EXPECT_GE(run.full_offset, plan_bytes);
        EXPECT_EQ(run.bytes, run.full_offset + size_t(p.x_elements()) * e);
      } else {
        EXPECT_EQ(run.out_stride, 1);
        EXPECT_EQ(run.plan.stride, p.stride);
        EXPECT_EQ(run.bytes, plan_bytes);
      }
      size_t queried = 0;
      ASSERT_TRUE((backward ? wtconv_backward_workspace_size(p, &queried) : wtconv_forward_workspace_size(p, &queried))
                      .ok());
      EXPECT_EQ(queried, run.bytes);
    }
  }
  // Both forward schedules occur among the random strided problems.
  EXPECT_GT(forward_full, 0);
  EXPECT_GT(forward_strided, 0);
}

// Every field of a tile.
bool same_tile(const WtconvTile& a, const WtconvTile& b) {
  return a.th == b.th && a.tw == b.tw && a.np == b.np && a.tiles_y == b.tiles_y && a.tiles_x == b.tiles_x &&
         a.bgroups == b.bgroups && a.items == b.items && a.splits == b.splits && a.smem == b.smem &&
         a.pixel_pitch == b.pixel_pitch;
}

// The backward kernels run at stride 1 only (a strided backward runs its stride-1 twin's plan on
// the full grid), so the backward fields of a plan made at stride > 1 are the twin's: tiles,
// staging layouts, workspace layout and bytes moved.
TEST(WtconvPlan, BackwardFieldsAreTheStrideOneTwins) {
  std::mt19937 rng(13);
  int strided = 0;
  for (int n = 0; n < 1000; ++n) {
    const WtconvProblem p = random_problem(rng);
    if (p.stride == 1 || !wtconv_validate(p).ok()) continue;
    ++strided;
    SCOPED_TRACE(describe(p));
    WtconvProblem unit = p;
    unit.stride = 1;
    const WtconvPlan a = make_wtconv_plan(p), b = make_wtconv_plan(unit);
    EXPECT_EQ(a.stride, p.stride);
    EXPECT_EQ(a.bwd_level2_direct, b.bwd_level2_direct);
    EXPECT_EQ(a.bwd_base_tma_smem, b.bwd_base_tma_smem);
    EXPECT_EQ(a.bwd_fused_smem, b.bwd_fused_smem);
    EXPECT_TRUE(same_tile(a.bwd_base, b.bwd_base));
    for (int l = 2; l <= a.L; ++l) EXPECT_TRUE(same_tile(a.bwd_level[l], b.bwd_level[l])) << "level " << l;
    for (int l = 0; l <= kWtconvMaxLevels; ++l) {
      EXPECT_EQ(a.bwd_x[l], b.bwd_x[l]);
      EXPECT_EQ(a.bwd_g[l], b.bwd_g[l]);
      EXPECT_EQ(a.bwd_dx[l], b.bwd_dx[l]);
      EXPECT_EQ(a.bwd_part[l], b.bwd_part[l]);
    }
    EXPECT_EQ(a.bwd_bytes, b.bwd_bytes);
    const size_t e = p.precision == Precision::kFP32 ? 4 : 2;
    uint64_t fwd_a = 0, bwd_a = 0, fwd_b = 0, bwd_b = 0;
    plan_io_bytes(a, e, &fwd_a, &bwd_a);
    plan_io_bytes(b, e, &fwd_b, &bwd_b);
    EXPECT_EQ(bwd_a, bwd_b);
  }
  EXPECT_GT(strided, 500);  // strides 2-5 are four fifths of the generator's problems
}

// The forward's rule at the cases it was measured on: stride 2 only when the stride-1 forward
// fuses level 2 (elsewhere its own schedule folds the base conv into the level-1 filters); stride 3
// when the stride-1 forward stages x with TMA (rows of whole 16 bytes); stride 4 and up only when
// it fuses level 2.
TEST(WtconvPlan, ForwardFullGridRule) {
  struct Case { int64_t w, levels, stride; bool full; };
  const Case cases[] = {{112, 1, 2, false}, {112, 3, 2, false}, {75, 2, 2, false}, {112, 2, 2, true}, {112, 1, 3, true},
                        {112, 3, 3, true}, {75, 2, 3, false}, {112, 1, 4, false}, {112, 3, 4, false},
                        {112, 2, 4, true}, {112, 2, 8, true}, {112, 2, 1, false}};
  for (const Case& c : cases) {
    WtconvProblem p;
    p.batch = 8; p.channels = 64; p.height = 100; p.width = c.w; p.kernel_size = 5; p.levels = c.levels;
    p.stride = c.stride; p.precision = Precision::kFP32;
    SCOPED_TRACE(describe(p));
    EXPECT_EQ(make_wtconv_run(p, false).out_stride > 1, c.full);
    EXPECT_EQ(make_wtconv_run(p, true).out_stride > 1, c.stride > 1);
  }
}

// The backward folds the base conv into level 1 at stride 2 alone, and not where the stride-1
// twin fuses level 2 (k = 5, L = 2, rows of whole 16 bytes): that kernel keeps its base passes.
// Every strided backward runs on the full grid, folded or not.
TEST(WtconvPlan, BackwardFoldRule) {
  struct Case { int64_t w, k, levels, stride; Precision prec; bool fold; };
  const Case cases[] = {{112, 5, 1, 2, Precision::kFP32, true},  {112, 5, 3, 2, Precision::kFP32, true},
                        {75, 5, 2, 2, Precision::kFP32, true},   {112, 5, 2, 2, Precision::kFP32, false},
                        {112, 5, 2, 2, Precision::kBF16, false}, {112, 7, 2, 2, Precision::kFP16, true},
                        {112, 3, 2, 2, Precision::kFP32, true},  {112, 9, 2, 2, Precision::kFP32, true},
                        {112, 1, 2, 2, Precision::kFP16, true},  {112, 5, 1, 3, Precision::kFP32, false},
                        {112, 7, 3, 4, Precision::kFP32, false}, {112, 7, 3, 1, Precision::kFP32, false}};
  for (const Case& c : cases) {
    WtconvProblem p;
    p.batch = 8; p.channels = 64; p.height = 100; p.width = c.w; p.kernel_size = c.k; p.levels = c.levels;
    p.stride = c.stride; p.precision = c.prec;
    SCOPED_TRACE(describe(p));
    const WtconvRun run = make_wtconv_run(p, true);
    EXPECT_EQ(run.out_stride, c.stride);
    EXPECT_EQ(backward_folds_base(c.stride, run.plan), c.fold);
    if (c.stride == 2) EXPECT_EQ(run.plan.bwd_fused_smem > 0, !c.fold) << "at stride 2 the fused twins alone keep the base passes";
  }
}

TEST(WtconvPlan, LevelTwoReadsTheActivations) {
  // L == 2: no stored X_1 (forward) and no X_1 or G_1 (backward); the workspace shrinks by exactly
  // those chains. The forward at L >= 3 keeps its cascade; the 16-bit backward at L >= 3 reads x
  // and dy in level 2 too, its cascades storing levels 2.. alone, while the fp32 backward keeps
  // X_1 and G_1 (stored in float, they round nothing). A strided backward runs the stride-1
  // twin's plan on the full grid.
  for (int levels = 3; levels <= 5; ++levels)
    for (Precision prec : {Precision::kFP32, Precision::kFP16, Precision::kBF16}) {
      WtconvProblem p;
      p.batch = 3; p.channels = 5; p.height = 37; p.width = 52; p.kernel_size = 5; p.levels = levels;
      p.stride = 1; p.precision = prec;
      const WtconvPlan plan = make_wtconv_plan(p);
      SCOPED_TRACE(describe(p));
      EXPECT_FALSE(plan.fwd_level2_direct);
      EXPECT_EQ(plan.bwd_level2_direct, prec != Precision::kFP32);
      if (prec == Precision::kFP32) continue;
      EXPECT_EQ(plan.bwd_x[2], 0u);  // the first chain region holds X_2
      p.stride = 2;
      const WtconvRun run = make_wtconv_run(p, true);
      EXPECT_EQ(run.plan.stride, 1);
      EXPECT_TRUE(run.plan.bwd_level2_direct);
    }
  for (int levels = 1; levels <= 4; ++levels)
    for (int stride = 1; stride <= 3; ++stride) {
      WtconvProblem p;
      p.batch = 3; p.channels = 5; p.height = 37; p.width = 52; p.kernel_size = 5; p.levels = levels;
      p.stride = stride; p.precision = Precision::kFP16;
      const WtconvPlan plan = make_wtconv_plan(p);
      SCOPED_TRACE(describe(p));
      EXPECT_EQ(plan.fwd_level2_direct, levels == 2);
      EXPECT_EQ(plan.bwd_level2_direct, levels >= 2);  // fp16, any stride (the stride-1 twin's fields)
      if (levels != 2) continue;
      const size_t x1 = align_up(size_t(3 * 5 * plan.hl[1] * plan.wl[1]) * 4, kWorkspaceAlign);
      EXPECT_EQ(plan.fwd_bytes, x1);  // R_1 only
      EXPECT_EQ(plan.bwd_dx[1], 0u);  // no stored X_1 or G_1, at any stride
    }
}

// The fused base kernels have compile-time instances for the tiles large planes take
// (kFusedFwdTileH x kFusedFwdTileW outputs, kFusedBwdTileH x kFusedBwdTileW coefficients, one plane
// per item); if the tile pickers stopped giving those, the fused problems would silently fall back
// to the slower run-time-tile instances.
TEST(WtconvPlan, LargeFusedPlanesTakeTheFixedTiles) {
  for (Precision prec : {Precision::kFP32, Precision::kFP16, Precision::kBF16})
    for (const int hw : {64, 136, 512}) {  // rows of whole 16 bytes in every precision
      WtconvProblem p;
      p.batch = 4; p.channels = 8; p.height = hw; p.width = 2 * hw; p.kernel_size = 5; p.levels = 2;
      p.stride = 1; p.precision = prec;
      const WtconvPlan plan = make_wtconv_plan(p);
      SCOPED_TRACE(describe(p));
      EXPECT_GT(plan.fwd_fused_smem, 0u);
      EXPECT_GT(plan.bwd_fused_smem, 0u);
      EXPECT_EQ(plan.fwd_base.th, kFusedFwdTileH);
      EXPECT_EQ(plan.fwd_base.tw, kFusedFwdTileW);
      EXPECT_EQ(plan.fwd_base.np, 1);
      EXPECT_EQ(plan.bwd_base.th, kFusedBwdTileH);
      EXPECT_EQ(plan.bwd_base.tw, kFusedBwdTileW);
      EXPECT_EQ(plan.bwd_base.np, 1);
      // The fixed backward instance takes every correlation row as quads in whole chunks.
      const int esize = prec == Precision::kFP32 ? 4 : 2;
      EXPECT_TRUE(bwd_fused_quads_ok(bwd_fused_layout(5, kFusedBwdTileH, kFusedBwdTileW, 1, esize), 5, kFusedBwdTileH,
                                     kFusedBwdTileW));
    }
  // A tile whose level-2 rows are not whole quads fails the check.
  EXPECT_FALSE(bwd_fused_quads_ok(bwd_fused_layout(5, 16, 20, 1, 4), 5, 16, 20));
}

// Base tiles that cover their grid poorly take the tile sized to the grid (fitted_tile_extent:
// the same tile counts, extents rounded up to 8 x 8 outputs or 4 x 4 coefficients), where that
// was measured to pay: the stride-1 forward and the compile-time-k backward, unfused, coverage
// below kFitCoverage; the runtime-k backward in rows of 2 coefficients, unless the sized width puts
// its coefficient rows 32 floats apart (runtime_k_bwd_fit_width_ok). The benchmark shapes keep the
// power-of-two tiles.
TEST(WtconvPlan, PoorlyCoveredPlanesTakeFittedBaseTiles) {
  EXPECT_DOUBLE_EQ(tile_coverage(64, 128, 32, 64), 1.0);
  EXPECT_NEAR(tile_coverage(69, 73, 32, 64), 69.0 * 73 / (96 * 128), 1e-12);
  // 69 rows in 32-row tiles: 3 tiles of 23 rows, 24 in whole units of 8; 73 columns in 64: 2 of 37, 40.
  EXPECT_EQ(fitted_tile_extent(69, 32, 8), 24);
  EXPECT_EQ(fitted_tile_extent(73, 64, 8), 40);
  EXPECT_EQ(fitted_tile_extent(35, 16, 4), 12);
  EXPECT_EQ(fitted_tile_extent(37, 32, 4), 20);
  EXPECT_EQ(fitted_tile_extent(64, 32, 8), 32);  // a grid of whole tiles keeps them
  auto problem = [](int64_t B, int64_t C, int64_t H, int64_t W, int k, int L, int s, Precision prec) {
    WtconvProblem p;
    p.batch = B; p.channels = C; p.height = H; p.width = W; p.kernel_size = k; p.levels = L; p.stride = s;
    p.precision = prec;
    return p;
  };
  // The forward tile in outputs, the backward tile in level-1 coefficients.
  auto expect_tiles = [](const WtconvPlan& plan, int fwd_th, int fwd_tw, int bwd_th, int bwd_tw) {
    EXPECT_EQ(plan.fwd_base.th, fwd_th);
    EXPECT_EQ(plan.fwd_base.tw, fwd_tw);
    EXPECT_EQ(plan.bwd_base.th, bwd_th);
    EXPECT_EQ(plan.bwd_base.tw, bwd_tw);
  };
  // 69 x 73 (rows off the 16-byte rule: no TMA, no fusion): 41% and 42% coverage -> 24 x 40 outputs
  // (87% kept) and 12 x 20 coefficients (90%).
  for (Precision prec : {Precision::kFP32, Precision::kFP16}) {
    const WtconvPlan a = make_wtconv_plan(problem(16, 384, 69, 73, 3, 2, 1, prec));
    expect_tiles(a, 24, 40, 12, 20);
    EXPECT_EQ(a.fwd_base.tiles_y, 3);
    EXPECT_EQ(a.fwd_base.tiles_x, 2);
    EXPECT_EQ(a.fwd_base_tma_smem, 0u);
    EXPECT_EQ(a.fwd_fused_smem, 0u);
  }
  // The same plane with TMA staging (k 3, rows of whole 16 bytes) takes the fitted forward tile
  // too, still staged by TMA; fused (k 5, L 2) it keeps the rule's tiles, as does a strided forward.
  const WtconvPlan tma = make_wtconv_plan(problem(16, 384, 69, 76, 3, 2, 1, Precision::kFP32));
  EXPECT_GT(tma.fwd_base_tma_smem, 0u);
  EXPECT_EQ(tma.fwd_fused_smem, 0u);
  EXPECT_EQ(tma.fwd_base.th, 24);
  EXPECT_EQ(tma.fwd_base.tw, 40);
  const WtconvPlan fused = make_wtconv_plan(problem(16, 64, 69, 76, 5, 2, 1, Precision::kFP32));
  EXPECT_GT(fused.fwd_fused_smem, 0u);
  EXPECT_GT(fused.bwd_fused_smem, 0u);
  EXPECT_EQ(fused.fwd_base.tw, 64);
  EXPECT_EQ(fused.bwd_base.tw, 32);
  // Stride 2: 17 x 97 outputs in the 16 x 32 tiles of its cap cover 40%. The folded forward's
  // outputs are level-1 coefficients: sized in units of 4, 12 x 28 (2 x 4 tiles, 74% kept). Its
  // backward runs on the full grid (17 x 97 coefficients) and takes the fitted tile.
  const WtconvPlan strided = make_wtconv_plan(problem(16, 384, 34, 194, 3, 2, 2, Precision::kFP32));
  EXPECT_EQ(strided.Wo, 97);
  EXPECT_LT(tile_coverage(strided.Ho, strided.Wo, 16, 32), kFitCoverage);
  expect_tiles(strided, 12, 28, 12, 28);
  // Stride 3 (its base conv at the strided outputs, unmeasured with sized tiles) keeps the cap's.
  const WtconvPlan stride3 = make_wtconv_plan(problem(16, 384, 51, 291, 3, 2, 3, Precision::kFP32));
  EXPECT_EQ(stride3.Ho, 17);
  EXPECT_EQ(stride3.Wo, 97);
  EXPECT_EQ(stride3.fwd_base.th, 16);
  EXPECT_EQ(stride3.fwd_base.tw, 32);
  // 54 x 87 covers 57%: 32 x 48 outputs, 16 x 24 coefficients.
  const WtconvPlan mid = make_wtconv_plan(problem(16, 160, 54, 87, 5, 1, 1, Precision::kFP32));
  expect_tiles(mid, 32, 48, 16, 24);
  // The runtime-k backward (k = 9): 35 x 37 coefficients in 16 x 32 tiles (42%) -> 12 x 20.
  const WtconvPlan k9 = make_wtconv_plan(problem(16, 64, 69, 73, 9, 2, 1, Precision::kFP32));
  expect_tiles(k9, 24, 40, 12, 20);
  // k = 11, 50 x 38 coefficients (46%): 50 rows in 4 tiles, 14 in rows of 2 (16 in units of 4).
  const WtconvPlan k11 = make_wtconv_plan(problem(8, 64, 100, 75, 11, 3, 1, Precision::kFP32));
  EXPECT_EQ(k11.bwd_base.th, 14);
  EXPECT_EQ(k11.bwd_base.tw, 20);
  // v3's 72 x 21 grid (59%) would size to 16 x 24, whose rows lie 32 floats apart at k = 9: kept.
  const WtconvPlan narrow = make_wtconv_plan(problem(16, 256, 143, 42, 9, 1, 1, Precision::kFP32));
  EXPECT_EQ(narrow.bwd_base.th, 16);
  EXPECT_EQ(narrow.bwd_base.tw, 32);
  EXPECT_FALSE(runtime_k_bwd_fit_width_ok(24, 9));
  EXPECT_TRUE(runtime_k_bwd_fit_width_ok(24, 11));
  EXPECT_FALSE(runtime_k_bwd_fit_width_ok(20, 13));
  // A flat plane (1 x 70 outputs, 55% of two 1 x 64 tiles) keeps its one-row tiles, which sizing
  // would make 8 rows tall.
  const WtconvPlan flat = make_wtconv_plan(problem(4, 8, 1, 70, 5, 1, 1, Precision::kFP32));
  EXPECT_LT(tile_coverage(flat.Ho, flat.Wo, 1, 64), kFitCoverage);
  expect_tiles(flat, 1, 64, 1, 32);
  // 112 x 114 covers 78%: kept.
  const WtconvPlan well = make_wtconv_plan(problem(16, 128, 112, 114, 3, 2, 1, Precision::kFP32));
  expect_tiles(well, 32, 64, 16, 32);
  // The benchmark shapes (bench/wtconv_shapes.csv) keep the power-of-two tiles, in every precision.
  const int64_t bench[][6] = {{64, 96, 56, 56, 5, 5},   {64, 192, 28, 28, 5, 4}, {64, 384, 14, 14, 5, 3},
                              {64, 768, 7, 7, 5, 2},    {8, 64, 256, 256, 5, 1}, {8, 64, 256, 256, 5, 3},
                              {8, 64, 256, 256, 5, 5},  {16, 128, 512, 512, 5, 2}};
  for (Precision prec : {Precision::kFP32, Precision::kFP16, Precision::kBF16})
    for (const auto& b : bench) {
      const WtconvProblem p = problem(b[0], b[1], b[2], b[3], int(b[4]), int(b[5]), 1, prec);
      SCOPED_TRACE(describe(p));
      const WtconvPlan plan = make_wtconv_plan(p);
      EXPECT_EQ(plan.fwd_base.th, pow2_at_least(p.height, 32));
      EXPECT_EQ(plan.fwd_base.tw, pow2_at_least(p.width, 64));
      EXPECT_EQ(plan.bwd_base.th, pow2_at_least(plan.hl[1], 16));
      EXPECT_EQ(plan.bwd_base.tw, pow2_at_least(plan.wl[1], 32));
    }
}

// A stride-1 fp32 problem.
WtconvProblem stride1_problem(int64_t B, int64_t C, int64_t H, int64_t W, int k, int L) {
  WtconvProblem p;
  p.batch = B; p.channels = C; p.height = H; p.width = W; p.kernel_size = k; p.levels = L;
  return p;
}

// A base tile with more planes per item than the rule gives (`more` against `rule`, forward or
// backward) has at least the rule's planes and keeps the rule's resident blocks; true when it
// took more planes.
bool expect_more_planes_keep_blocks(const WtconvTile& more, const WtconvTile& rule, int blocks_per_sm) {
  EXPECT_GE(more.np, rule.np);
  EXPECT_GE(resident_blocks(more.smem, blocks_per_sm), resident_blocks(rule.smem, blocks_per_sm));
  return more.np > rule.np;
}

// Calls check(problem, plan) for each valid one of `draws` random problems (SCOPED_TRACE'd).
template <typename Check>
void for_random_plans(uint32_t seed, int draws, Check check) {
  std::mt19937 rng(seed);
  for (int n = 0; n < draws; ++n) {
    const WtconvProblem p = random_problem(rng);
    if (!wtconv_validate(p).ok()) continue;
    SCOPED_TRACE(describe(p));
    check(p, make_wtconv_plan(p));
  }
}

// A base tile asked for through the hint keeps the unscaled rule: here, one plane per item.
void expect_hinted_tiles_take_one_plane(const WtconvProblem& p, int fwd_th, int fwd_tw, int bwd_th, int bwd_tw) {
  WtconvTileHint hint;
  hint.fwd_th = fwd_th; hint.fwd_tw = fwd_tw; hint.bwd_th = bwd_th; hint.bwd_tw = bwd_tw;
  const WtconvPlan hinted = make_wtconv_plan(p, hint);
  EXPECT_EQ(hinted.fwd_base.np, 1);
  EXPECT_EQ(hinted.bwd_base.np, 1);
}

// A sized tile takes twice the planes per item the rule gives a tile of its size
// (ItemPlanes::kScaled: about 2048 outputs or 512 coefficients per item), unless that costs its
// kernel a resident block; a tile asked for through the hint keeps the unscaled rule.
TEST(WtconvPlan, FittedTilesTakeMorePlanesPerItem) {
  // 9 x 65 (z1 of the sixth random set): 16 x 40 outputs, 640 per plane: 3 planes where the
  // unscaled rule gave 1; 8 x 20 coefficients, 160 per plane: 3 where it gave 1.
  const WtconvPlan z1 = make_wtconv_plan(stride1_problem(32, 512, 9, 65, 5, 1));
  EXPECT_EQ(z1.fwd_base.th, 16);
  EXPECT_EQ(z1.fwd_base.tw, 40);
  EXPECT_EQ(z1.fwd_base.np, 3);
  EXPECT_EQ(z1.bwd_base.th, 8);
  EXPECT_EQ(z1.bwd_base.tw, 20);
  EXPECT_EQ(z1.bwd_base.np, 3);
  // The hint's tile: the unscaled rule (one plane per item).
  expect_hinted_tiles_take_one_plane(stride1_problem(32, 512, 9, 65, 5, 1), 16, 40, 8, 20);
  // 69 x 73 (u11): 24 x 40 outputs and 12 x 20 coefficients, 2 planes each.
  const WtconvPlan u11 = make_wtconv_plan(stride1_problem(16, 384, 69, 73, 3, 2));
  EXPECT_EQ(u11.fwd_base.np, 2);
  EXPECT_EQ(u11.bwd_base.np, 2);
  // Random problems: a fitted tile never has fewer planes than the unscaled rule gives the same
  // tile, nor fewer resident blocks.
  int scaled = 0;
  for_random_plans(29, 3000, [&](const WtconvProblem& p, const WtconvPlan& plan) {
    const WtconvTile f1 = pick_fwd_base_tile(p.batch, p.channels, plan.Ho, plan.Wo, plan.k, plan.stride,
                                             plan.fwd_base.th, plan.fwd_base.tw);
    const WtconvTile b1 =
        pick_bwd_base_tile(p.batch, p.channels, plan.hl[1], plan.wl[1], plan.k, plan.bwd_base.th, plan.bwd_base.tw);
    const bool fwd = expect_more_planes_keep_blocks(plan.fwd_base, f1, fwd_base_blocks_per_sm(plan.k));
    const bool bwd = expect_more_planes_keep_blocks(plan.bwd_base, b1, bwd_base_blocks_per_sm(plan.k));
    scaled += fwd || bwd;
  });
  EXPECT_GT(scaled, 50);
}

// The rule's own tiles take up to twice its planes per item where the busiest block's modelled
// cost falls by at least 5% (balance_planes); a tile asked for through the hint keeps the rule.
TEST(WtconvPlan, RuleTilesBalancePlanesPerItem) {
  // wtcnx_s1 (28 x 28 planes in 32 x 32 tiles): 2 planes per item where the rule gives 1.
  const WtconvPlan s1 = make_wtconv_plan(stride1_problem(64, 192, 28, 28, 5, 4));
  EXPECT_EQ(s1.fwd_base.np, 2);
  EXPECT_EQ(s1.bwd_base.np, 2);
  // wtcnx_s2: 6 where the rule gives 4 (8 would leave 8 items over 6 blocks).
  const WtconvPlan s2 = make_wtconv_plan(stride1_problem(64, 384, 14, 14, 5, 3));
  EXPECT_EQ(s2.fwd_base.np, 6);
  EXPECT_EQ(s2.bwd_base.np, 6);
  // k = 11 on the same planes: the forward's 6 planes model only 3% cheaper, so the rule's 4 stay.
  const WtconvPlan k11 = make_wtconv_plan(stride1_problem(64, 384, 14, 14, 11, 2));
  EXPECT_EQ(k11.fwd_base.np, 4);
  EXPECT_EQ(k11.bwd_base.np, 4);
  expect_hinted_tiles_take_one_plane(stride1_problem(64, 192, 28, 28, 5, 4), 32, 32, 16, 16);
  // Random problems: never fewer planes or resident blocks than the rule, and more planes only
  // where the modelled busiest block costs at least 5% less.
  int balanced = 0;
  for_random_plans(31, 3000, [&](const WtconvProblem& p, const WtconvPlan& plan) {
    const int64_t B = p.batch, C = p.channels;
    const WtconvTile f1 = pick_fwd_base_tile(B, C, plan.Ho, plan.Wo, plan.k, plan.stride);
    const WtconvTile f2 =
        pick_fwd_base_tile(B, C, plan.Ho, plan.Wo, plan.k, plan.stride, 0, 0, ItemPlanes::kBalanced);
    const WtconvTile b1 = pick_bwd_base_tile(B, C, plan.hl[1], plan.wl[1], plan.k);
    const WtconvTile b2 = pick_bwd_base_tile(B, C, plan.hl[1], plan.wl[1], plan.k, 0, 0, ItemPlanes::kBalanced);
    const bool fwd = expect_more_planes_keep_blocks(f2, f1, fwd_base_blocks_per_sm(plan.k));
    const bool bwd = expect_more_planes_keep_blocks(b2, b1, bwd_base_blocks_per_sm(plan.k));
    if (fwd)
      EXPECT_LE(20 * base_tile_cost(f2, false, B, C, plan.Ho, plan.Wo, plan.k, plan.stride),
                19 * base_tile_cost(f1, false, B, C, plan.Ho, plan.Wo, plan.k, plan.stride));
    if (bwd)
      EXPECT_LE(20 * base_tile_cost(b2, true, B, C, plan.hl[1], plan.wl[1], plan.k),
                19 * base_tile_cost(b1, true, B, C, plan.hl[1], plan.wl[1], plan.k));
    balanced += fwd || bwd;
  });
  EXPECT_GT(balanced, 50);
}

// Planes per item asked for through the hint (sweeps): taken exactly, at most the batch, fewer
// only where the item would leave the shared-memory budget; with or without a hinted tile.
TEST(WtconvPlan, HintedPlanesPerItem) {
  WtconvTileHint hint;
  hint.fwd_np = 3; hint.bwd_np = 5;
  const WtconvPlan s2 = make_wtconv_plan(stride1_problem(64, 384, 14, 14, 5, 3), hint);
  EXPECT_EQ(s2.fwd_base.np, 3);
  EXPECT_EQ(s2.bwd_base.np, 5);
  EXPECT_EQ(s2.fwd_base.bgroups, 22);
  EXPECT_EQ(s2.bwd_base.bgroups, 13);
  EXPECT_EQ(s2.fwd_base.smem, fwd_base_smem_floats(5, 1, s2.fwd_base.th, s2.fwd_base.tw, 3) * 4);
  // With a hinted tile, and a runtime-k backward (k = 9), whose resident-block step is skipped.
  hint.fwd_th = 8; hint.fwd_tw = 16; hint.bwd_th = 8; hint.bwd_tw = 8;
  hint.fwd_np = 7; hint.bwd_np = 2;
  const WtconvPlan k9 = make_wtconv_plan(stride1_problem(32, 64, 14, 14, 9, 2), hint);
  EXPECT_EQ(k9.fwd_base.th, 8);
  EXPECT_EQ(k9.fwd_base.tw, 16);
  EXPECT_EQ(k9.fwd_base.np, 7);
  EXPECT_EQ(k9.bwd_base.th, 8);
  EXPECT_EQ(k9.bwd_base.np, 2);
  // More than the batch: the batch.
  WtconvTileHint many;
  many.fwd_np = many.bwd_np = 100;
  const WtconvPlan small_batch = make_wtconv_plan(stride1_problem(6, 32, 7, 7, 5, 2), many);
  EXPECT_EQ(small_batch.fwd_base.np, 6);
  EXPECT_EQ(small_batch.bwd_base.np, 6);
  // Past the budget: as many as fit, at least one.
  const WtconvPlan large = make_wtconv_plan(stride1_problem(64, 8, 512, 512, 5, 2), many);
  EXPECT_GE(large.fwd_base.np, 1);
  EXPECT_LT(large.fwd_base.np, 64);
  EXPECT_LE(large.fwd_base.smem, kSmemBudget);
  EXPECT_LE(large.bwd_base.smem, kSmemBudget);
  EXPECT_GT(fwd_base_smem_floats(5, 1, large.fwd_base.th, large.fwd_base.tw, large.fwd_base.np + 1) * 4,
            kSmemBudget);
}

TEST(WtconvPlan, CascadePlaneTiles) {
  // Planes that fit one tile of at most 32 x 32 take the smallest tile covering them, never below
  // 2^levels; larger planes have none (the band path).
  EXPECT_EQ(cascade_plane_tile_log2(7, 7, 1), 3);
  EXPECT_EQ(cascade_plane_tile_log2(28, 28, 3), 5);
  EXPECT_EQ(cascade_plane_tile_log2(3, 30, 2), 5);
  EXPECT_EQ(cascade_plane_tile_log2(2, 2, 4), 4);
  EXPECT_EQ(cascade_plane_tile_log2(1, 1, 1), 1);
  EXPECT_EQ(cascade_plane_tile_log2(8, 5, 3), 3);
  EXPECT_EQ(cascade_plane_tile_log2(9, 5, 3), 4);
  EXPECT_EQ(cascade_plane_tile_log2(32, 32, 5), 5);
  EXPECT_EQ(cascade_plane_tile_log2(33, 2, 1), -1);
  EXPECT_EQ(cascade_plane_tile_log2(2, 33, 1), -1);
  EXPECT_EQ(cascade_plane_tile_log2(56, 56, 4), -1);
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const int64_t h = 1 + int64_t(rng() % 60), w = 1 + int64_t(rng() % 60);
    const int levels = 1 + int(rng() % 5);
    const int lt = cascade_plane_tile_log2(h, w, levels);
    if (h > 32 || w > 32) {
      ASSERT_EQ(lt, -1) << h << " x " << w;
      continue;
    }
    ASSERT_GE(lt, levels);
    ASSERT_LE(lt, 5);
    ASSERT_TRUE((int64_t(1) << lt) >= h && (int64_t(1) << lt) >= w);
    if (lt > levels) ASSERT_TRUE((int64_t(1) << (lt - 1)) < h || (int64_t(1) << (lt - 1)) < w) << h << " x " << w;
  }
}

// Levels l >= 2 run at the central taps that can meet their grid (level_kernel_size): every tap
// closer to the centre than the grid's longer side, k where the grid is that large, and k for a
// level 2 a base kernel may fuse.
TEST(WtconvPlan, LevelKernelSizeKeepsEveryTapThatMeetsTheGrid) {
  // {k, h, w, kernel size}
  const int sizes[][4] = {{11, 4, 4, 7}, {11, 6, 5, 11}, {15, 3, 7, 13}, {5, 2, 2, 3}, {9, 1, 1, 1}, {3, 1, 2, 3}};
  for (const auto& z : sizes)
    EXPECT_EQ(level_kernel_size(z[0], z[1], z[2]), z[3]) << "k " << z[0] << " on " << z[1] << " x " << z[2];
  struct Case { int64_t B, C, H, W; int k, L, l, kl; };
  const Case cases[] = {{64, 384, 14, 14, 11, 2, 2, 7}, {64, 384, 14, 14, 5, 3, 3, 3}, {64, 384, 14, 14, 5, 3, 2, 5},
                        {2, 8, 9, 40, 13, 4, 4, 5},     {1, 4, 16, 16, 7, 4, 4, 1},     {1, 4, 16, 16, 7, 5, 5, 1},
                        {16, 128, 512, 512, 5, 2, 2, 5}};
  for (const Case& c : cases) {
    WtconvProblem p;
    p.batch = c.B; p.channels = c.C; p.height = c.H; p.width = c.W; p.kernel_size = c.k; p.levels = c.L;
    const WtconvPlan plan = make_wtconv_plan(p);
    SCOPED_TRACE(describe(p));
    EXPECT_EQ(plan.kl[c.l], c.kl);
    for (int l = 2; l <= plan.L; ++l) {
      EXPECT_LE(plan.kl[l], plan.k);
      EXPECT_EQ(plan.kl[l] % 2, 1);
      const bool fusable = l == 2 && (plan.fwd_fused_smem > 0 || plan.bwd_fused_smem > 0);
      EXPECT_EQ(plan.kl[l], fusable ? plan.k : level_kernel_size(plan.k, plan.hl[l], plan.wl[l]));
    }
  }
}

}  // namespace
}  // namespace wtconv_detail
}  // namespace winconv
