// The WTConv I/O model that the benchmark divides by time to report achieved bandwidth.
#include <gtest/gtest.h>

#include "cuda/wtconv/wtconv_plan.h"
#include "winconv/wtconv.h"

namespace winconv {
namespace {

WtconvProblem problem(int64_t b, int64_t c, int64_t h, int64_t w, int64_t k, int64_t levels, Precision prec) {
  WtconvProblem p;
  p.batch = b; p.channels = c; p.height = h; p.width = w; p.kernel_size = k; p.levels = levels;
  p.precision = prec;
  return p;
}

TEST(WtconvIoBytes, OneLevelForwardReadsXAndWritesY) {
  // L = 1 has no LL chain: the forward is one kernel reading x and writing y.
  uint64_t fwd = 0, bwd = 0;
  ASSERT_TRUE(wtconv_io_bytes(problem(2, 3, 10, 12, 5, 1, Precision::kFP16), &fwd, &bwd).ok());
  EXPECT_EQ(fwd, 2u * (2 * 3 * 10 * 12) * 2);
  EXPECT_GE(bwd, 3u * (2 * 3 * 10 * 12) * 2);  // x and dy read, dx written, plus partials
}

TEST(WtconvIoBytes, BigShapeMatchesTheDocumentedModel) {
  // docs/wtconv.md: big_L2 fp32 moves 4.3 GB forward (level 2 fused into the base kernel: x read,
  // y written) and 10.7 GB per training step (level 2 fused into the backward base kernel too: x
  // and dy read, dx written, plus the gradient partials).
  const uint64_t n = uint64_t(16) * 128 * 512 * 512;
  uint64_t fwd = 0, bwd = 0;
  ASSERT_TRUE(wtconv_io_bytes(problem(16, 128, 512, 512, 5, 2, Precision::kFP32), &fwd, &bwd).ok());
  EXPECT_EQ(fwd, 2 * n * 4);
  EXPECT_GE(bwd, 3 * n * 4);
  // The gradient partials: 128 channels x 64 blocks (plan.h, kMaxBlockPixels) x (9kk + 1) floats,
  // written and read back (14.8 MB).
  EXPECT_LE(bwd, 3 * n * 4 + uint64_t(2) * 128 * 64 * (9 * 25 + 1) * 4);
}

TEST(WtconvIoBytes, UnfusedTwoLevelBackwardCountsTheLevelKernel) {
  // k = 3 does not fuse the backward's level 2: its level kernel reads x and dy and writes dX_1,
  // which the base kernel reads back (2 N e + 2 e N_1 more than x, dy and dx). k = 5 fuses it in
  // every dtype: x, dy and dx plus the partials.
  const uint64_t n = 2 * 3 * 64 * 64, n1 = 2 * 3 * 32 * 32;
  for (Precision prec : {Precision::kFP32, Precision::kFP16}) {
    const uint64_t e = prec == Precision::kFP32 ? 4 : 2;
    uint64_t f3 = 0, b3 = 0, f5 = 0, b5 = 0;
    ASSERT_TRUE(wtconv_io_bytes(problem(2, 3, 64, 64, 3, 2, prec), &f3, &b3).ok());
    ASSERT_TRUE(wtconv_io_bytes(problem(2, 3, 64, 64, 5, 2, prec), &f5, &b5).ok());
    EXPECT_GE(b3, 3 * n * e + 2 * n * e + 2 * e * n1);
    EXPECT_GE(b5, 3 * n * e);
    EXPECT_LT(b5, 3 * n * e + 2 * n * e);  // fused: no second read of x and dy
  }
}

TEST(WtconvIoBytes, UnfusedTwoLevelForwardCountsTheLevelKernel) {
  // k = 3 does not fuse level 2: its level kernel reads x and writes R_1, which the base kernel
  // reads back (N e + 2 * 4 N_1 more than x and y).
  const uint64_t n = 2 * 3 * 64 * 64, n1 = 2 * 3 * 32 * 32;
  uint64_t fwd = 0, bwd = 0;
  ASSERT_TRUE(wtconv_io_bytes(problem(2, 3, 64, 64, 3, 2, Precision::kFP32), &fwd, &bwd).ok());
  EXPECT_EQ(fwd, 2 * n * 4 + n * 4 + 2 * 4 * n1);
}

TEST(WtconvIoBytes, ThreeLevelsCountTheCascades) {
  // L = 3 keeps the cascades: x read once more (forward), x and dy once more (backward) than the
  // base kernels alone, plus the chains.
  const int64_t n = 2 * 3 * 64 * 64;
  uint64_t fwd = 0, bwd = 0;
  ASSERT_TRUE(wtconv_io_bytes(problem(2, 3, 64, 64, 5, 3, Precision::kFP32), &fwd, &bwd).ok());
  EXPECT_GT(fwd, uint64_t(3 * n * 4));
  EXPECT_GT(bwd, uint64_t(5 * n * 4));
}

TEST(WtconvIoBytes, ThreeLevelForwardIsExact) {
  // x read by the base kernel and by the cascade, y written, and the two 16-byte-per-coefficient
  // level outputs (written and read back) of levels 1 and 2.
  const uint64_t n = 2 * 3 * 64 * 64, n1 = n / 4, n2 = n / 16;
  uint64_t fwd = 0, bwd = 0;
  ASSERT_TRUE(wtconv_io_bytes(problem(2, 3, 64, 64, 5, 3, Precision::kFP32), &fwd, &bwd).ok());
  EXPECT_EQ(fwd, 3 * n * 4 + 16 * n1 + 16 * n2);
}

TEST(WtconvIoBytes, StridedProblemsAddTheFullGridPass) {
  // Stride 2 runs the stride-1 problem on the full grid (this plane's forward too, whose stride-1
  // twin fuses level 2: k = 5, L = 2): the subsample reads the No elements it keeps and writes the
  // strided y; the spread reads dy (No) and writes the full-grid gradient (N) that the stride-1
  // backward reads.
  const uint64_t n = 2 * 3 * 64 * 64, no = 2 * 3 * 32 * 32, e = 4;
  WtconvProblem strided = problem(2, 3, 64, 64, 5, 2, Precision::kFP32), full = strided;
  strided.stride = 2;
  ASSERT_GT(wtconv_detail::make_wtconv_plan(full).fwd_fused_smem, 0u);
  uint64_t sf = 0, sb = 0, ff = 0, fb = 0;
  ASSERT_TRUE(wtconv_io_bytes(strided, &sf, &sb).ok());
  ASSERT_TRUE(wtconv_io_bytes(full, &ff, &fb).ok());
  EXPECT_EQ(sf, ff + 2 * no * e);
  EXPECT_EQ(sb, fb + (no + n) * e);
  // Unfused (k = 3), the stride-2 forward runs its own schedule (the base conv folded into level 1)
  // and moves its own plan's bytes: x and the strided y, no full-grid pass. The backward still adds
  // the spread.
  strided.kernel_size = full.kernel_size = 3;
  ASSERT_TRUE(wtconv_io_bytes(strided, &sf, &sb).ok());
  ASSERT_TRUE(wtconv_io_bytes(full, &ff, &fb).ok());
  uint64_t own_f = 0, own_b = 0;
  wtconv_detail::plan_io_bytes(wtconv_detail::make_wtconv_plan(strided), e, &own_f, &own_b);
  EXPECT_EQ(sf, own_f);
  EXPECT_LT(sf, ff);
  EXPECT_EQ(sb, fb + (no + n) * e);
}

TEST(WtconvIoBytes, RejectsBadArguments) {
  uint64_t fwd = 0, bwd = 0;
  EXPECT_EQ(wtconv_io_bytes(problem(2, 3, 10, 12, 4, 1, Precision::kFP32), &fwd, &bwd).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(wtconv_io_bytes(problem(2, 3, 10, 12, 5, 1, Precision::kFP32), nullptr, &bwd).code(),
            StatusCode::kNullPointer);
}

}  // namespace
}  // namespace winconv
