// Stride 2's base conv as four level-1 subband filters (docs/wtconv.md, note 124).
#pragma once

#include "wtconv_layouts.h"

namespace winconv {
namespace wtconv_detail {

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
WTCONV_HOST_DEVICE inline float folded_base_tap(const float* w0c, int k, int t, int u, int v) {
  const int r = k / 2;
  float acc = 0.f;
  for (int p = 0; p < 2; ++p) {
    const int a = 2 * u - r + p;
    if (a < 0 || a >= k) continue;
    for (int q = 0; q < 2; ++q) {
      const int b = 2 * v - r + q;
      if (b < 0 || b >= k) continue;
      const bool neg = ((t & 1) && p) != ((t & 2) && q);  // synth_child: row sign on S1, column sign on S2
      acc += neg ? -w0c[a * k + b] : w0c[a * k + b];
    }
  }
  return 0.5f * acc;
}

}  // namespace wtconv_detail
}  // namespace winconv
