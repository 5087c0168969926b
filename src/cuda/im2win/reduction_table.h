// The reduction table of the unpadded on-chip im2win gathers.
//
// In an on-chip GEMM the reduction index kk names a filter tap (c, u, v), and the element it
// reads sits at the same offset from every window's origin: (c*H + u)*W + v in NCHW,
// (u*W + v)*C + c in NHWC. Walking those digits per element cost the gathers 15-20 integer
// instructions per 4-byte copy, 10-20% of the GEMM loop's issue slots. The table holds the
// offset of every kk once per call, written with the repacked filter; a gather reads its
// entries as 16-byte vectors (every block reads the same few KB) and adds one to its window
// pointer per copy.
//
// kg_pad entries (C*R*S rounded up to whole stages); those at kk >= C*R*S are zero, so their
// predicated-off copies still point inside the window.
#pragma once

#include <cstddef>

namespace winconv::im2win {

inline size_t reduction_table_bytes(int kg_pad) { return sizeof(int) * size_t(kg_pad); }

}  // namespace winconv::im2win
