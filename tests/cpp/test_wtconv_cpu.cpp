// WTConv CPU tests: the float64 oracle against a literal level-by-level implementation (pad, Haar
// analysis, conv, inverse cascade with its pads and crops, as the original module computes it),
// the backward against central finite differences of that literal forward, and bad-input statuses.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <random>
#include <vector>

#include "cpu/wtconv_reference.h"
#include "fuzz_util.h"
#include "winconv/conv2d.h"
#include "winconv/wtconv.h"

namespace winconv {
namespace {

using Vec = std::vector<double>;

struct Model {
  WtconvProblem p;
  std::vector<float> w0, b0, s0, wl[kWtconvMaxLevels], sl[kWtconvMaxLevels];
  bool bias = true;
  WtconvParams params() const {
    WtconvParams q;
    q.base_weight = w0.data(); q.base_bias = bias ? b0.data() : nullptr; q.base_scale = s0.data();
    for (int l = 0; l < p.levels; ++l) { q.level_weight[l] = wl[l].data(); q.level_scale[l] = sl[l].data(); }
    return q;
  }
};

Model make_model(int B, int C, int H, int W, int k, int L, int s, uint32_t seed, bool bias = true) {
  Model m;
  m.p.batch = B; m.p.channels = C; m.p.height = H; m.p.width = W; m.p.kernel_size = k; m.p.levels = L; m.p.stride = s;
  m.bias = bias;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](std::vector<float>& v, size_t n, float sc, float mean) { v.resize(n); for (auto& e : v) e = mean + sc * nd(rng); };
  fill(m.w0, size_t(C) * k * k, 0.3f, 0.f); fill(m.b0, C, 0.5f, 0.f); fill(m.s0, C, 0.3f, 1.f);
  for (int l = 0; l < L; ++l) { fill(m.wl[l], size_t(4) * C * k * k, 0.3f, 0.f); fill(m.sl[l], size_t(4) * C, 0.3f, 0.3f); }
  return m;
}

// --- literal level-by-level forward (double), one plane at a time ---------------------------------
Vec conv_same(const Vec& in, int h, int w, const float* wt, int k) {
  const int r = k / 2;
  Vec out(size_t(h) * w, 0.0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < k; ++j) {
          const int yy = y + i - r, xx = x + j - r;
          if (yy >= 0 && yy < h && xx >= 0 && xx < w) out[size_t(y) * w + x] += wt[i * k + j] * in[size_t(yy) * w + xx];
        }
  return out;
}

Vec literal_forward(const Model& m, const std::vector<double>& x) {
  const int B = int(m.p.batch), C = int(m.p.channels), H = int(m.p.height), W = int(m.p.width);
  const int k = int(m.p.kernel_size), L = int(m.p.levels), s = int(m.p.stride), kk = k * k;
  const int Ho = (H + s - 1) / s, Wo = (W + s - 1) / s;
  Vec y(size_t(B) * C * Ho * Wo);
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c) {
      const size_t pl = size_t(b) * C + c;
      Vec cur(x.begin() + pl * H * W, x.begin() + (pl + 1) * H * W);
      std::vector<Vec> lls, hs[3];
      std::vector<int> sh, sw;
      int h = H, w = W;
      for (int l = 0; l < L; ++l) {
        sh.push_back(h); sw.push_back(w);
        const int ph = h + (h % 2), pw = w + (w % 2);  // pad bottom/right to even
        Vec pad(size_t(ph) * pw, 0.0);
        for (int yy = 0; yy < h; ++yy)
          for (int xx = 0; xx < w; ++xx) pad[size_t(yy) * pw + xx] = cur[size_t(yy) * w + xx];
        const int hq = ph / 2, wq = pw / 2;
        Vec sub[4];
        for (auto& v : sub) v.assign(size_t(hq) * wq, 0.0);
        for (int i = 0; i < hq; ++i)
          for (int j = 0; j < wq; ++j) {
            const double a = pad[size_t(2 * i) * pw + 2 * j], bb = pad[size_t(2 * i) * pw + 2 * j + 1];
            const double cc = pad[size_t(2 * i + 1) * pw + 2 * j], d = pad[size_t(2 * i + 1) * pw + 2 * j + 1];
            sub[0][size_t(i) * wq + j] = (a + bb + cc + d) / 2; sub[1][size_t(i) * wq + j] = (a + bb - cc - d) / 2;
            sub[2][size_t(i) * wq + j] = (a - bb + cc - d) / 2; sub[3][size_t(i) * wq + j] = (a - bb - cc + d) / 2;
          }
        cur = sub[0];
        for (int t = 0; t < 4; ++t) {
          Vec z = conv_same(sub[t], hq, wq, m.wl[l].data() + size_t(4 * c + t) * kk, k);
          for (auto& v : z) v *= m.sl[l][4 * c + t];
          if (t == 0) lls.push_back(z); else hs[t - 1].push_back(z);
        }
        h = hq; w = wq;
      }
      // Inverse cascade, deepest first: add the deeper result to LL, synthesise, crop.
      Vec next;
      for (int l = L - 1; l >= 0; --l) {
        const int hq = (sh[l] + 1) / 2, wq = (sw[l] + 1) / 2;
        Vec ll = lls[l];
        if (!next.empty())
          for (size_t i = 0; i < ll.size(); ++i) ll[i] += next[i];
        Vec full(size_t(2 * hq) * 2 * wq);
        for (int i = 0; i < 2 * hq; ++i)
          for (int j = 0; j < 2 * wq; ++j) {
            const size_t o = size_t(i / 2) * wq + j / 2;
            const double sy = (i & 1) ? -1 : 1, sx = (j & 1) ? -1 : 1;
            full[size_t(i) * 2 * wq + j] = (ll[o] + sy * hs[0][l][o] + sx * hs[1][l][o] + sy * sx * hs[2][l][o]) / 2;
          }
        next.assign(size_t(sh[l]) * sw[l], 0.0);
        for (int i = 0; i < sh[l]; ++i)
          for (int j = 0; j < sw[l]; ++j) next[size_t(i) * sw[l] + j] = full[size_t(i) * 2 * wq + j];
      }
      Vec x0(x.begin() + pl * H * W, x.begin() + (pl + 1) * H * W);
      Vec base = conv_same(x0, H, W, m.w0.data() + size_t(c) * kk, k);
      for (int oy = 0; oy < Ho; ++oy)
        for (int ox = 0; ox < Wo; ++ox) {
          const size_t i = size_t(oy * s) * W + ox * s;
          y[pl * Ho * Wo + size_t(oy) * Wo + ox] = m.s0[c] * (base[i] + (m.bias ? m.b0[c] : 0.0)) + next[i];
        }
    }
  return y;
}

double max_rel(const Vec& a, const Vec& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) { num = std::max(num, std::fabs(a[i] - b[i])); den = std::max(den, std::fabs(b[i])); }
  return num / std::max(den, 1e-300);
}

std::vector<float> random_x(const WtconvProblem& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(size_t(p.x_elements()));
  for (auto& v : x) v = nd(rng);
  return x;
}

TEST(WtconvCpu, OracleMatchesLiteralCascade) {
  const int sizes[][2] = {{1, 6}, {5, 3}, {7, 10}, {13, 9}, {2, 2}, {1, 1}};
  int n = 0;
  for (auto& hw : sizes)
    for (int L = 1; L <= 5; ++L)
      for (int k : {1, 3, 5, 7})
        for (int s : {1, 2}) {
          ++n;
          Model m = make_model(2, 2, hw[0], hw[1], k, L, s, 100 + n, n % 3 != 0);
          std::vector<float> x = random_x(m.p, n);
          std::vector<double> y;
          wtconv_reference_forward(m.p, x.data(), m.params(), &y);
          const Vec lit = literal_forward(m, Vec(x.begin(), x.end()));
          ASSERT_EQ(y.size(), lit.size());
          EXPECT_LT(max_rel(y, lit), 1e-13) << hw[0] << "x" << hw[1] << " L" << L << " k" << k << " s" << s;
        }
}

// The oracle's one-pass synthesis against the literal cascade on random problems: planes from 1 x 1
// to 40 x 40 (odd, even, flat), kernel sizes 1-15, one to eight levels (deeper than the plane
// halves, down to 1 x 1 grids), strides 1-4. WINCONV_FUZZ_CASES and WINCONV_FUZZ_SEED
// (fuzz_util.h) run a longer campaign.
TEST(WtconvCpu, FuzzOracleMatchesLiteralCascade) {
  const int64_t cases = testing::fuzz_cases(12);
  const uint64_t seed = testing::fuzz_seed(2026);
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int64_t i = 0; i < cases; ++i) {
    const int H = pick(0, 3) == 0 ? pick(1, 4) : pick(1, 40), W = pick(0, 3) == 0 ? pick(1, 4) : pick(1, 40);
    const int k = 2 * pick(0, 7) + 1, L = pick(1, 8), s = pick(0, 2) ? 1 : pick(2, 4);
    const uint32_t mseed = uint32_t(seed * 1000 + i);
    Model m = make_model(pick(1, 2), pick(1, 2), H, W, k, L, s, mseed, pick(0, 3) != 0);
    const std::vector<float> x = random_x(m.p, mseed + 1);
    std::vector<double> y;
    wtconv_reference_forward(m.p, x.data(), m.params(), &y);
    const Vec lit = literal_forward(m, Vec(x.begin(), x.end()));
    ASSERT_EQ(y.size(), lit.size());
    EXPECT_LT(max_rel(y, lit), 1e-13) << H << "x" << W << " k" << k << " L" << L << " s" << s << " (fuzz case "
                                      << i << ", WINCONV_FUZZ_SEED " << seed << ")";
    if (HasFailure()) break;  // the first failing case is the one to read
  }
}

// Loss = sum(dy * y); its gradients by central differences of the literal forward.
TEST(WtconvCpu, BackwardMatchesFiniteDifferences) {
  struct Cfg { int H, W, k, L, s; };
  const Cfg cfgs[] = {{7, 10, 3, 2, 1}, {5, 3, 3, 3, 2}, {13, 9, 5, 2, 1}, {1, 6, 1, 3, 1}, {6, 7, 3, 1, 2}, {9, 9, 5, 4, 1}};
  int n = 0;
  for (const Cfg& cf : cfgs) {
    Model m = make_model(1, 2, cf.H, cf.W, cf.k, cf.L, cf.s, 500 + n, n % 2 == 0);
    ++n;
    std::vector<float> x = random_x(m.p, 77 + n);
    WtconvProblem py = m.p;
    std::vector<float> dy(size_t(py.y_elements()));
    std::mt19937 rng(n);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& v : dy) v = nd(rng);
    WtconvReferenceGrads g;
    wtconv_reference_backward(m.p, dy.data(), x.data(), m.params(), &g);
    auto loss = [&](const Model& mm, const Vec& xv) {
      const Vec y = literal_forward(mm, xv);
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += y[i] * dy[i];
      return s;
    };
    const double h = 1e-4;
    const Vec xd(x.begin(), x.end());
    auto check = [&](const char* name, double analytic, double numeric) {
      EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::fabs(numeric))) << name << " H" << cf.H << " W" << cf.W;
    };
    for (size_t i = 0; i < xd.size(); i += 3) {
      Vec a = xd, b = xd;
      a[i] += h; b[i] -= h;
      check("dx", g.dx[i], (loss(m, a) - loss(m, b)) / (2 * h));
    }
    // Parameters are float: perturb a copy of the model in double through a float-sized step.
    auto param_fd = [&](std::vector<float> Model::*field, int level, size_t i) {
      Model a = m, b = m;
      float* pa = level < 0 ? &(a.*field)[i] : &a.wl[level][i];
      float* pb = level < 0 ? &(b.*field)[i] : &b.wl[level][i];
      const float step = 1e-2f;
      *pa += step; *pb -= step;
      return (loss(a, xd) - loss(b, xd)) / double(*pa - *pb);
    };
    for (size_t i = 0; i < m.w0.size(); i += 2) check("dW0", g.base_weight[i], param_fd(&Model::w0, -1, i));
    for (int c = 0; c < 2; ++c) {
      check("ds0", g.base_scale[c], param_fd(&Model::s0, -1, c));
      if (m.bias) check("db0", g.base_bias[c], param_fd(&Model::b0, -1, c));
    }
    for (int l = 0; l < cf.L; ++l) {
      for (size_t i = 0; i < m.wl[l].size(); i += 5) check("dWl", g.level_weight[l][i], param_fd(nullptr, l, i));
      for (int t = 0; t < 8; ++t) {
        Model a = m, b = m;
        a.sl[l][t] += 1e-2f; b.sl[l][t] -= 1e-2f;
        check("dsl", g.level_scale[l][t], (loss(a, xd) - loss(b, xd)) / double(a.sl[l][t] - b.sl[l][t]));
      }
    }
  }
}

// The parameter gradients sum over the batch, and each item's dx is its own: the backward of a
// batch of 3 against three backwards of one item (the finite-difference test above has batch 1).
TEST(WtconvCpu, BackwardSumsParameterGradientsOverTheBatch) {
  const int B = 3;
  const Model m = make_model(B, 2, 7, 6, 3, 2, 2, 42);
  const std::vector<float> x = random_x(m.p, 5);
  std::vector<float> dy = random_x(m.p, 6);
  dy.resize(size_t(m.p.y_elements()));
  WtconvReferenceGrads all, sum;
  wtconv_reference_backward(m.p, dy.data(), x.data(), m.params(), &all);
  WtconvProblem one = m.p;
  one.batch = 1;
  const size_t xs = size_t(one.x_elements()), ys = size_t(one.y_elements());
  auto add = [](Vec& acc, const Vec& v) {
    acc.resize(v.size(), 0.0);
    for (size_t i = 0; i < v.size(); ++i) acc[i] += v[i];
  };
  for (int b = 0; b < B; ++b) {
    WtconvReferenceGrads g;
    wtconv_reference_backward(one, dy.data() + b * ys, x.data() + b * xs, m.params(), &g);
    add(sum.base_weight, g.base_weight); add(sum.base_scale, g.base_scale); add(sum.base_bias, g.base_bias);
    for (int l = 0; l < m.p.levels; ++l) { add(sum.level_weight[l], g.level_weight[l]); add(sum.level_scale[l], g.level_scale[l]); }
    for (size_t i = 0; i < xs; ++i) ASSERT_EQ(all.dx[b * xs + i], g.dx[i]) << "item " << b << " element " << i;
  }
  auto near = [](const Vec& got, const Vec& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-12 * std::max(1.0, std::fabs(want[i]))) << what << " " << i;
  };
  near(all.base_weight, sum.base_weight, "dW0"); near(all.base_scale, sum.base_scale, "ds0");
  near(all.base_bias, sum.base_bias, "db0");
  for (int l = 0; l < m.p.levels; ++l) {
    near(all.level_weight[l], sum.level_weight[l], "dWl");
    near(all.level_scale[l], sum.level_scale[l], "dsl");
  }
}

// wtconv_reference_magnitudes is the size of each gradient's terms: on magnitudes, with every Haar
// sign +, each output sums the magnitudes of the terms the signed gradient sums. So it bounds every
// entry of the signed gradients (|sum| <= sum of |terms|), and where no Haar transform lies on a
// gradient's path (the base conv's weight, scale and bias) it is that gradient of the magnitudes.
// Problems down to 1 x 1 level grids (one term per batch item), strides 1 and 2. The same for y
// and wtconv_reference_forward_magnitudes.
TEST(WtconvCpu, MagnitudesBoundEveryGradient) {
  struct Cfg { int B, C, H, W, k, L, s; };
  const Cfg cfgs[] = {{3, 2, 16, 4, 7, 6, 1}, {2, 1, 9, 13, 3, 3, 2}, {1, 2, 1, 6, 1, 3, 1}, {4, 1, 5, 5, 5, 4, 1}};
  int n = 0;
  for (const Cfg& cf : cfgs) {
    Model m = make_model(cf.B, cf.C, cf.H, cf.W, cf.k, cf.L, cf.s, 900 + n, n % 2 == 0);
    const std::vector<float> x = random_x(m.p, 300 + n);
    std::vector<float> dy = random_x(m.p, 400 + n);
    dy.resize(size_t(m.p.y_elements()));
    ++n;
    WtconvReferenceGrads g, ga, gp;
    wtconv_reference_backward(m.p, dy.data(), x.data(), m.params(), &g);
    auto mag = [](std::vector<float> v) { for (auto& e : v) e = std::fabs(e); return v; };
    Model am = m;
    am.w0 = mag(m.w0); am.b0 = mag(m.b0); am.s0 = mag(m.s0);
    for (int l = 0; l < cf.L; ++l) { am.wl[l] = mag(m.wl[l]); am.sl[l] = mag(m.sl[l]); }
    const std::vector<float> ax = mag(x), ady = mag(dy);
    wtconv_reference_magnitudes(m.p, ady.data(), ax.data(), am.params(), &ga);
    wtconv_reference_backward(m.p, ady.data(), ax.data(), am.params(), &gp);
    auto bounds = [&](const char* name, const Vec& signed_grad, const Vec& size) {
      ASSERT_EQ(signed_grad.size(), size.size()) << name;
      for (size_t i = 0; i < size.size(); ++i)
        ASSERT_LE(std::fabs(signed_grad[i]), size[i] * (1 + 1e-12) + 1e-300) << name << " entry " << i << " case " << n;
    };
    bounds("dx", g.dx, ga.dx);
    bounds("dW0", g.base_weight, ga.base_weight);
    bounds("ds0", g.base_scale, ga.base_scale);
    bounds("db0", g.base_bias, ga.base_bias);
    for (int l = 0; l < cf.L; ++l) {
      bounds("dWl", g.level_weight[l], ga.level_weight[l]);
      bounds("dsl", g.level_scale[l], ga.level_scale[l]);
    }
    EXPECT_EQ(ga.base_weight, gp.base_weight) << "case " << n;
    EXPECT_EQ(ga.base_scale, gp.base_scale) << "case " << n;
    EXPECT_EQ(ga.base_bias, gp.base_bias) << "case " << n;
    // The details of |x| are differences, so the signed oracle on magnitudes is not a bound there.
    EXPECT_NE(ga.level_weight[0], gp.level_weight[0]) << "case " << n;
    // The forward's counterpart bounds every output the same way, and is not the signed forward
    // of the magnitudes either.
    std::vector<double> y, ym, yp;
    wtconv_reference_forward(m.p, x.data(), m.params(), &y);
    wtconv_reference_forward_magnitudes(m.p, ax.data(), am.params(), &ym);
    wtconv_reference_forward(m.p, ax.data(), am.params(), &yp);
    bounds("y", y, ym);
    EXPECT_NE(ym, yp) << "case " << n;
  }
}

WtconvProblem wtconv_problem(int64_t b, int64_t c, int64_t h, int64_t w, int64_t k = 5, int64_t levels = 2) {
  WtconvProblem p;
  p.batch = b; p.channels = c; p.height = h; p.width = w; p.kernel_size = k; p.levels = levels;
  return p;
}

// The edges of wtconv_validate's ranges, one step inside and one outside.
TEST(WtconvCpu, ValidationLimitsAreExact) {
  EXPECT_TRUE(wtconv_validate(wtconv_problem(2, 3, 8, 8, kWtconvMaxKernelSize)).ok());
  EXPECT_TRUE(wtconv_validate(wtconv_problem(2, 3, 8, 8, 5, kWtconvMaxLevels)).ok());
  Status st = wtconv_validate(wtconv_problem(2, 3, 8, 0));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("width"), std::string::npos) << st.to_string();
  EXPECT_EQ(wtconv_validate(wtconv_problem(2, 0, 8, 8)).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(wtconv_validate(wtconv_problem(1, INT_MAX / 8, 1, 1)).ok());
  EXPECT_EQ(wtconv_validate(wtconv_problem(1, INT_MAX / 8 + 1, 1, 1)).code(), StatusCode::kIndexOverflow);
  EXPECT_TRUE(wtconv_validate(wtconv_problem(1 << 11, 1 << 11, 1 << 9, 1 << 9)).ok());  // 2^40 elements
  st = wtconv_validate(wtconv_problem(1 << 11, 1 << 11, 1 << 9, (1 << 9) + 1));
  EXPECT_EQ(st.code(), StatusCode::kIndexOverflow);
  EXPECT_NE(st.message().find("2^40"), std::string::npos) << st.to_string();
  st = wtconv_validate(wtconv_problem(1, 1, 1 << 15, 1 << 15));  // a plane of 2^30 > INT_MAX / 4
  EXPECT_EQ(st.code(), StatusCode::kIndexOverflow);
  EXPECT_NE(st.message().find("height * width"), std::string::npos) << st.to_string();
}

// Each pointer is checked on its own, with its name (the test above passes several bad at once).
TEST(WtconvCpu, EveryPointerIsCheckedByName) {
  const WtconvProblem p = wtconv_problem(2, 3, 8, 8);
  size_t fb = 0, bb = 0;
  ASSERT_TRUE(wtconv_forward_workspace_size(p, &fb).ok());
  ASSERT_TRUE(wtconv_backward_workspace_size(p, &bb).ok());
  ASSERT_GT(fb, 0u);
  alignas(256) static float dummy[64];
  WtconvParams prm;
  prm.base_weight = dummy; prm.base_scale = dummy;
  for (int l = 0; l < 2; ++l) prm.level_weight[l] = prm.level_scale[l] = dummy;
  auto expect = [](const Status& st, StatusCode code, const char* name) {
    EXPECT_EQ(st.code(), code) << st.to_string();
    EXPECT_NE(st.message().find(name), std::string::npos) << st.to_string();
  };
  // Each call below is wrong in one argument only, so none gets as far as a launch.
  expect(wtconv_forward(p, dummy, prm, dummy, dummy + 1, fb, nullptr), StatusCode::kMisalignedPointer, "workspace");
  void* odd = reinterpret_cast<char*>(dummy) + 2;
  expect(wtconv_forward(p, dummy, prm, odd, dummy, fb, nullptr), StatusCode::kMisalignedPointer, "y");
  WtconvParamGrads g;
  g.base_weight = g.base_bias = g.base_scale = dummy;
  for (int l = 0; l < 2; ++l) g.level_weight[l] = g.level_scale[l] = dummy;
  expect(wtconv_backward(p, dummy, dummy, prm, nullptr, g, dummy, bb, nullptr), StatusCode::kNullPointer, "dx");
  expect(wtconv_backward(p, nullptr, dummy, prm, dummy, g, dummy, bb, nullptr), StatusCode::kNullPointer, "dy");
  WtconvParamGrads no_w = g;
  no_w.base_weight = nullptr;
  expect(wtconv_backward(p, dummy, dummy, prm, dummy, no_w, dummy, bb, nullptr), StatusCode::kNullPointer,
         "grads.base_weight");
  WtconvParamGrads no_ls = g;
  no_ls.level_scale[1] = nullptr;
  expect(wtconv_backward(p, dummy, dummy, prm, dummy, no_ls, dummy, bb, nullptr), StatusCode::kNullPointer,
         "level_scale[1]");
  expect(wtconv_backward(p, dummy, dummy, prm, dummy, g, dummy, bb - 1, nullptr), StatusCode::kWorkspaceTooSmall,
         "workspace");
}

// Any stride >= max(height, width) leaves the single output pixel (0, 0): one past the kernels'
// 32-bit range (2^25 - 1) is accepted and planned and sized as the smallest such stride.
TEST(WtconvCpu, StridesPastThePlaneActAsThePlaneExtent) {
  WtconvProblem p;
  p.batch = 2; p.channels = 3; p.height = 3; p.width = 5; p.kernel_size = 3; p.levels = 2;
  WtconvProblem reduced = p;
  reduced.stride = 5;
  size_t want_f = 0, want_b = 0;
  uint64_t want_io_f = 0, want_io_b = 0;
  ASSERT_TRUE(wtconv_forward_workspace_size(reduced, &want_f).ok());
  ASSERT_TRUE(wtconv_backward_workspace_size(reduced, &want_b).ok());
  ASSERT_TRUE(wtconv_io_bytes(reduced, &want_io_f, &want_io_b).ok());
  for (int64_t stride : {int64_t(1) << 25, int64_t(1) << 40, INT64_MAX}) {
    p.stride = stride;
    ASSERT_TRUE(wtconv_validate(p).ok()) << stride;
    EXPECT_EQ(p.out_height(), 1);
    EXPECT_EQ(p.out_width(), 1);
    size_t f = 0, b = 0;
    uint64_t io_f = 0, io_b = 0;
    ASSERT_TRUE(wtconv_forward_workspace_size(p, &f).ok());
    ASSERT_TRUE(wtconv_backward_workspace_size(p, &b).ok());
    ASSERT_TRUE(wtconv_io_bytes(p, &io_f, &io_b).ok());
    EXPECT_EQ(f, want_f) << stride;
    EXPECT_EQ(b, want_b) << stride;
    EXPECT_EQ(io_f, want_io_f) << stride;
    EXPECT_EQ(io_b, want_io_b) << stride;
  }
}

TEST(WtconvCpu, BadInputsReturnPreciseStatus) {
  WtconvProblem p;
  p.batch = 2; p.channels = 3; p.height = 8; p.width = 8; p.kernel_size = 5; p.levels = 2;
  EXPECT_TRUE(wtconv_validate(p).ok());
  auto code = [](WtconvProblem q) { return wtconv_validate(q).code(); };
  WtconvProblem q = p; q.batch = 0; EXPECT_EQ(code(q), StatusCode::kInvalidArgument);
  q = p; q.height = 0; EXPECT_EQ(code(q), StatusCode::kInvalidArgument);
  q = p; q.kernel_size = 4; EXPECT_EQ(code(q), StatusCode::kInvalidArgument);
  EXPECT_NE(wtconv_validate(q).message().find("kernel_size"), std::string::npos);
  q = p; q.kernel_size = 17; EXPECT_EQ(code(q), StatusCode::kInvalidArgument);
  q = p; q.levels = 0; EXPECT_EQ(code(q), StatusCode::kInvalidArgument);
  q = p; q.levels = 9; EXPECT_EQ(code(q), StatusCode::kInvalidArgument);
  q = p; q.stride = 0; EXPECT_EQ(code(q), StatusCode::kInvalidArgument);
  q = p; q.height = 1 << 20; q.width = 1 << 20; EXPECT_EQ(code(q), StatusCode::kIndexOverflow);
  size_t bytes = 0;
  EXPECT_EQ(wtconv_forward_workspace_size(p, nullptr).code(), StatusCode::kNullPointer);
  ASSERT_TRUE(wtconv_forward_workspace_size(p, &bytes).ok());
  EXPECT_GT(bytes, 0u);  // L = 2: LL chain + residual of level 1
  size_t bbytes = 0;
  ASSERT_TRUE(wtconv_backward_workspace_size(p, &bbytes).ok());
  EXPECT_GT(bbytes, bytes);

  // Fake but aligned addresses: validation must fail before anything is dereferenced.
  alignas(16) static float dummy[64];
  WtconvParams prm;
  prm.base_weight = dummy; prm.base_scale = dummy; prm.level_weight[0] = dummy; prm.level_scale[0] = dummy;
  prm.level_weight[1] = dummy; prm.level_scale[1] = dummy;
  EXPECT_EQ(wtconv_forward(p, nullptr, prm, dummy, dummy, bytes, nullptr).code(), StatusCode::kNullPointer);
  WtconvParams missing = prm; missing.level_scale[1] = nullptr;
  Status st = wtconv_forward(p, dummy, missing, dummy, dummy, bytes, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kNullPointer);
  EXPECT_NE(st.message().find("level_scale[1]"), std::string::npos);
  EXPECT_EQ(wtconv_forward(p, dummy, prm, dummy, dummy, bytes - 1, nullptr).code(), StatusCode::kWorkspaceTooSmall);
  const float* odd = reinterpret_cast<const float*>(reinterpret_cast<const char*>(dummy) + 2);
  EXPECT_EQ(wtconv_forward(p, odd, prm, dummy, dummy, bytes, nullptr).code(), StatusCode::kMisalignedPointer);
  // fp16 needs 2-byte alignment only: the same x passes the pointer checks and reaches the
  // workspace check (one byte short, so nothing launches on these host addresses when a device
  // is present).
  WtconvProblem h = p; h.precision = Precision::kFP16;
  size_t hbytes = 0;
  ASSERT_TRUE(wtconv_forward_workspace_size(h, &hbytes).ok());
  ASSERT_GT(hbytes, 0u);
  EXPECT_EQ(wtconv_forward(h, odd, prm, dummy, dummy, hbytes - 1, nullptr).code(), StatusCode::kWorkspaceTooSmall);
  WtconvParamGrads g;
  EXPECT_EQ(wtconv_backward(p, dummy, dummy, prm, dummy, g, dummy, bbytes, nullptr).code(), StatusCode::kNullPointer);
  // Valid arguments and no usable device: kNoDevice, as conv2d_forward, in a build with the CUDA
  // kernels as well (not the first launch's CUDA error). conv2d_forward with a workspace too small
  // tells whether there is a device without launching anything.
  Conv2dConfig probe;
  probe.problem.h = probe.problem.w = 8;
  probe.problem.r = probe.problem.s = 3;
  probe.algo = Conv2dAlgo::kMaterialized;  // needs a workspace (the window tensor)
  size_t probe_bytes = 0;
  const Status probe_size = conv2d_forward_workspace_size(probe, &probe_bytes);
  const bool launches_nothing = !probe_size.ok() || probe_bytes > 0;
  if (launches_nothing && conv2d_forward(probe, dummy, dummy, dummy, nullptr, 0, nullptr).code() == StatusCode::kNoDevice) {
    EXPECT_EQ(wtconv_forward(p, dummy, prm, dummy, dummy, bytes, nullptr).code(), StatusCode::kNoDevice);
    WtconvParamGrads all;
    all.base_weight = all.base_bias = all.base_scale = dummy;
    for (int l = 0; l < 2; ++l) all.level_weight[l] = all.level_scale[l] = dummy;
    EXPECT_EQ(wtconv_backward(p, dummy, dummy, prm, dummy, all, dummy, bbytes, nullptr).code(), StatusCode::kNoDevice);
  }
}

}  // namespace
}  // namespace winconv
