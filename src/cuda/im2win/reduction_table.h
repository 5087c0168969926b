// The reduction table of the on-chip im2win gathers.
//
// In an on-chip GEMM the reduction index kk names a filter tap (c, u, v), and the element it
// reads sits at the same offset from every window's origin: (c*H + u)*W + v in NCHW,
// (u*W + v)*C + c in NHWC. Walking those digits per element cost the gathers 15-20 integer
// instructions per 4-byte copy, 10-20% of the GEMM loop's issue slots. The table holds the
// offset of every kk once per call, written with the repacked filter; a gather reads its
// entries as 16-byte vectors (every block reads the same few KB) and adds one to its window
// pointer per copy.
//
// kg_pad offsets (C*R*S rounded up to whole stages); those at kk >= C*R*S are zero, so their
// predicated-off copies still point inside the window. With zero padding a second run of kg_pad
// entries follows: each entry's tap bits (tap_mask.h), which the padded gathers test against
// their pixel's outside mask.
#pragma once

#include <cstddef>

namespace winconv::im2win {

inline size_t reduction_table_bytes(int kg_pad, bool with_tap_bits) {
  return sizeof(int) * size_t(kg_pad) * (with_tap_bits ? 2 : 1);
}

}  // namespace winconv::im2win
