// How far a 16-bit output lies from its float64 reference, in roundings: the error of each element
// over the most one rounding can move a value whose terms have size `mag`. Host code only (the
// 16-bit formats' constants, no device); wtconv_gpu_check.h holds the test's assertion on it.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "winconv/conv2d.h"

namespace winconv::testing {

// Unit roundoff of a 16-bit precision (round to nearest): the relative part of one rounding.
inline double unit_roundoff(Precision p) { return p == Precision::kFP16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }

// Half the smallest subnormal of a 16-bit precision: the absolute part of one rounding. Below the
// normal range the spacing is fixed (2^-24 in fp16, 2^-133 in bf16), so a value of size 3e-7 in
// fp16 rounds by up to 3e-8, about 200 times u times its size.
inline double underflow_roundoff(Precision p) { return p == Precision::kFP16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -134); }

struct WorstRounding {
  double roundings = 0;  // the largest |got - ref| / (u * mag + eta); infinity for a non-finite got
  size_t at = 0;         // its element
};

// The standard model of one rounding, |fl(v) - v| <= u |v| + eta, with |v| at most mag: element i
// is `roundings` such bounds from its reference. A zero error is 0 roundings. A non-finite error is
// infinity, and so is any error where every term is zero (mag 0): zeros round to zero.
inline WorstRounding worst_rounding(const std::vector<double>& got, const std::vector<double>& ref,
                                    const std::vector<double>& mag, Precision p) {
  const double u = unit_roundoff(p), eta = underflow_roundoff(p);
  WorstRounding w;
  for (size_t i = 0; i < got.size() && i < ref.size() && i < mag.size(); ++i) {
    const double err = std::fabs(got[i] - ref[i]);
    const double r = err == 0 ? 0 : std::isfinite(err) && mag[i] > 0 ? err / (u * mag[i] + eta) : INFINITY;
    if (r > w.roundings) {
      w.roundings = r;
      w.at = i;
      if (std::isinf(r)) break;
    }
  }
  return w;
}

}  // namespace winconv::testing
