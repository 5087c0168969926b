// The bounds test of the padded on-chip gathers as one AND per copied element.
//
// With zero padding, element kk of a window (filter tap (c, u, v)) lies inside the image when
// its row ih0 + u and column iw0 + v do. Which rows and columns fall outside depends only on the
// pixel (its window origin ih0, iw0), so each thread computes them once per kernel as a 32-bit
// "outside" mask: bit u for every row u < R outside the image, bit 16 + v for every column
// v < S outside it. The reduction table carries, beside each entry's offset, the entry's tap bits
// (1 << u) | (1 << (16 + v)); the element is inside exactly when (tap & outside) == 0.
//
// Two bits mark what is never copied: bit 15 is set in the tap bits of the table's tail entries
// (kk >= C*R*S, up to whole stages) and in every outside mask; a tail pixel (past M) gets an
// outside mask of all ones. So the same AND also covers the reduction and pixel tails.
// Rows and columns take 15 bits each: R and S up to kTapMaskMaxExtent; wider filters walk the
// reduction digits instead (window_gather.cuh).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define WINCONV_TAP_MASK_HD __host__ __device__ __forceinline__
#else
#define WINCONV_TAP_MASK_HD inline
#endif

namespace winconv::im2win {

constexpr int kTapMaskMaxExtent = 15;
constexpr int kTapColumnShift = 16;
constexpr uint32_t kTapTailBit = 1u << 15;

inline bool tap_mask_fits(int64_t r, int64_t s) { return r <= kTapMaskMaxExtent && s <= kTapMaskMaxExtent; }

// The tap bits of filter tap (u, v); the table's entries past the reduction get kTapTailBit.
WINCONV_TAP_MASK_HD uint32_t tap_bits(int u, int v) { return (1u << u) | (1u << (kTapColumnShift + v)); }

// Bits t < taps whose coordinate origin + t lies outside [0, extent).
WINCONV_TAP_MASK_HD uint32_t outside_bits(int origin, int extent, int taps) {
  const int lo = origin >= 0 ? 0 : (-origin < taps ? -origin : taps);  // t < lo: before the image
  const int end = extent - origin;                                     // t >= end: past the image
  const int hi = end <= 0 ? 0 : (end < taps ? end : taps);
  const uint32_t all = (1u << taps) - 1u;
  return ((1u << lo) - 1u) | (all & ~((1u << hi) - 1u));
}

// The outside mask of a pixel whose window starts at (ih0, iw0); all ones for a tail pixel.
WINCONV_TAP_MASK_HD uint32_t outside_mask(bool pixel_valid, int ih0, int iw0, int h, int w, int r, int s) {
  if (!pixel_valid) return ~0u;
  return outside_bits(ih0, h, r) | (outside_bits(iw0, w, s) << kTapColumnShift) | kTapTailBit;
}

WINCONV_TAP_MASK_HD bool tap_inside(uint32_t tap, uint32_t outside) { return (tap & outside) == 0u; }

}  // namespace winconv::im2win
