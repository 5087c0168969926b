// WTConv GPU tests: forward and every gradient against the float64 oracle (FP32 rel L2 <= 1e-5,
// FP16/BF16 <= 1e-2), outputs poisoned with NaN first, NaN never passes, two runs bit-identical.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "cuda/wtconv/wtconv_plan.h"
#include "fuzz_util.h"
#include "gpu_test_util.h"
#include "winconv/wtconv.h"
#include "wtconv_gpu_check.h"

namespace winconv {
namespace {

using namespace winconv::testing;

TEST(WtconvGpu, OddSizesEveryOption) {
  WINCONV_REQUIRE_GPU();
  const int sizes[][2] = {{1, 6}, {5, 3}, {7, 10}, {13, 9}, {2, 2}, {1, 1}, {17, 33}};
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  int i = 0;
  for (auto& hw : sizes)
    for (int k : {1, 3, 5, 7}) {
      run_case(2, 3, hw[0], hw[1], k, 1 + i % 5, 1 + i % 3, P[i % 3], i % 4 != 3, 10 + i);
      ++i;
    }
}

TEST(WtconvGpu, LevelTwoReadsActivations) {
  // L = 2: level 2 forms X_1 and G_1 from x and dy on chip (plan.h, level2_reads_activations).
  // Rows of a multiple of 4 take the 4-element loads, other widths the scalar ones; at stride 2
  // the backward runs on the full grid (on dy spread onto it), the forward on its own schedule with
  // the base conv folded into the level-1 filters.
  WINCONV_REQUIRE_GPU();
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  int i = 0;
  for (Precision prec : P) {
    run_case(2, 3, 20, 24, 5, 2, 1, prec, true, 300 + i++);
    run_case(1, 2, 13, 16, 3, 2, 1, prec, false, 300 + i++);
    run_case(2, 2, 9, 11, 7, 2, 1, prec, true, 300 + i++);
    run_case(1, 2, 12, 20, 9, 2, 2, prec, true, 300 + i++);
  }
  // 16-bit at stride > 1 and any L >= 2: the backward runs on dy spread onto the full grid, where
  // level 2 reads x and the spread dy; odd grids and strides that leave one output per plane
  // included. The shapes are those of the fuzz problems whose bf16 ds_2 the stored 16-bit chains
  // put above 1e-2 (docs/wtconv.md, note 57).
  for (Precision prec : {Precision::kFP16, Precision::kBF16}) {
    run_case(35, 1, 4, 4, 1, 2, 4, prec, true, 320 + i++);
    run_case(34, 1, 10, 4, 7, 4, 2, prec, false, 320 + i++);
    run_case(3, 2, 23, 17, 5, 3, 3, prec, true, 320 + i++);
    run_case(2, 2, 40, 36, 3, 5, 2, prec, true, 320 + i++);
  }
}

// The fused kernels' compile-time tile instances (L = 2, k = 5, stride 1, planes that take the
// 32 x 64 forward and 16 x 32 backward tiles): every phase full and one job per thread in the
// tile, so planes that end inside a tile (37 x 80, 67 x 100) must still come out right, as must
// planes of whole tiles (64 x 128). Small enough for compute-sanitizer (scripts/gpu-check).
TEST(WtconvGpu, FusedFixedTiles) {
  WINCONV_REQUIRE_GPU();
  struct Case { int H, W; Precision prec; };
  const Case cases[] = {{37, 80, Precision::kFP32}, {37, 80, Precision::kFP16}, {37, 80, Precision::kBF16},
                        {67, 100, Precision::kFP32}, {64, 128, Precision::kFP32}, {64, 128, Precision::kBF16}};
  int seed = 500;
  for (const Case& c : cases) {
    WtconvProblem p;
    p.batch = 2; p.channels = 2; p.height = c.H; p.width = c.W; p.kernel_size = 5; p.levels = 2; p.stride = 1;
    p.precision = c.prec;
    const wtconv_detail::WtconvPlan plan = wtconv_detail::make_wtconv_plan(p);
    SCOPED_TRACE(::testing::Message() << c.H << "x" << c.W << " prec " << int(c.prec));
    // The plan takes the fixed tiles, fused (the case covers those instances).
    EXPECT_GT(plan.fwd_fused_smem, 0u);
    EXPECT_GT(plan.bwd_fused_smem, 0u);
    EXPECT_EQ(plan.fwd_base.th, wtconv_detail::kFusedFwdTileH);
    EXPECT_EQ(plan.fwd_base.tw, wtconv_detail::kFusedFwdTileW);
    EXPECT_EQ(plan.bwd_base.th, wtconv_detail::kFusedBwdTileH);
    EXPECT_EQ(plan.bwd_base.tw, wtconv_detail::kFusedBwdTileW);
    run_case(2, 2, c.H, c.W, 5, 2, 1, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// Planes that the power-of-two base tiles cover poorly take tiles sized to them (plan.h:
// fitted_tile_extent; docs/wtconv.md, perf note 78): 24 x 40 outputs and 12 x 20 coefficients on
// 69 x 73 planes, tiles of 20 to 48 columns elsewhere, on planes that end inside a tile, every
// precision and k = 3, 5 and 7 against the oracle; the runtime-k backward (k = 9, 11) in rows of 2
// coefficients (14 and 6 rows), or the power-of-two tile where the sized width would put its rows
// 32 floats apart (perf notes 92 and 94).
// Widths 1, 2 and 3 past a multiple of 4 stage their quads with element loads, the last quad of a
// row partly outside the plane. Sized tiles with several planes per item, the last item short.
TEST(WtconvGpu, FittedTilesOnPoorlyCoveredPlanes) {
  WINCONV_REQUIRE_GPU();
  struct Case { int H, W, k, L; Precision prec; int fwd_th, fwd_tw, bwd_th, bwd_tw; };
  const Case cases[] = {
      {69, 73, 3, 2, Precision::kFP32, 24, 40, 12, 20},  {69, 73, 3, 2, Precision::kFP16, 24, 40, 12, 20},
      {69, 73, 3, 2, Precision::kBF16, 24, 40, 12, 20},  {37, 82, 5, 2, Precision::kFP32, 24, 48, 12, 24},
      {99, 66, 3, 3, Precision::kFP16, 32, 40, 16, 20},  {40, 130, 7, 1, Precision::kBF16, 24, 48, 12, 24},
      {69, 74, 3, 2, Precision::kFP16, 24, 40, 12, 20},  {69, 75, 5, 2, Precision::kFP32, 24, 40, 12, 20},
      {69, 76, 3, 2, Precision::kFP32, 24, 40, 12, 20},  // forward staged by TMA
      {69, 73, 9, 2, Precision::kFP32, 24, 40, 12, 20},  {100, 75, 11, 3, Precision::kFP16, 32, 40, 14, 20},
      {11, 195, 9, 5, Precision::kBF16, 16, 56, 6, 28},  // runtime k: backward sized in rows of 2
      {143, 42, 9, 1, Precision::kFP32, 32, 48, 16, 32}};  // runtime k: 16 x 24 would conflict, kept
  int seed = 560;
  for (const Case& c : cases) {
    WtconvProblem p;
    p.batch = 2; p.channels = 2; p.height = c.H; p.width = c.W; p.kernel_size = c.k; p.levels = c.L; p.stride = 1;
    p.precision = c.prec;
    const wtconv_detail::WtconvPlan plan = wtconv_detail::make_wtconv_plan(p);
    SCOPED_TRACE(::testing::Message() << c.H << "x" << c.W << " k" << c.k << " prec " << int(c.prec));
    EXPECT_EQ(plan.fwd_base.th, c.fwd_th);
    EXPECT_EQ(plan.fwd_base.tw, c.fwd_tw);
    EXPECT_EQ(plan.bwd_base.th, c.bwd_th);
    EXPECT_EQ(plan.bwd_base.tw, c.bwd_tw);
    if (c.W == 76) EXPECT_GT(plan.fwd_base_tma_smem, 0u);
    run_case(2, 2, c.H, c.W, c.k, c.L, 1, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
  // Sized tiles take more planes per item (ItemPlanes::kScaled): 9 x 65 runs items of 3 planes, at
  // batch 5 the last one of 2; 36 x 30 (L = 5) items of 2, at batch 3 the last one of 1.
  struct Group { int B, H, W, L; Precision prec; int np; };
  const Group groups[] = {{5, 9, 65, 1, Precision::kFP32, 3}, {5, 9, 65, 2, Precision::kBF16, 3},
                          {3, 36, 30, 5, Precision::kFP16, 2}};
  for (const Group& g : groups) {
    WtconvProblem p;
    p.batch = g.B; p.channels = 3; p.height = g.H; p.width = g.W; p.kernel_size = 5; p.levels = g.L; p.stride = 1;
    p.precision = g.prec;
    const wtconv_detail::WtconvPlan plan = wtconv_detail::make_wtconv_plan(p);
    SCOPED_TRACE(::testing::Message() << "B" << g.B << " " << g.H << "x" << g.W << " L" << g.L);
    EXPECT_EQ(plan.fwd_base.np, g.np);
    EXPECT_EQ(plan.bwd_base.np, g.np);
    run_case(g.B, 3, g.H, g.W, 5, g.L, 1, g.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// At stride 2 both directions fold the base conv into the level-1 filters (wtconv_fold.h): the
// forward runs on its own schedule, never on the full grid (folded_base_tap), and the backward base
// kernel on the spread dy runs no base conv and no base correlation (folded_dx_tap, C0 from the
// level-1 correlations by folded_corr_tap, sum(D) from G_1's LL). Against the oracle, dx and every
// parameter gradient included: every specialised and runtime kernel size (the runtime-k backward's
// paired and halved dx jobs, the k = 1 instances), odd heights and widths (the last coefficient's
// odd child past the plane), rows of whole 16 bytes (TMA boxes at 70 x 96, k = 3, and the unfused
// TMA backward at 40 x 64, k = 5) and element rows, one-tile and multi-tile planes, levels 1 to 4
// (R_1 and dX_1 added at LL), every dtype. (Where the stride-1 twin fuses level 2, k = 5 and L = 2
// on rows of whole 16 bytes, both directions stay on the full grid unfolded:
// VectorisedAndTmaStagingMatchScalar.)
TEST(WtconvGpu, StrideTwoFoldsTheBaseConv) {
  WINCONV_REQUIRE_GPU();
  struct Case { int B, C, H, W, k, L; };
  const Case cases[] = {{2, 3, 61, 18, 7, 4}, {2, 2, 37, 14, 7, 3},  {3, 2, 40, 64, 5, 3}, {2, 3, 33, 35, 3, 1},
                        {2, 2, 18, 61, 5, 3}, {1, 3, 70, 96, 3, 2},  {2, 2, 29, 23, 1, 2}, {2, 2, 31, 44, 9, 2},
                        {2, 2, 25, 27, 11, 1}, {1, 2, 36, 40, 13, 3}, {2, 2, 19, 21, 15, 2}, {4, 2, 9, 5, 7, 1}};
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  int seed = 700;
  for (const Case& c : cases)
    for (Precision prec : P) {
      WtconvProblem p;
      p.batch = c.B; p.channels = c.C; p.height = c.H; p.width = c.W; p.kernel_size = c.k; p.levels = c.L;
      p.stride = 2; p.precision = prec;
      const wtconv_detail::WtconvRun run = wtconv_detail::make_wtconv_run(p, false);
      EXPECT_EQ(run.out_stride, 1) << c.H << "x" << c.W << " k" << c.k << " L" << c.L << " prec " << int(prec);
      if (c.W == 96) EXPECT_GT(run.plan.fwd_base_tma_smem, 0u) << "the TMA-staged instance at stride 2";
      const wtconv_detail::WtconvRun back = wtconv_detail::make_wtconv_run(p, true);
      EXPECT_EQ(back.out_stride, 2);
      EXPECT_TRUE(wtconv_detail::backward_folds_base(2, back.plan)) << "the backward folds";
      if (c.W == 64 && prec == Precision::kFP32) EXPECT_GT(back.plan.bwd_base_tma_smem, 0u) << "the unfused TMA backward";
      run_case(c.B, c.C, c.H, c.W, c.k, c.L, 2, prec, seed % 2 == 0, seed);
      ++seed;
    }
}

// The folded stride-2 backward's instances for compute-sanitizer (scripts/gpu-check): quad-staged
// k = 7 on an odd plane of several tiles, the unfused TMA k = 5, the runtime-k k = 9 and the k = 1
// whole-plane instance, each against the oracle.
TEST(WtconvGpu, StrideTwoFoldSanitizerCases) {
  WINCONV_REQUIRE_GPU();
  run_case(2, 2, 37, 29, 7, 2, 2, Precision::kFP32, true, 760);
  run_case(1, 2, 40, 64, 5, 3, 2, Precision::kFP32, false, 761);
  run_case(2, 2, 31, 44, 9, 1, 2, Precision::kBF16, true, 762);
  run_case(2, 2, 9, 11, 1, 2, 2, Precision::kFP16, true, 763);
}

// The quad-staged k = 3 forward has two instances that differ only in their launch bound: 5 blocks
// per SM (48 registers) where the plan's shared memory holds 5, else 4 (64 registers; the strided
// schedule's larger tiles). Odd widths, so both take the quad staging; each against the oracle.
TEST(WtconvGpu, QuadStagedThreeByThreeForwardAtBothBounds) {
  WINCONV_REQUIRE_GPU();
  struct Case { int H, W, s; Precision prec; int blocks; };
  const Case cases[] = {{69, 73, 1, Precision::kFP32, 5}, {69, 73, 1, Precision::kBF16, 5},
                        {61, 75, 3, Precision::kFP32, 4}, {40, 37, 4, Precision::kFP16, 4}};
  int seed = 580;
  for (const Case& c : cases) {
    WtconvProblem p;
    p.batch = 2; p.channels = 3; p.height = c.H; p.width = c.W; p.kernel_size = 3; p.levels = 2; p.stride = c.s;
    p.precision = c.prec;
    SCOPED_TRACE(::testing::Message() << c.H << "x" << c.W << " s" << c.s << " prec " << int(c.prec));
    const wtconv_detail::WtconvRun run = wtconv_detail::make_wtconv_run(p, false);
    EXPECT_EQ(run.plan.fwd_base_tma_smem, 0u);
    EXPECT_EQ(wtconv_detail::fwd_base_quad_blocks(3, run.plan.fwd_base.smem), c.blocks);
    run_case(2, 3, c.H, c.W, 3, 2, c.s, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// The runtime-k backward base at every runtime size: 2 blocks per SM and paired dx jobs (two
// level-1 coefficients each), k = 13 and 15 on their 16 x 32 tiles too (perf note 97). Each on a
// plane of several tiles with an odd width (a pair's second coefficient past the plane at the
// right edge) and on a one-tile plane (the kPlane instances), against the oracle.
TEST(WtconvGpu, RuntimeKBackwardPairedDxJobs) {
  WINCONV_REQUIRE_GPU();
  struct Case { int H, W, k, L; Precision prec; };
  const Case cases[] = {{45, 71, 1, 2, Precision::kFP32},  {45, 71, 9, 2, Precision::kFP16},
                        {37, 29, 11, 1, Precision::kBF16}, {45, 71, 13, 2, Precision::kFP32},
                        {45, 71, 15, 2, Precision::kFP32}, {11, 13, 15, 1, Precision::kFP16},
                        {11, 13, 9, 1, Precision::kFP32},  {70, 99, 15, 3, Precision::kBF16},
                        {41, 67, 13, 1, Precision::kFP16}};
  int seed = 620;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.H << "x" << c.W << " k" << c.k << " L" << c.L << " prec " << int(c.prec));
    EXPECT_EQ(wtconv_detail::bwd_base_blocks_per_sm(c.k), c.k == 1 ? 4 : 2);
    run_case(2, 3, c.H, c.W, c.k, c.L, 1, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// The runtime-k backward base with its dx jobs in halves on lane pairs (bwd_dx_half_jobs: items of
// at most 128 jobs), in the whole-plane instance (odd widths) and the tiled one (widths of whole
// quads), against the oracle: odd heights (a pair's second pixel row past the plane), a batch
// that leaves the last item's second plane empty, L >= 2 (dX_1 added at LL), odd widths (a job's
// second coefficient past the plane), and a plane of more jobs that keeps whole ones.
TEST(WtconvGpu, RuntimeKBackwardHalfJobs) {
  WINCONV_REQUIRE_GPU();
  struct Case { int B, C, H, W, k, L; Precision prec; bool halves; };
  const Case cases[] = {{3, 2, 13, 11, 9, 2, Precision::kFP32, true},  {5, 3, 12, 12, 13, 3, Precision::kFP16, true},
                        {1, 2, 21, 17, 11, 2, Precision::kBF16, true}, {4, 2, 14, 14, 15, 1, Precision::kFP32, true},
                        {3, 2, 9, 7, 11, 3, Precision::kFP32, true},   {2, 2, 31, 61, 9, 2, Precision::kFP32, false}};
  int seed = 640;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.B << "x" << c.C << "x" << c.H << "x" << c.W << " k" << c.k << " L" << c.L);
    WtconvProblem p;
    p.batch = c.B; p.channels = c.C; p.height = c.H; p.width = c.W; p.kernel_size = c.k; p.levels = c.L;
    p.precision = c.prec;
    const wtconv_detail::WtconvTile t = wtconv_detail::make_wtconv_run(p, true).plan.bwd_base;
    EXPECT_EQ(wtconv_detail::bwd_dx_half_jobs(c.k, t.th, t.tw, t.np), c.halves);
    run_case(c.B, c.C, c.H, c.W, c.k, c.L, 1, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// Levels whose grids are smaller than the kernel run at their central taps (plan.h,
// level_kernel_size; the rest meet only padding and get zero gradients), against the oracle that
// convolves the whole filter: every dtype, kernel sizes whose cropped size is specialised (7, 5,
// 3) or not, a cropped level in the middle of the chain and at its end, 1 x 1 levels, and a
// strided problem.
TEST(WtconvGpu, LevelsAtTheirCentralTaps) {
  WINCONV_REQUIRE_GPU();
  struct Case { int B, C, H, W, k, L, s; Precision prec; };
  const Case cases[] = {{3, 4, 14, 14, 11, 2, 1, Precision::kFP32}, {2, 3, 13, 9, 15, 4, 1, Precision::kFP16},
                        {2, 5, 14, 14, 5, 3, 1, Precision::kBF16},  {1, 3, 16, 16, 7, 5, 1, Precision::kFP32},
                        {2, 2, 9, 40, 13, 4, 1, Precision::kFP32},  {3, 2, 11, 11, 9, 3, 2, Precision::kFP16},
                        {1, 2, 6, 5, 3, 4, 1, Precision::kFP32}};
  int seed = 660;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.B << "x" << c.C << "x" << c.H << "x" << c.W << " k" << c.k << " L" << c.L
                                      << " s" << c.s);
    WtconvProblem p;
    p.batch = c.B; p.channels = c.C; p.height = c.H; p.width = c.W; p.kernel_size = c.k; p.levels = c.L;
    p.precision = c.prec;
    const wtconv_detail::WtconvPlan plan = wtconv_detail::make_wtconv_plan(p);
    EXPECT_LT(plan.kl[plan.L], c.k);  // the deepest level at least is cropped
    run_case(c.B, c.C, c.H, c.W, c.k, c.L, c.s, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// The fixed tiles' 4 x 4 epilogues store a row of four outputs in one write when y (dx) is
// 4-element aligned, as two pair writes when only 2-element aligned, and element by element
// otherwise: y and dx one and two elements off (x and dy aligned, so the fused instances still
// run) must give the same bits as the aligned run, in every output.
TEST(WtconvGpu, FusedFixedTilesUnalignedOutputs) {
  WINCONV_REQUIRE_GPU();
  for (Precision prec : {Precision::kFP32, Precision::kFP16}) {
    const Shape sh{2, 2, 37, 80, 5, 2, 1};
    const auto aligned = run_shape(sh, prec, true, 600);
    for (int out_offset : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "y and dx " << out_offset << " elements off");
      expect_bit_identical(aligned, run_shape(sh, prec, true, 600, 0, out_offset));
    }
  }
}

TEST(WtconvGpu, RandomShapes) {
  WINCONV_REQUIRE_GPU();
  std::mt19937 rng(4321);
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  for (int i = 0; i < 24; ++i) {
    const int k = 1 + 2 * int(rng() % 8), L = 1 + int(rng() % 8), s = 1 + int(rng() % 3);
    const int lim = k > 9 ? 24 : 64;
    run_case(1 + int(rng() % 3), 1 + int(rng() % 4), 1 + int(rng() % lim), 1 + int(rng() % lim), k, L, s, P[rng() % 3],
             rng() % 4 != 0, 100 + i);
  }
}

// Random problems from families that reach every kernel path: tiny planes many to a block (the
// kPlane instances), medium planes over several tiles, the fused L = 2 / k = 5 planes with rows of
// whole 16 bytes (TMA boxes, the fixed tiles, partial last tiles), the runtime-k kernels (k >= 9),
// and flat planes (one side 1-4); any precision, bias or none, activations one element off
// alignment and y / dx one or two elements off. Every output against the float64 oracle and two
// runs bit-identical (run_case). ds0 and db0 are one sum per channel, so with one channel their
// relative error measures the cancellation of the data rather than the kernels (WINCONV_FUZZ_SEED
// 11, case 256: sum dY = -5.5e-4 over terms of total size 1.26e4, where a sequential float sum is
// 11% off and the kernels were 6%): they are held to the tolerance times the size of their terms
// (run_case's param_grads_by_magnitude). So are the other parameter gradients, whose entries are
// per-channel sums over the pixels as well: dW0, one sum at k = 1 (WINCONV_FUZZ_SEED 9105, case
// 289: B1 C1 54 x 48, k = 1, fp32, dW0 1.09e-5 off), and the level weights and scales, one sum
// where a level's grid is 1 x 1 (WINCONV_FUZZ_SEED 9301, case 234: B33 C1 16 x 4, k = 7, L = 6,
// fp32, dW5 to ds6 1.42e-5 off). WINCONV_FUZZ_CASES and WINCONV_FUZZ_SEED
// (fuzz_util.h) run a longer campaign.
TEST(WtconvGpu, FuzzAgainstOracle) {
  WINCONV_REQUIRE_GPU();
  const int64_t cases = winconv::testing::fuzz_cases(6);
  const uint64_t seed = winconv::testing::fuzz_seed(2026);
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  for (int64_t i = 0; i < cases; ++i) {
    int B = 1, C = 1, H = 1, W = 1, k = 2 * pick(0, 3) + 1, L = pick(1, 5), s = pick(1, 3) == 1 ? pick(1, 4) : 1;
    switch (pick(0, 4)) {
      case 0:  // tiny planes, many per block
        B = pick(1, 40); C = pick(1, 6); H = pick(1, 16); W = pick(1, 16); L = pick(1, 6);
        break;
      case 1:  // medium planes over several tiles
        B = pick(1, 4); C = pick(1, 4); H = pick(17, 90); W = pick(17, 90);
        break;
      case 2:  // the fused L = 2, k = 5 path: rows of whole 16 bytes in fp32 and 16-bit
        B = pick(1, 3); C = pick(1, 3); H = pick(20, 140); W = 8 * pick(3, 25); k = 5; L = 2; s = 1;
        break;
      case 3:  // the runtime-k kernels
        B = pick(1, 3); C = pick(1, 3); H = pick(9, 60); W = pick(9, 60); k = 2 * pick(4, 7) + 1;
        break;
      default:  // flat planes
        B = pick(1, 3); C = pick(1, 3);
        H = pick(1, 4); W = pick(40, 300);
        if (pick(0, 1)) std::swap(H, W);
        break;
    }
    // Keep the float64 oracle to a few seconds: about B C H W k^2 (L + 1) multiply-adds per pass.
    while (double(B) * C * H * W * k * k * (L + 1) > 4e7 && (B > 1 || C > 1)) (B > 1 ? B : C) /= 2;
    const Precision prec = P[pick(0, 2)];
    const bool bias = pick(0, 3) != 0;
    const int offset = pick(0, 6) == 0 ? 1 : 0, out_offset = pick(0, 6) == 0 ? pick(1, 2) : 0;
    SCOPED_TRACE(::testing::Message() << "fuzz case " << i << " (WINCONV_FUZZ_SEED " << seed << ") offset " << offset
                                    << " out_offset " << out_offset);
    run_case(B, C, H, W, k, L, s, prec, bias, uint32_t(seed * 1000 + i), offset, out_offset, true);
    if (HasFailure()) break;  // the first failing case is the one to read
  }
}

TEST(WtconvGpu, ManyPlanesPerBlockAndSplits) {
  WINCONV_REQUIRE_GPU();
  run_case(64, 8, 7, 7, 5, 2, 1, Precision::kFP32, true, 1);
  run_case(16, 6, 14, 14, 5, 3, 1, Precision::kFP32, true, 2);
  run_case(3, 2, 64, 96, 7, 4, 1, Precision::kFP32, true, 3);
  run_case(2, 2, 130, 70, 3, 8, 1, Precision::kFP32, false, 4);
  run_case(2, 2, 50, 45, 15, 3, 2, Precision::kFP32, true, 5);
  // Runtime-k planes over several tiles at stride 1: the vector-read windows of the base kernels
  // (paired dx jobs at k = 11 and 13) at every tile edge.
  run_case(2, 3, 70, 90, 11, 2, 1, Precision::kFP32, true, 6);
  run_case(1, 2, 40, 75, 13, 2, 1, Precision::kFP32, false, 7);
}

TEST(WtconvGpu, PlaneTilesStageThePlaneAlone) {
  WINCONV_REQUIRE_GPU();
  const Shape shapes[] = {{37, 3, 7, 7, 1, 3, 1},  {37, 3, 7, 7, 5, 2, 1},   {20, 2, 14, 14, 3, 3, 2},
                          {9, 2, 15, 11, 15, 2, 1}, {50, 2, 6, 5, 7, 5, 3},   {5, 2, 1, 3, 9, 1, 1},
                          {33, 2, 13, 9, 5, 4, 1},  {17, 2, 12, 12, 11, 2, 1}, {9, 2, 14, 14, 5, 3, 1},
                          {5, 3, 3, 5, 3, 5, 1},    {6, 2, 28, 28, 5, 4, 1},   {4, 2, 28, 28, 9, 3, 1},
                          {11, 2, 20, 20, 7, 3, 1}, {3, 2, 1, 1, 5, 4, 1}};
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  int i = 0;
  for (const Shape& sh : shapes) {
    run_shape(sh, P[i % 3], i % 2 == 0, 700 + i);
    ++i;
  }
  // 12 x 12 rows are 4-element loads (and TMA boxes); one element off alignment the same problem
  // takes kPlane, with the same bits (L = 3: no fused level 2, whose sums are grouped otherwise).
  const Shape sh{17, 2, 12, 12, 5, 3, 1};
  for (Precision prec : P) expect_bit_identical(run_shape(sh, prec, true, 790), run_shape(sh, prec, true, 790, 1));
}

// Rows of whole 16 bytes with aligned x and dy take the TMA staging of the base kernels (the
// forward always where its plan allows, in place or copied; the backward for fp32 with even r) and
// the 4-element (16-byte fp32, 8-byte fp16) staging with the Haar analysis on the fly elsewhere
// (2-element loads on even widths that are not multiples of 4);
// the same problem one element off alignment takes the quad staging with element loads (and an
// L = 2 forward that fuses level 2 into the base kernel then runs the level kernel) and stores y
// and dx one element at a time instead of in column pairs (even widths). All compute the same sums in the
// same order, so every output must be bit-identical. The shapes cover in-place and copied boxes
// (even and odd r), box origins off 16-byte alignment, boxes wider than the plane, 16-bit rows
// that fail the 16-byte rule, strides 2 and 3, and fused forwards and backwards with one and many
// planes per block. A fused backward (L = 2, k = 5: wtconv_layouts.h, bwd_fused_smem; at stride > 1 on the
// full grid, WtconvRun) sums the level-1 and level-2 weight-gradient correlations over other row
// groups and tiles than the two unfused kernels, so dW_1, ds_1, dW_2 and ds_2 may differ in the last
// bits there (checked to 1e-6 relative); every other output must be bit-identical.
TEST(WtconvGpu, VectorisedAndTmaStagingMatchScalar) {
  WINCONV_REQUIRE_GPU();
  const Shape shapes[] = {{2, 3, 20, 24, 5, 2, 1}, {1, 2, 33, 68, 3, 3, 1}, {3, 2, 9, 4, 7, 1, 1},
                          {2, 2, 70, 132, 5, 1, 1}, {2, 2, 21, 40, 3, 2, 1}, {1, 2, 26, 64, 9, 2, 1},
                          {2, 2, 30, 48, 5, 2, 2}, {1, 3, 17, 40, 3, 1, 3}, {16, 3, 8, 8, 5, 2, 1},
                          {2, 2, 37, 80, 5, 2, 1}, {16, 3, 16, 16, 5, 2, 1}, {2, 2, 67, 100, 5, 2, 1},
                          // the cascade's band path: 2-element rows, 4 and 5 levels a launch
                          // (shuffles 1, 2 and 4 lanes apart), a second launch from a float chain
                          {2, 2, 45, 70, 5, 3, 1}, {1, 2, 40, 36, 3, 5, 1}, {1, 2, 70, 100, 3, 6, 1},
                          {1, 1, 260, 300, 3, 8, 1},
                          // base kernels' 2-element rows (even widths, not multiples of 4) against
                          // element loads, tiles of odd r (stored as 8-byte pairs) and of even r,
                          // the runtime-k (k = 9) and k = 1 instances, a strided forward
                          {1, 2, 40, 102, 3, 2, 1}, {2, 2, 35, 78, 7, 3, 1}, {1, 2, 37, 90, 9, 2, 1},
                          {2, 2, 20, 66, 1, 2, 1}, {1, 2, 33, 150, 5, 1, 2}, {2, 2, 50, 134, 5, 4, 1}};
  for (Precision prec : {Precision::kFP32, Precision::kFP16, Precision::kBF16})
    for (const Shape& sh : shapes) {
      const auto aligned = run_shape(sh, prec, true, 77);
      const auto scalar = run_shape(sh, prec, true, 77, 1);
      ASSERT_EQ(aligned.size(), scalar.size());
      EXPECT_FALSE(aligned.empty());
      const bool regrouped = sh.L == 2 && sh.k == 5;
      for (size_t i = 0; i < aligned.size(); ++i) {
        const bool level_grad = i >= 5;  // y, dx, dW0, ds0, db0, then dW_l, ds_l per level
        if (regrouped && level_grad)
          EXPECT_LE(rel_l2(decode(Precision::kFP32, aligned[i]), decode(Precision::kFP32, scalar[i])), 1e-6)
              << "output " << i;
        else
          EXPECT_TRUE(aligned[i] == scalar[i])
              << "vectorised/TMA and scalar staging differ in output " << i << ": B" << sh.B << " C" << sh.C << " "
              << sh.H << "x" << sh.W << " k" << sh.k << " L" << sh.L << " s" << sh.s << " prec" << int(prec);
      }
    }
}

// Levels 6 to 8 on planes small enough for the sanitizers: the Haar cascade's band instances take
// at most 5 levels a launch, so these cascades launch again from a float chain.
TEST(WtconvGpu, DeepCascadesSmall) {
  WINCONV_REQUIRE_GPU();
  const Shape shapes[] = {{1, 2, 70, 100, 3, 6, 1}, {1, 1, 130, 70, 3, 8, 1}, {2, 1, 33, 47, 5, 7, 2}};
  for (Precision prec : {Precision::kFP32, Precision::kBF16})
    for (const Shape& sh : shapes) EXPECT_FALSE(run_shape(sh, prec, true, 91).empty());
}

// Constant parameters of p in DeviceSet's order (base weight, scale, bias, then each level's pair).
std::vector<std::vector<float>> constant_params(const WtconvProblem& p) {
  const size_t kk = size_t(p.kernel_size) * p.kernel_size;
  std::vector<std::vector<float>> set = {std::vector<float>(p.channels * kk, 0.1f), std::vector<float>(p.channels, 1.f),
                                         std::vector<float>(p.channels, 0.f)};
  for (int l = 0; l < int(p.levels); ++l) {
    set.push_back(std::vector<float>(4 * p.channels * kk, 0.1f));
    set.push_back(std::vector<float>(4 * p.channels, 1.f));
  }
  return set;
}

size_t forward_workspace_bytes(const WtconvProblem& p) {
  size_t bytes = 0;
  EXPECT_TRUE(wtconv_forward_workspace_size(p, &bytes).ok());
  return bytes;
}

size_t backward_workspace_bytes(const WtconvProblem& p) {
  size_t bytes = 0;
  EXPECT_TRUE(wtconv_backward_workspace_size(p, &bytes).ok());
  return bytes;
}

// The rejection tests' setting: a small odd-sized two-level problem (fp32 sizes, 4 bytes an
// element), its parameters, and every buffer poisoned, so a test can tell a call wrote nothing.
struct RejectionRig {
  static WtconvProblem problem() {
    WtconvProblem p;
    p.batch = 2; p.channels = 3; p.height = 9; p.width = 11; p.kernel_size = 5; p.levels = 2;
    return p;
  }
  const WtconvProblem p = problem();
  const int L = int(p.levels);
  const DeviceSet dev{constant_params(p)};
  const size_t n = size_t(p.x_elements()) * 4;
  const size_t fws = forward_workspace_bytes(p), bws = backward_workspace_bytes(p);
  DevBuf x{n}, dy{n}, y{n}, dx{n}, fw{fws + 16}, bw{bws + 16};
  const WtconvParams prm = dev.params(L, true);
  const WtconvParamGrads grads = dev.param_grads(L, true);
  RejectionRig() {
    for (DevBuf* b : {&x, &dy, &y, &dx, &fw, &bw}) b->poison();
    dev.poison_grads();
  }
};

// True when every byte of b still holds the poison (a rejected call wrote nothing there).
bool all_poison(const DevBuf& b) {
  const std::vector<char> h = b.to_host();
  return std::all_of(h.begin(), h.end(), [](char c) { return c == char(0xFF); });
}

// Every rejected call returns its status and launches nothing: outputs, gradients and workspaces
// poisoned beforehand are still NaN after the device has finished everything queued.
TEST(WtconvGpu, BadInputsLaunchNothing) {
  WINCONV_REQUIRE_GPU();
  RejectionRig rig;
  const WtconvProblem& p = rig.p;
  const int L = rig.L;
  const DeviceSet& dev = rig.dev;
  DevBuf &x = rig.x, &dy = rig.dy, &y = rig.y, &dx = rig.dx, &fw = rig.fw, &bw = rig.bw;
  const size_t fws = rig.fws, bws = rig.bws;
  const WtconvParams& prm = rig.prm;
  const WtconvParamGrads& grads = rig.grads;
  auto fwd = [&](const WtconvProblem& q, const void* xp, const WtconvParams& pp, void* yp, void* ws, size_t bytes) {
    return wtconv_forward(q, xp, pp, yp, ws, bytes, nullptr).code();
  };
  auto bwd = [&](const WtconvProblem& q, const void* dyp, const void* xp, const WtconvParams& pp, void* dxp,
                 const WtconvParamGrads& gg, void* ws, size_t bytes) {
    return wtconv_backward(q, dyp, xp, pp, dxp, gg, ws, bytes, nullptr).code();
  };
  EXPECT_EQ(fwd(p, nullptr, prm, y.ptr, fw.ptr, fws), StatusCode::kNullPointer);
  EXPECT_EQ(fwd(p, x.ptr, prm, nullptr, fw.ptr, fws), StatusCode::kNullPointer);
  EXPECT_EQ(fwd(p, x.ptr + 2, prm, y.ptr, fw.ptr, fws), StatusCode::kMisalignedPointer);
  EXPECT_EQ(fwd(p, x.ptr, prm, y.ptr + 2, fw.ptr, fws), StatusCode::kMisalignedPointer);
  EXPECT_EQ(fwd(p, x.ptr, prm, y.ptr, fw.ptr, fws - 1), StatusCode::kWorkspaceTooSmall);
  EXPECT_EQ(fwd(p, x.ptr, prm, y.ptr, fw.ptr + 4, fws), StatusCode::kMisalignedPointer);
  WtconvParams no_scale = prm;
  no_scale.level_scale[L - 1] = nullptr;
  EXPECT_EQ(fwd(p, x.ptr, no_scale, y.ptr, fw.ptr, fws), StatusCode::kNullPointer);
  WtconvParams odd_weight = prm;
  odd_weight.base_weight = reinterpret_cast<const float*>(reinterpret_cast<const char*>(prm.base_weight) + 2);
  EXPECT_EQ(fwd(p, x.ptr, odd_weight, y.ptr, fw.ptr, fws), StatusCode::kMisalignedPointer);
  WtconvProblem even = p, deep = p, still = p;
  even.kernel_size = 4;
  deep.levels = kWtconvMaxLevels + 1;
  still.stride = 0;
  for (const WtconvProblem& bad : {even, deep, still}) {
    EXPECT_EQ(fwd(bad, x.ptr, prm, y.ptr, fw.ptr, fws), StatusCode::kInvalidArgument);
    EXPECT_EQ(bwd(bad, dy.ptr, x.ptr, prm, dx.ptr, grads, bw.ptr, bws), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(bwd(p, nullptr, x.ptr, prm, dx.ptr, grads, bw.ptr, bws), StatusCode::kNullPointer);
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, nullptr, grads, bw.ptr, bws), StatusCode::kNullPointer);
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, dx.ptr + 2, grads, bw.ptr, bws), StatusCode::kMisalignedPointer);
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, dx.ptr, grads, bw.ptr, bws - 1), StatusCode::kWorkspaceTooSmall);
  WtconvParamGrads no_grad = grads;
  no_grad.level_weight[0] = nullptr;
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, dx.ptr, no_grad, bw.ptr, bws), StatusCode::kNullPointer);
  WtconvParamGrads odd_grad = grads;
  odd_grad.base_scale = reinterpret_cast<float*>(reinterpret_cast<char*>(grads.base_scale) + 2);
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, dx.ptr, odd_grad, bw.ptr, bws), StatusCode::kMisalignedPointer);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(all_poison(y)) << "a rejected call wrote y";
  EXPECT_TRUE(all_poison(dx)) << "a rejected call wrote dx";
  EXPECT_TRUE(all_poison(fw)) << "a rejected call wrote the forward workspace";
  EXPECT_TRUE(all_poison(bw)) << "a rejected call wrote the backward workspace";
  for (size_t t = 0; t < dev.grads.size(); ++t) EXPECT_TRUE(all_poison(*dev.grads[t])) << grad_name(t);
}

// An error the caller left pending is refused by name and left for the caller to read: a launch
// would have reported it as its own.
TEST(WtconvGpu, PendingErrorLaunchesNothing) {
  WINCONV_REQUIRE_GPU();
  const RejectionRig r;
  const cudaError_t pending = leave_pending_error();
  ASSERT_NE(pending, cudaSuccess);
  for (const Status& st : {wtconv_forward(r.p, r.x.ptr, r.prm, r.y.ptr, r.fw.ptr, r.fws, nullptr),
                           wtconv_backward(r.p, r.dy.ptr, r.x.ptr, r.prm, r.dx.ptr, r.grads, r.bw.ptr, r.bws, nullptr)}) {
    EXPECT_EQ(st.code(), StatusCode::kCudaError);
    EXPECT_NE(st.message().find("pending"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(cudaGetErrorName(pending)), std::string::npos) << st.message();
  }
  EXPECT_EQ(cudaGetLastError(), pending) << "the caller's error was not left for the caller";
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(all_poison(r.y)) << "a refused call wrote y";
  EXPECT_TRUE(all_poison(r.dx)) << "a refused call wrote dx";
  for (size_t t = 0; t < r.dev.grads.size(); ++t) EXPECT_TRUE(all_poison(*r.dev.grads[t])) << grad_name(t);
  // Read and cleared, the same calls run (poisoned inputs: only that they ran is checked).
  EXPECT_TRUE(wtconv_forward(r.p, r.x.ptr, r.prm, r.y.ptr, r.fw.ptr, r.fws, nullptr).ok());
  EXPECT_TRUE(wtconv_backward(r.p, r.dy.ptr, r.x.ptr, r.prm, r.dx.ptr, r.grads, r.bw.ptr, r.bws, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace winconv
