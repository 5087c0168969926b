// The stride-2 forward's folded base conv (wtconv_fold.h): at the outputs (2i, 2j) the base conv of
// x equals the four level-1 subband convs with the folded filters V_t, applied to the Haar
// coefficients of x (zero-padded to even sizes, as WTConv2d pads them). Checked in double against
// the direct convolution, every odd kernel size, odd and even plane sizes, so that a sign, a tap
// offset or a parity mix-up in folded_base_tap fails here without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cuda/wtconv/wtconv_fold.h"

namespace winconv {
namespace {

using wtconv_detail::folded_base_tap;

// The largest |direct - folded| over the strided outputs of one plane, relative to the largest
// |direct|.
double folded_base_error(int H, int W, int k, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const int r = k / 2, h1 = (H + 1) / 2, w1 = (W + 1) / 2;
  std::vector<float> w0(size_t(k) * k), x(size_t(H) * W);
  for (float& v : w0) v = d(rng);
  for (float& v : x) v = d(rng);
  const auto px = [&](int y, int c) { return y >= 0 && c >= 0 && y < H && c < W ? double(x[size_t(y) * W + c]) : 0.0; };
  // Haar coefficients of the zero-padded plane, haar4's order and signs (LL, rows, columns, HH).
  std::vector<double> Y(4 * size_t(h1) * w1);
  for (int m = 0; m < h1; ++m)
    for (int n = 0; n < w1; ++n) {
      const double a = px(2 * m, 2 * n), b = px(2 * m, 2 * n + 1), c = px(2 * m + 1, 2 * n), e = px(2 * m + 1, 2 * n + 1);
      const double y[4] = {0.5 * (a + b + c + e), 0.5 * (a + b - c - e), 0.5 * (a - b + c - e), 0.5 * (a - b - c + e)};
      for (int t = 0; t < 4; ++t) Y[(size_t(t) * h1 + m) * w1 + n] = y[t];
    }
  const auto coef = [&](int t, int m, int n) {
    return m >= 0 && n >= 0 && m < h1 && n < w1 ? Y[(size_t(t) * h1 + m) * w1 + n] : 0.0;
  };
  std::vector<double> V(4 * size_t(k) * k);
  for (int t = 0; t < 4; ++t)
    for (int u = 0; u < k; ++u)
      for (int v = 0; v < k; ++v) V[(size_t(t) * k + u) * k + v] = folded_base_tap(w0.data(), k, t, u, v);
  double err = 0, scale = 0;
  for (int i = 0; i < h1; ++i)
    for (int j = 0; j < w1; ++j) {
      double direct = 0, folded = 0;
      for (int a = 0; a < k; ++a)
        for (int b = 0; b < k; ++b) direct += double(w0[size_t(a) * k + b]) * px(2 * i + a - r, 2 * j + b - r);
      for (int t = 0; t < 4; ++t)
        for (int u = 0; u < k; ++u)
          for (int v = 0; v < k; ++v) folded += V[(size_t(t) * k + u) * k + v] * coef(t, i + u - r, j + v - r);
      if (!std::isfinite(folded)) return INFINITY;
      err = std::max(err, std::fabs(direct - folded));
      scale = std::max(scale, std::fabs(direct));
    }
  return scale > 0 ? err / scale : err;
}

TEST(WtconvFold, StrideTwoBaseConvEqualsFoldedSubbandConvs) {
  std::mt19937 rng(124);
  const int sizes[][2] = {{1, 1}, {2, 2}, {1, 6}, {5, 3}, {7, 10}, {13, 9}, {18, 61}, {37, 14}};
  for (int k = 1; k <= 15; k += 2)
    for (const auto& hw : sizes) {
      SCOPED_TRACE(::testing::Message() << hw[0] << "x" << hw[1] << " k" << k);
      // The taps are sums of at most four float weights: a few float roundings each.
      EXPECT_LE(folded_base_error(hw[0], hw[1], k, rng), 1e-6);
    }
}

// Every base tap lands in exactly one folded tap of each subband, with weight 1/2: the four V_t
// of a one-hot W0 hold that 1/2 (with signs) at the same (u, v), and nothing else.
TEST(WtconvFold, EachBaseTapFoldsOnceIntoEverySubband) {
  for (int k = 1; k <= 15; k += 2) {
    const int r = k / 2;
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b) {
        std::vector<float> w0(size_t(k) * k, 0.f);
        w0[size_t(a) * k + b] = 1.f;
        // floor((a - r) / 2) + r, written for negative a - r too
        const int u = (a - r - ((a - r) & 1)) / 2 + r, v = (b - r - ((b - r) & 1)) / 2 + r;
        for (int t = 0; t < 4; ++t)
          for (int uu = 0; uu < k; ++uu)
            for (int vv = 0; vv < k; ++vv) {
              const float tap = folded_base_tap(w0.data(), k, t, uu, vv);
              if (uu == u && vv == v) EXPECT_EQ(std::fabs(tap), 0.5f) << "k" << k << " a" << a << " b" << b << " t" << t;
              else EXPECT_EQ(tap, 0.f) << "k" << k << " a" << a << " b" << b << " t" << t << " at " << uu << "," << vv;
            }
      }
  }
}

}  // namespace
}  // namespace winconv
