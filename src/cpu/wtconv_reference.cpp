#include "cpu/wtconv_reference.h"

#include <cstdint>

namespace winconv {
namespace {

using Plane = std::vector<double>;

// out(y, x) = sum_{i,j} w(i, j) * in(y + dir (i - r), x + dir (j - r)), zero outside: with dir = 1
// the cross-correlation ('same'), with dir = -1 its adjoint.
Plane corr_same_dir(const Plane& in, int h, int w, const float* wt, int k, int dir) {
  const int r = k / 2;
  Plane out(size_t(h) * w, 0.0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      double acc = 0.0;
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < k; ++j) {
          const int yy = y + dir * (i - r), xx = x + dir * (j - r);
          if (yy >= 0 && yy < h && xx >= 0 && xx < w) acc += double(wt[i * k + j]) * in[size_t(yy) * w + xx];
        }
      out[size_t(y) * w + x] = acc;
    }
  return out;
}
Plane corr_same(const Plane& in, int h, int w, const float* wt, int k) { return corr_same_dir(in, h, w, wt, k, 1); }
Plane corr_same_adjoint(const Plane& in, int h, int w, const float* wt, int k) {
  return corr_same_dir(in, h, w, wt, k, -1);
}

// g(i, j) += sum_q in(q + i - r) * gout(q): the weight gradient of corr_same.
void corr_weight_grad(const Plane& in, const Plane& gout, int h, int w, int k, double scale, double* g) {
  const int r = k / 2;
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < k; ++j) {
      double acc = 0.0;
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          const int yy = y + i - r, xx = x + j - r;
          if (yy >= 0 && yy < h && xx >= 0 && xx < w) acc += in[size_t(yy) * w + xx] * gout[size_t(y) * w + x];
        }
      g[i * k + j] += scale * acc;
    }
}

// Haar analysis of zero-padded `in` (h x w) into 4 subbands of ceil(h/2) x ceil(w/2). all_plus: every
// sign +, which on magnitudes gives the size of each coefficient's terms (wtconv_reference_magnitudes).
void haar(const Plane& in, int h, int w, Plane sub[4], bool all_plus = false) {
  const int hq = (h + 1) / 2, wq = (w + 1) / 2;
  for (int s = 0; s < 4; ++s) sub[s].assign(size_t(hq) * wq, 0.0);
  auto at = [&](int y, int x) { return (y < h && x < w) ? in[size_t(y) * w + x] : 0.0; };
  for (int i = 0; i < hq; ++i)
    for (int j = 0; j < wq; ++j) {
      const double a = at(2 * i, 2 * j), b = at(2 * i, 2 * j + 1), c = at(2 * i + 1, 2 * j), d = at(2 * i + 1, 2 * j + 1);
      const size_t o = size_t(i) * wq + j;
      sub[0][o] = (a + b + c + d) / 2;
      sub[1][o] = all_plus ? sub[0][o] : (a + b - c - d) / 2;
      sub[2][o] = all_plus ? sub[0][o] : (a - b + c - d) / 2;
      sub[3][o] = all_plus ? sub[0][o] : (a - b - c + d) / 2;
    }
}

// Transpose of haar (= synthesis, the matrix is symmetric orthogonal), cropped to h x w.
Plane haar_adjoint(const Plane sub[4], int h, int w, bool all_plus = false) {
  const int wq = (w + 1) / 2;
  Plane out(size_t(h) * w, 0.0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const size_t o = size_t(y / 2) * wq + x / 2;
      const double sy = (y & 1) && !all_plus ? -1.0 : 1.0, sx = (x & 1) && !all_plus ? -1.0 : 1.0;
      out[size_t(y) * w + x] = (sub[0][o] + sy * sub[1][o] + sx * sub[2][o] + sy * sx * sub[3][o]) / 2;
    }
  return out;
}

struct Dims {
  int B, C, H, W, Ho, Wo, k, L, s;
  int hl[kWtconvMaxLevels + 1], wl[kWtconvMaxLevels + 1];
};

Dims dims_of(const WtconvProblem& p) {
  Dims d;
  d.B = int(p.batch); d.C = int(p.channels); d.H = int(p.height); d.W = int(p.width);
  d.Ho = int(p.out_height()); d.Wo = int(p.out_width());
  d.k = int(p.kernel_size); d.L = int(p.levels); d.s = int(p.stride);
  d.hl[0] = d.H; d.wl[0] = d.W;
  for (int l = 1; l <= d.L; ++l) { d.hl[l] = (d.hl[l - 1] + 1) / 2; d.wl[l] = (d.wl[l - 1] + 1) / 2; }
  return d;
}

// Y_l subbands of one plane for l = 1..L.
void analysis(const Dims& d, const Plane& x0, Plane Y[][4], bool all_plus = false) {
  Plane cur = x0;
  for (int l = 1; l <= d.L; ++l) {
    haar(cur, d.hl[l - 1], d.wl[l - 1], Y[l], all_plus);
    cur = Y[l][0];
  }
}

// The backward of wtconv_reference_backward; all_plus: every Haar sign + (wtconv_reference_magnitudes).
void backward(const WtconvProblem& problem, const float* dy, const float* x, const WtconvParams& prm,
              WtconvReferenceGrads* g, bool all_plus) {
  const Dims d = dims_of(problem);
  const int kk = d.k * d.k;
  g->dx.assign(size_t(d.B) * d.C * d.H * d.W, 0.0);
  g->base_weight.assign(size_t(d.C) * kk, 0.0);
  g->base_bias.assign(d.C, 0.0);
  g->base_scale.assign(d.C, 0.0);
  for (int l = 0; l < kWtconvMaxLevels; ++l) {
    g->level_weight[l].assign(l < d.L ? size_t(4) * d.C * kk : 0, 0.0);
    g->level_scale[l].assign(l < d.L ? size_t(4) * d.C : 0, 0.0);
  }
  for (int b = 0; b < d.B; ++b)
    for (int c = 0; c < d.C; ++c) {
      const size_t pl = size_t(b) * d.C + c;
      Plane x0(x + pl * d.H * d.W, x + (pl + 1) * d.H * d.W);
      Plane D(size_t(d.H) * d.W, 0.0);  // dL/d(full-resolution output)
      for (int oy = 0; oy < d.Ho; ++oy)
        for (int ox = 0; ox < d.Wo; ++ox)
          D[size_t(oy * d.s) * d.W + ox * d.s] = dy[pl * d.Ho * d.Wo + size_t(oy) * d.Wo + ox];
      Plane Y[kWtconvMaxLevels + 1][4], G[kWtconvMaxLevels + 1][4];
      analysis(d, x0, Y, all_plus);
      {
        Plane cur = D;
        for (int l = 1; l <= d.L; ++l) {
          haar(cur, d.hl[l - 1], d.wl[l - 1], G[l], all_plus);
          cur = G[l][0];
        }
      }
      // Levels deepest first: dY_l = s_l * adjoint conv of G_l, + dX_l at LL, synthesis to dX_{l-1}.
      Plane dX;  // gradient w.r.t. X_l of the level below the current one
      for (int l = d.L; l >= 1; --l) {
        Plane dYl[4];
        for (int s = 0; s < 4; ++s) {
          const float* w = prm.level_weight[l - 1] + size_t(4 * c + s) * kk;
          const double sl = prm.level_scale[l - 1][4 * c + s];
          corr_weight_grad(Y[l][s], G[l][s], d.hl[l], d.wl[l], d.k, sl,
                           g->level_weight[l - 1].data() + size_t(4 * c + s) * kk);
          const Plane conv = corr_same(Y[l][s], d.hl[l], d.wl[l], w, d.k);
          double ds = 0.0;
          for (size_t i = 0; i < conv.size(); ++i) ds += conv[i] * G[l][s][i];
          g->level_scale[l - 1][4 * c + s] += ds;
          dYl[s] = corr_same_adjoint(G[l][s], d.hl[l], d.wl[l], w, d.k);
          for (double& v : dYl[s]) v *= sl;
        }
        if (l < d.L)
          for (size_t i = 0; i < dYl[0].size(); ++i) dYl[0][i] += dX[i];
        dX = haar_adjoint(dYl, d.hl[l - 1], d.wl[l - 1], all_plus);
      }
      const float* w0 = prm.base_weight + size_t(c) * kk;
      const double s0 = prm.base_scale[c], bias = prm.base_bias ? prm.base_bias[c] : 0.0;
      const Plane base_dx = corr_same_adjoint(D, d.H, d.W, w0, d.k);
      for (size_t i = 0; i < base_dx.size(); ++i) g->dx[pl * d.H * d.W + i] = s0 * base_dx[i] + dX[i];
      corr_weight_grad(x0, D, d.H, d.W, d.k, s0, g->base_weight.data() + size_t(c) * kk);
      const Plane conv = corr_same(x0, d.H, d.W, w0, d.k);
      double ds = 0.0, sd = 0.0;
      for (size_t i = 0; i < conv.size(); ++i) { ds += (conv[i] + bias) * D[i]; sd += D[i]; }
      g->base_scale[c] += ds;
      g->base_bias[c] += s0 * sd;
    }
}

// The forward of wtconv_reference_forward; all_plus: every Haar sign + (wtconv_reference_forward_magnitudes).
void forward(const WtconvProblem& problem, const float* x, const WtconvParams& prm, std::vector<double>* y,
             bool all_plus) {
  const Dims d = dims_of(problem);
  const int kk = d.k * d.k;
  y->assign(size_t(d.B) * d.C * d.Ho * d.Wo, 0.0);
  for (int b = 0; b < d.B; ++b)
    for (int c = 0; c < d.C; ++c) {
      const size_t pl = size_t(b) * d.C + c;
      Plane x0(x + pl * d.H * d.W, x + (pl + 1) * d.H * d.W);
      Plane Y[kWtconvMaxLevels + 1][4];
      analysis(d, x0, Y, all_plus);
      Plane out = corr_same(x0, d.H, d.W, prm.base_weight + size_t(c) * kk, d.k);
      const double s0 = prm.base_scale[c], bias = prm.base_bias ? prm.base_bias[c] : 0.0;
      for (double& v : out) v = s0 * (v + bias);
      for (int l = 1; l <= d.L; ++l) {
        Plane Z[4];
        for (int s = 0; s < 4; ++s) {
          Z[s] = corr_same(Y[l][s], d.hl[l], d.wl[l], prm.level_weight[l - 1] + size_t(4 * c + s) * kk, d.k);
          const double sl = prm.level_scale[l - 1][4 * c + s];
          for (double& v : Z[s]) v *= sl;
        }
        const double f = 1.0 / double(1 << l);
        for (int yy = 0; yy < d.H; ++yy)
          for (int xx = 0; xx < d.W; ++xx) {
            const size_t o = size_t(yy >> l) * d.wl[l] + (xx >> l);
            const double sy = ((yy >> (l - 1)) & 1) && !all_plus ? -1.0 : 1.0,
                         sx = ((xx >> (l - 1)) & 1) && !all_plus ? -1.0 : 1.0;
            out[size_t(yy) * d.W + xx] += f * (Z[0][o] + sy * Z[1][o] + sx * Z[2][o] + sy * sx * Z[3][o]);
          }
      }
      for (int oy = 0; oy < d.Ho; ++oy)
        for (int ox = 0; ox < d.Wo; ++ox)
          (*y)[pl * d.Ho * d.Wo + size_t(oy) * d.Wo + ox] = out[size_t(oy * d.s) * d.W + ox * d.s];
    }
}

}  // namespace

void wtconv_reference_forward(const WtconvProblem& problem, const float* x, const WtconvParams& prm,
                              std::vector<double>* y) {
  forward(problem, x, prm, y, false);
}

void wtconv_reference_forward_magnitudes(const WtconvProblem& problem, const float* x, const WtconvParams& prm,
                                         std::vector<double>* y) {
  forward(problem, x, prm, y, true);
}

void wtconv_reference_backward(const WtconvProblem& problem, const float* dy, const float* x,
                               const WtconvParams& prm, WtconvReferenceGrads* g) {
  backward(problem, dy, x, prm, g, false);
}

void wtconv_reference_magnitudes(const WtconvProblem& problem, const float* dy, const float* x,
                                 const WtconvParams& prm, WtconvReferenceGrads* g) {
  backward(problem, dy, x, prm, g, true);
}

}  // namespace winconv
