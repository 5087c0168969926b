// The tile-shape rule for the FP32 im2win GEMM (docs/perf-notes.md, "Tile selection rule").
//
// Predicted time of a shape = (tiles on the busiest SM) x (tile area) / (the shape's rate).
// Tiles spread evenly over the SMs, so the busiest SM runs ceil(tiles / SMs) of them; the tile
// area counts the padded columns a BN wider than N wastes. This one formula covers the wave
// tail (conv11: 288 tiles of 128x128 on 132 SMs leave a third round to 24 SMs; 576 of 64x128
// spread better), the tile efficiency on long GEMMs (128x128 reads the fewest operand bytes per
// FMA), and small GEMMs (conv12: 100 tiles of 128x128, one round on 132 SMs, beat 200 of 64x128).
//
// The rates are relative throughputs measured with every shape on a GEMM of ~12000 tiles
// (conv8, H200) and depend on how the A stage is stored:
//   - k-major A (NCHW and the scalar NHWC gather): 128x128 is fastest (128 registers, 2 blocks
//     per SM); 64x128 gathers half the A elements per FMA of 128x64 and runs close to it.
//   - pixel-major A (NHWC vector gather): the 256-thread 128x128 tile is the slowest of the three
//     (capped at 128 registers it reads A as float2 pairs); the 128-thread tiles keep 3 blocks
//     per SM at more registers.
// When every shape leaves SMs idle (one tile per SM or fewer), the smallest area wins: each
// block runs alone and its time follows its tile area.
#pragma once

#include <cstdint>

#include "cuda/im2win/tile_shape.h"

namespace winconv::im2win {

// How the GEMM kernel stores its A (window) stage in shared memory.
enum class AStageOrder { kKMajor, kPixelMajor };

inline int64_t tile_count(int64_t m, int64_t n, TileShape t) {
  return ((m + tile_bm(t) - 1) / tile_bm(t)) * ((n + tile_bn(t) - 1) / tile_bn(t));
}

// Relative throughput of a full SM with this shape, per mille of the fastest shape.
inline int tile_rate_permille(TileShape t, AStageOrder order) {
  const bool k_major = order == AStageOrder::kKMajor;
  switch (t) {
    case TileShape::k128x128: return k_major ? 1000 : 920;
    case TileShape::k64x128: return k_major ? 970 : 1000;
    case TileShape::k128x64: return k_major ? 910 : 990;
  }
  return 1;
}

// Predicted time of the GEMM with this shape, in units of FMA-area over rate (only comparisons
// between shapes of one problem mean anything).
inline double tile_cost(int64_t m, int64_t n, int num_sms, TileShape t, AStageOrder order) {
  const int64_t per_sm = (tile_count(m, n, t) + num_sms - 1) / num_sms;
  return double(per_sm) * double(tile_bm(t) * tile_bn(t)) / double(tile_rate_permille(t, order));
}

inline TileShape select_tile(int64_t m, int64_t n, int num_sms, AStageOrder order) {
  // N <= 64: a BN = 128 tile is at least half padding. The cost model charges that only through
  // the tile count, which stops counting once every tile runs alone on its SM.
  if (n <= 64) return TileShape::k128x64;
  TileShape best = TileShape::k128x128;
  for (TileShape t : {TileShape::k64x128, TileShape::k128x64})
    if (tile_cost(m, n, num_sms, t, order) < tile_cost(m, n, num_sms, best, order)) best = t;
  return best;
}

}  // namespace winconv::im2win
