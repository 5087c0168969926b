// The tile-shape rule for the FP32 im2win GEMM (documented in docs/perf-notes.md):
//   1. BN = 64 when K <= 64 (small-K layers such as C=3 stems with K=64), else 128.
//   2. BM = 128, unless that leaves fewer than two blocks per SM (small images late in a
//      network); then BM = 64, and if still short, BN = 64 as well.
// Big tiles give the most FLOPs per byte of shared memory read; the fallbacks keep every SM
// busy when the GEMM is small (conv12: M = 3200).
#pragma once

#include <cstdint>

#include "cuda/im2win/conv_fp32_launch.h"

namespace winconv::im2win {

inline int64_t tile_count(int64_t m, int64_t n, TileShape t) {
  return ((m + tile_bm(t) - 1) / tile_bm(t)) * ((n + tile_bn(t) - 1) / tile_bn(t));
}

inline TileShape select_tile(int64_t m, int64_t n, int num_sms) {
  const int64_t enough = 2 * int64_t(num_sms);
  if (n <= 64) return tile_count(m, n, TileShape::k128x64) >= enough ? TileShape::k128x64 : TileShape::k64x64;
  if (tile_count(m, n, TileShape::k128x128) >= enough) return TileShape::k128x128;
  if (tile_count(m, n, TileShape::k64x128) >= enough) return TileShape::k64x128;
  return TileShape::k64x64;
}

}  // namespace winconv::im2win
