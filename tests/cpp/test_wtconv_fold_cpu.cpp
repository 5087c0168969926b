// The stride-2 folds (wtconv_fold.h), checked in double against the direct sums, every odd kernel
// size, odd and even plane sizes, so that a sign, a tap offset or a parity mix-up fails here
// without a GPU:
// - forward: at the outputs (2i, 2j) the base conv of x equals the four level-1 subband convs with
//   the folded filters V_t (folded_base_tap), applied to the Haar coefficients of x (zero-padded to
//   even sizes, as WTConv2d pads them);
// - backward: the base part of dx from dy spread onto the full grid equals the synthesis of the
//   four folded correlations of dy (folded_dx_tap), and the base weight's correlation with D equals
//   the signed level-1 correlations with G_1 = dy / 2 (folded_corr_tap).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cuda/wtconv/wtconv_fold.h"

namespace winconv {
namespace {

using wtconv_detail::folded_base_tap;
using wtconv_detail::fold_sign_negative;
using wtconv_detail::folded_corr_tap;
using wtconv_detail::folded_dx_tap;

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& e : v) e = d(rng);
  return v;
}

// An H x W plane read with zeros outside it.
struct Plane {
  const std::vector<float>& v;
  int H, W;
  double operator()(int y, int c) const {
    return y >= 0 && c >= 0 && y < H && c < W ? double(v[size_t(y) * W + c]) : 0.0;
  }
};

// Haar coefficients of the zero-padded plane, haar4's order and signs (LL, rows, columns, HH):
// [t][m][n], ceil(H / 2) x ceil(W / 2) each.
std::vector<double> haar_of(const Plane& px) {
  const int h1 = (px.H + 1) / 2, w1 = (px.W + 1) / 2;
  std::vector<double> Y(4 * size_t(h1) * w1);
  for (int m = 0; m < h1; ++m)
    for (int n = 0; n < w1; ++n) {
      const double a = px(2 * m, 2 * n), b = px(2 * m, 2 * n + 1), c = px(2 * m + 1, 2 * n), e = px(2 * m + 1, 2 * n + 1);
      const double y[4] = {0.5 * (a + b + c + e), 0.5 * (a + b - c - e), 0.5 * (a - b + c - e), 0.5 * (a - b - c + e)};
      for (int t = 0; t < 4; ++t) Y[(size_t(t) * h1 + m) * w1 + n] = y[t];
    }
  return Y;
}

// synth_child's sign of subband t at pixel parity (p, q), written out: S1 by row, S2 by column.
double synth_sign(int t, int p, int q) { return (t == 1 || t == 3 ? (p ? -1 : 1) : 1) * (t >= 2 ? (q ? -1 : 1) : 1); }

// The largest |direct - folded| over the strided outputs of one plane, relative to the largest
// |direct|.
double folded_base_error(int H, int W, int k, std::mt19937& rng) {
  const int r = k / 2, h1 = (H + 1) / 2, w1 = (W + 1) / 2;
  const std::vector<float> w0 = random_floats(size_t(k) * k, rng), x = random_floats(size_t(H) * W, rng);
  const Plane px{x, H, W};
  const std::vector<double> Y = haar_of(px);
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

// error(H, W, k, rng) <= tol for every odd k to 15 on odd, even, one-pixel and narrow planes.
template <typename Error>
void expect_fold_within(uint32_t seed, double tol, Error error) {
  std::mt19937 rng(seed);
  const int sizes[][2] = {{1, 1}, {2, 2}, {1, 6}, {5, 3}, {7, 10}, {13, 9}, {18, 61}, {37, 14}};
  for (int k = 1; k <= 15; k += 2)
    for (const auto& hw : sizes) {
      SCOPED_TRACE(::testing::Message() << hw[0] << "x" << hw[1] << " k" << k);
      EXPECT_LE(error(hw[0], hw[1], k, rng), tol);
    }
}

// The taps are sums of at most four float weights: a few float roundings each.
TEST(WtconvFold, StrideTwoBaseConvEqualsFoldedSubbandConvs) { expect_fold_within(124, 1e-6, folded_base_error); }

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

// Backward, dx: the base part of dx, s0 (flipped W0) conv D with D = dy spread onto the full grid,
// against the synthesis of the four correlations of dy with s0 folded_dx_tap / 2 (U_t), at every
// pixel of the plane (the synthesis of the padded grid, cropped). Relative to s0 max|W0| max|dy|
// besides the largest |direct|: the folded taps are float sums of up to four weights whose roundings
// the synthesis does not cancel, so a direct output that is small beside the weights (one product on
// a 1 x 1 plane) would read large.
double folded_dx_error(int H, int W, int k, std::mt19937& rng) {
  const int r = k / 2, h1 = (H + 1) / 2, w1 = (W + 1) / 2;
  const std::vector<float> w0 = random_floats(size_t(k) * k, rng), dy = random_floats(size_t(h1) * w1, rng);
  const double s0 = 0.75;
  const Plane g{dy, h1, w1};
  const auto D = [&](int y, int c) { return y % 2 == 0 && c % 2 == 0 && y >= 0 && c >= 0 ? g(y / 2, c / 2) : 0.0; };
  double err = 0, scale = 0;
  for (int y = 0; y < H; ++y)
    for (int c = 0; c < W; ++c) {
      // dx_base(P, Q) = s0 sum W0[a][b] D(P - a + r, Q - b + r): the adjoint of the base conv.
      double direct = 0;
      for (int a = 0; a < k; ++a)
        for (int b = 0; b < k; ++b) direct += s0 * w0[size_t(a) * k + b] * D(y - a + r, c - b + r);
      // Synthesis: pixel (2m + p, 2n + q) = 1/2 sum_t sgn(t, p, q) B_t(m, n).
      const int m = y / 2, n = c / 2, p = y % 2, q = c % 2;
      double folded = 0;
      for (int t = 0; t < 4; ++t) {
        double bt = 0;
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < k; ++j) bt += 0.5 * s0 * folded_dx_tap(w0.data(), k, t, i, j) * g(m + i - r, n + j - r);
        folded += 0.5 * synth_sign(t, p, q) * bt;
      }
      if (!std::isfinite(folded)) return INFINITY;
      err = std::max(err, std::fabs(direct - folded));
      scale = std::max(scale, std::fabs(direct));
    }
  double wmax = 0, gmax = 0;
  for (float v : w0) wmax = std::max(wmax, double(std::fabs(v)));
  for (float v : dy) gmax = std::max(gmax, double(std::fabs(v)));
  scale = std::max(scale, s0 * wmax * gmax);
  return scale > 0 ? err / scale : err;
}

// Backward, the base weight: C0[a][b] = sum D(P, Q) x(P + a - r, Q + b - r) against
// sum_t sgn C_1t[u][v] with C_1t[u][v] = sum G(m, n) Y_1t(m + u - r, n + v - r), G = dy / 2.
double folded_corr_error(int H, int W, int k, std::mt19937& rng) {
  const int r = k / 2, h1 = (H + 1) / 2, w1 = (W + 1) / 2;
  const std::vector<float> x = random_floats(size_t(H) * W, rng), dy = random_floats(size_t(h1) * w1, rng);
  const Plane px{x, H, W}, g{dy, h1, w1};
  const std::vector<double> Y = haar_of(px);
  const auto coef = [&](int t, int m, int n) {
    return m >= 0 && n >= 0 && m < h1 && n < w1 ? Y[(size_t(t) * h1 + m) * w1 + n] : 0.0;
  };
  const auto c1 = [&](int t, int u, int v) {
    double s = 0;
    for (int m = 0; m < h1; ++m)
      for (int n = 0; n < w1; ++n) s += 0.5 * g(m, n) * coef(t, m + u - r, n + v - r);
    return s;
  };
  double err = 0, scale = 0;
  for (int a = 0; a < k; ++a)
    for (int b = 0; b < k; ++b) {
      double direct = 0;  // D is dy at the even pixels
      for (int m = 0; m < h1; ++m)
        for (int n = 0; n < w1; ++n) direct += g(m, n) * px(2 * m + a - r, 2 * n + b - r);
      const auto f = folded_corr_tap(k, a, b);
      if (f.u < 0 || f.u >= k || f.v < 0 || f.v >= k) return INFINITY;  // a tap outside C_1's k x k
      double folded = 0;
      for (int t = 0; t < 4; ++t) folded += (fold_sign_negative(t, f.pa, f.pb) ? -1 : 1) * c1(t, f.u, f.v);
      err = std::max(err, std::fabs(direct - folded));
      scale = std::max(scale, std::fabs(direct));
    }
  return scale > 0 ? err / scale : err;
}

TEST(WtconvFold, StrideTwoBackwardBaseConvEqualsFoldedCorrelations) {
  expect_fold_within(125, 1e-6, folded_dx_error);
}

// No float rounding in this one: its sums are in double.
TEST(WtconvFold, StrideTwoBaseCorrelationEqualsSignedLevelOneCorrelations) {
  expect_fold_within(126, 1e-9, folded_corr_error);
}

}  // namespace
}  // namespace winconv
