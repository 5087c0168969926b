// The Haar (db1) butterflies of the WTConv kernels: analysis of a 2 x 2 block, the raw LL value,
// and one child of the synthesis.
#pragma once

namespace winconv {
namespace wtconv_detail {

// Haar analysis of the 2x2 block [a b; c d]; the 4x4 matrix is symmetric and orthogonal, so the
// same butterfly is also the synthesis (used by the backward).
__device__ __forceinline__ void haar4(float a, float b, float c, float d, float out[4]) {
  const float s0 = a + b, s1 = c + d, d0 = a - b, d1 = c - d;
  out[0] = 0.5f * (s0 + s1);  // LL
  out[1] = 0.5f * (s0 - s1);  // S1: sign by row
  out[2] = 0.5f * (d0 + d1);  // S2: sign by column
  out[3] = 0.5f * (d0 - d1);  // HH
}

// The raw LL value of the 2x2 block [a b; c d], as haar_cascade_kernel stores it. The level-2
// kernels that read the activations form X_1 with this same function, so their X_1 equals the
// stored chain bit for bit.
__device__ __forceinline__ float haar_ll(float a, float b, float c, float d) { return 0.5f * ((a + b) + (c + d)); }
// The LL values of the four 2x2 blocks of a 4 x 4 pixel patch whose columns start at c: (rows 0-1,
// columns c..c+1), (0-1, c+2..c+3), (2-3, c..c+1), (2-3, c+2..c+3).
template <int N>
__device__ __forceinline__ float4 haar_ll_quad(const float (&p)[4][N], int c) {
  return make_float4(haar_ll(p[0][c], p[0][c + 1], p[1][c], p[1][c + 1]),
                     haar_ll(p[0][c + 2], p[0][c + 3], p[1][c + 2], p[1][c + 3]),
                     haar_ll(p[2][c], p[2][c + 1], p[3][c], p[3][c + 1]),
                     haar_ll(p[2][c + 2], p[2][c + 3], p[3][c + 2], p[3][c + 3]));
}

// Child (dy, dx) of the synthesis of [ll s1 s2 hh] without the 1/2 factor.
__device__ __forceinline__ float synth_child(const float z[4], int dy, int dx) {
  const float sy = dy ? -1.f : 1.f, sx = dx ? -1.f : 1.f;
  return z[0] + sy * z[1] + sx * z[2] + sy * sx * z[3];
}

}  // namespace wtconv_detail
}  // namespace winconv
