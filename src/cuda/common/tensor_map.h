// Host side of the TMA staging: a tensor map (cuTensorMapEncodeTiled, reached through the runtime's
// driver entry point, so nothing links libcuda directly) over a stack of activation planes.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace winconv {

// A 4-D map over an NCHW tensor (W, H, C, B innermost first) of `esize`-byte elements, read in boxes
// of box_w x box_h x 1 x box_planes (box_planes consecutive batch entries of one channel) and
// zero-filled outside the tensor. False when the driver lacks TMA or rejects the shape (base not
// 16-byte aligned, W * esize not a multiple of 16, a box side over 256, box_w * esize not a
// multiple of 16): the caller then stages without it.
bool encode_plane_box_map(CUtensorMap* map, const void* base, int esize, int64_t W, int64_t H, int64_t C,
                          int64_t B, int box_w, int box_h, int box_planes);

}  // namespace winconv
