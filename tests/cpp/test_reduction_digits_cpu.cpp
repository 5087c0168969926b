// The digit stepping of the im2win gathers (src/cuda/im2win/reduction_digits.h) against a fresh
// decode by division, on random radices (filter sizes, channel counts, a radix of 1), starts and
// steps, over many consecutive steps: a wrong carry shows up as a digit out of range or a
// position that no longer decodes to its index.
#include <gtest/gtest.h>

#include <random>

#include "cuda/im2win/reduction_digits.h"

namespace winconv::im2win {
namespace {

void expect_digits(const ReductionDigits& got, int kk, int n_mid, int n_lo) {
  const ReductionDigits want = split_reduction(kk, n_mid, n_lo);
  ASSERT_EQ(got.hi, want.hi) << "kk " << kk << " radix " << n_mid << "x" << n_lo;
  ASSERT_EQ(got.mid, want.mid) << "kk " << kk << " radix " << n_mid << "x" << n_lo;
  ASSERT_EQ(got.lo, want.lo) << "kk " << kk << " radix " << n_mid << "x" << n_lo;
}

TEST(ReductionDigits, SplitRecomposes) {
  for (int n_mid : {1, 3, 7, 11})
    for (int n_lo : {1, 2, 3, 5, 64})
      for (int kk = 0; kk < 3 * n_mid * n_lo + 17; ++kk) {
        const ReductionDigits d = split_reduction(kk, n_mid, n_lo);
        ASSERT_GE(d.mid, 0);
        ASSERT_LT(d.mid, n_mid);
        ASSERT_GE(d.lo, 0);
        ASSERT_LT(d.lo, n_lo);
        ASSERT_EQ((d.hi * n_mid + d.mid) * n_lo + d.lo, kk);
      }
}

TEST(ReductionDigits, SteppingMatchesDivisionOnRandomRadices) {
  std::mt19937 rng(20261129);
  std::uniform_int_distribution<int> radix(1, 13), channels(1, 600), start(0, 5000), step_size(1, 300);
  for (int trial = 0; trial < 2000; ++trial) {
    // NCHW gathers step (c, u, v) with radix (R, S); NHWC gathers (u, v, c) with radix (S, C).
    const bool nhwc = trial % 2 == 1;
    const int n_mid = radix(rng), n_lo = nhwc ? channels(rng) : radix(rng);
    const int step = trial % 3 == 0 ? 16 : step_size(rng);  // 16: the GEMM's BK
    int kk = start(rng);
    ReductionDigits pos = split_reduction(kk, n_mid, n_lo);
    const ReductionDigits d = split_reduction(step, n_mid, n_lo);
    for (int s = 0; s < 64; ++s) {
      step_reduction(pos, d, n_mid, n_lo);
      kk += step;
      expect_digits(pos, kk, n_mid, n_lo);
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(ReductionDigits, StepLargerThanOneRadixPeriod) {
  // BK = 16 against a 1x1 or 3x1 filter: the step carries whole periods through hi.
  for (int n_mid : {1, 2, 3})
    for (int n_lo : {1, 2, 3}) {
      int kk = 5;
      ReductionDigits pos = split_reduction(kk, n_mid, n_lo);
      const ReductionDigits d = split_reduction(16, n_mid, n_lo);
      for (int s = 0; s < 40; ++s) {
        step_reduction(pos, d, n_mid, n_lo);
        kk += 16;
        expect_digits(pos, kk, n_mid, n_lo);
      }
    }
}

}  // namespace
}  // namespace winconv::im2win
