// Stride 2's base conv as four level-1 subband filters, forward and backward (docs/wtconv.md,
// notes 124 and 125).
#pragma once

#include "wtconv_layouts.h"

namespace winconv {
namespace wtconv_detail {

// synth_child's sign of subband t at pixel parity (p, q): the row sign on S1, the column sign on S2.
WTCONV_HOST_DEVICE inline bool fold_sign_negative(int t, int p, int q) { return ((t & 1) && p) != ((t & 2) && q); }

// Stride 2 keeps only the outputs (2i, 2j), the first children of the level-1 coefficients (i, j),
// and the pixels of x are the Haar synthesis of Y_1: x(2m + p, 2n + q) = 1/2 sum_t sgn(t, p, q)
// Y_1t(m, n) (synth_child's signs). So the base conv at those outputs is a sum of four k x k convs
// of the subbands, sum_t V_t conv Y_1t, and since the first child of the synthesis adds the four
// subband results with sign +1, V_t joins subband t's filter: the output is one synthesis of four
// subband convs, 4 k^2 multiply-adds per output where the full grid took 8 k^2 (its base conv
// over four pixels, and level 1). Tap (u, v) of V_t gathers the base taps (a, b) = (2u - r + p,
// 2v - r + q), p, q in {0, 1}, that read pixel parity (p, q) of the coefficient u - r rows and
// v - r columns away. The forward base kernel reads W0 (without s0) from global memory, once per
// block; plain C++ too, so the CPU tests check the identity (test_wtconv_fold_cpu.cpp).
// folded_tap_sum is the signed sum of the base taps, without the synthesis' 1/2.
WTCONV_HOST_DEVICE inline float folded_tap_sum(const float* w0c, int k, int t, int u, int v) {
  const int r = k / 2;
  float acc = 0.f;
  for (int p = 0; p < 2; ++p) {
    const int a = 2 * u - r + p;
    if (a < 0 || a >= k) continue;
    for (int q = 0; q < 2; ++q) {
      const int b = 2 * v - r + q;
      if (b < 0 || b >= k) continue;
      acc += fold_sign_negative(t, p, q) ? -w0c[a * k + b] : w0c[a * k + b];
    }
  }
  return acc;
}
WTCONV_HOST_DEVICE inline float folded_base_tap(const float* w0c, int k, int t, int u, int v) {
  return 0.5f * folded_tap_sum(w0c, k, t, u, v);
}

// The backward at stride 2 runs on dy spread onto the full grid (D: dy at the pixels (2m, 2n), zeros
// between them), so every 2 x 2 block of D holds one sample, at its first pixel, and the level-1
// gradient G_1 = Haar(D) is dy / 2 in every subband. The base part of dx, dx_base = s0 (flipped W0)
// conv D, then has Haar coefficients that are k x k correlations of dy: subband t of dx_base at
// coefficient (m, n) is sum_{i, j} U_t[i][j] dy(m + i - r, n + j - r) with
//   U_t[i][j] = 1/2 sum_{p, q in {0, 1}} sgn(t, p, q) s0 W0[p + 3r - 2i][q + 3r - 2j]
// (taps inside the filter only; pixel (2m + p, 2n + q) reads D at (2m + p - a + r, ...), a sample
// only where p - a + r = 2 (i - r)). As a correlation of G_1 = dy / 2 that is 2 U_t, which joins the
// level-1 filter of subband t, s1 (flipped W_1t): dx is the synthesis of four subband correlations
// of G_1 alone, with no base conv over the pixels. Returned: 2 U_t[i][j] / s0, from W0 as stored
// (not flipped). With u = 2r - i, p + 3r - 2i = 2u - r + p: U_t is the forward's V_t flipped, as
// the backward's level-1 filters are the forward's flipped, so this is the forward's signed sum at
// the flipped tap (folded_tap_sum; folded_base_tap is half of it).
WTCONV_HOST_DEVICE inline float folded_dx_tap(const float* w0c, int k, int t, int i, int j) {
  return folded_tap_sum(w0c, k, t, k - 1 - i, k - 1 - j);
}

// The base weight's correlation at stride 2 from the level-1 ones, for the same reason: with
// C0[a][b] = sum D(P, Q) x(P + a - r, Q + b - r) and C_1t[u][v] = sum G_1t(m, n) Y_1t(m + u - r,
// n + v - r) (G_1t = dy / 2), x's pixel at parity (p, q) is 1/2 sum_t sgn(t, p, q) Y_1t, so
//   C0[a][b] = sum_t sgn(t, pa, pb) C_1t[u][v],  pa = (a - r) mod 2, u = (a - r - pa) / 2 + r
// (likewise pb, v). The tap of C_1t that C0[a][b] takes, and the pixel parity that signs it
// (fold_sign_negative(t, pa, pb)).
struct FoldedCorrTap {
  int u, v, pa, pb;
};
WTCONV_HOST_DEVICE inline FoldedCorrTap folded_corr_tap(int k, int a, int b) {
  const int r = k / 2, pa = (a - r) & 1, pb = (b - r) & 1;  // & 1: the parity of negative offsets too
  return FoldedCorrTap{(a - r - pa) / 2 + r, (b - r - pb) / 2 + r, pa, pb};
}

}  // namespace wtconv_detail
}  // namespace winconv
