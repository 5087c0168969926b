// The 16-bit outputs' per-element check (rounding_check.h) on hand-made values: it must pass a
// correctly rounded subnormal, which a purely relative bound fails (WINCONV_FUZZ_SEED 6122026,
// case 1610: dx of size 3e-7 in fp16, rounded to 4 subnormal steps from 4.22, read as 92 roundings),
// and still fail values a few roundings too far, NaN, and anything where every term is zero.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "rounding_check.h"

namespace winconv::testing {
namespace {

double fp16(double v) { return __half2float(__float2half_rn(float(v))); }
double bf16(double v) { return __bfloat162float(__float2bfloat16_rn(float(v))); }

TEST(RoundingCheck, ASubnormalRoundedOnceIsWithinOneRounding) {
  const double ref = 2.5179500671985408e-07, mag = 2.9870559222870065e-07;  // the fuzz case's dx
  const double got = fp16(ref);
  ASSERT_EQ(got, 4 * std::ldexp(1.0, -24));  // the nearest fp16 is 4 subnormal steps
  const WorstRounding w = worst_rounding({got}, {ref}, {mag}, Precision::kFP16);
  EXPECT_GT(w.roundings, 0);
  EXPECT_LE(w.roundings, 1);
}

TEST(RoundingCheck, SubnormalsManyStepsOffFail) {
  const double ref = 2.5179500671985408e-07, mag = 2.9870559222870065e-07;
  // 16 roundings of this size are 16 (u mag + 2^-25), about 8.1 subnormal steps: 9 steps off fails.
  const double got = fp16(ref) + 9 * std::ldexp(1.0, -24);
  EXPECT_GT(worst_rounding({got}, {ref}, {mag}, Precision::kFP16).roundings, 16);
  EXPECT_LE(worst_rounding({fp16(ref) + 7 * std::ldexp(1.0, -24)}, {ref}, {mag}, Precision::kFP16).roundings, 16);
}

TEST(RoundingCheck, NormalValuesKeepTheRelativeBound) {
  for (Precision p : {Precision::kFP16, Precision::kBF16}) {
    const double u = unit_roundoff(p);
    for (double ref : {1.0, -3.75e2, 1.5e-2}) {
      const double rounded = p == Precision::kFP16 ? fp16(ref * (1 + 0.3 * u)) : bf16(ref * (1 + 0.3 * u));
      EXPECT_LE(worst_rounding({rounded}, {ref}, {std::fabs(ref)}, p).roundings, 1.01) << ref;
      // 20 roundings off in a 3-element vector: the worst is found and placed.
      const WorstRounding w = worst_rounding({ref, ref * (1 + 20 * u), ref}, {ref, ref, ref},
                                             {std::fabs(ref), std::fabs(ref), std::fabs(ref)}, p);
      EXPECT_GT(w.roundings, 16) << ref;
      EXPECT_LT(w.roundings, 21) << ref;
      EXPECT_EQ(w.at, 1u);
    }
  }
}

TEST(RoundingCheck, NonFiniteAndTermlessErrorsAreInfinite) {
  for (Precision p : {Precision::kFP16, Precision::kBF16}) {
    EXPECT_TRUE(std::isinf(worst_rounding({1.0, NAN}, {1.0, 1.0}, {1.0, 1.0}, p).roundings));
    EXPECT_TRUE(std::isinf(worst_rounding({INFINITY}, {1.0}, {1.0}, p).roundings));
    // every term zero: the output must be exactly zero, not one subnormal step off
    EXPECT_TRUE(std::isinf(worst_rounding({std::ldexp(1.0, -24)}, {0.0}, {0.0}, p).roundings));
    EXPECT_EQ(worst_rounding({0.0, 2.0}, {0.0, 2.0}, {0.0, 2.0}, p).roundings, 0);
  }
}

}  // namespace
}  // namespace winconv::testing
