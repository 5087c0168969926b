// The block tile shapes of the FP32 im2win GEMM (BM pixels x BN output channels). Host-only and
// free of CUDA headers, so the selection rule can be tested on a machine without CUDA. A 64x64
// tile (2-warp blocks) was measured and dropped: it never beat the best of 128x128, 128x64 and
// 64x128 by more than 0.5%, and lost up to 29% where it was chosen for GEMMs too small to fill
// the GPU.
// 128x96 exists for N = 96 (and 192, ...): a 128-wide tile computes a third as many padded
// columns as real ones there. Its 128 threads own 8x12 outputs (3 resident blocks): as 256
// threads of 8x6 (v9) it read 5 shared vectors per 48 FMAs instead of per 96 and ran 1-16%
// slower at batch 128 (4-16% on k-major layers), though up to 1.18x faster on small grids of the
// pixel-major (NHWC vector) stage (docs/conv2d.md, v27).
// 128x32 exists for 16 < N <= 32 (layers of 32 filters), where 128x64 computes at least as many
// padded columns as real ones; its threads own 8x4 outputs. 128x16 likewise for N <= 16: its
// threads own 8x2 outputs (3 shared-memory reads per 16 FMAs, where 128x32 has 3 per 32, against
// half the FMAs of 128x32 wasted on padding at N = 16).
#pragma once

namespace winconv::im2win {

enum class TileShape { k128x128, k128x64, k64x128, k128x96, k128x32, k128x16 };
// Every shape, for the tests and the tile sweep that try them all.
inline constexpr TileShape kAllTileShapes[] = {TileShape::k128x128, TileShape::k128x64, TileShape::k64x128,
                                               TileShape::k128x96,  TileShape::k128x32, TileShape::k128x16};

inline int tile_bm(TileShape t) { return t == TileShape::k64x128 ? 64 : 128; }
inline int tile_bn(TileShape t) {
  switch (t) {
    case TileShape::k128x64: return 64;
    case TileShape::k128x96: return 96;
    case TileShape::k128x32: return 32;
    case TileShape::k128x16: return 16;
    default: return 128;
  }
}
// Outputs per thread along N for a tile BN wide: 8, or 12 in the 96-wide tile, 4 in the 32-wide
// one and 2 in the 16-wide one, so that 8 threads span BN (the kernel's NFragment follows it).
// Threads = BM/8 * BN/tile_tn.
constexpr int tile_tn_of_bn(int bn) { return bn == 96 ? 12 : bn == 32 ? 4 : bn == 16 ? 2 : 8; }
inline int tile_tn(TileShape t) { return tile_tn_of_bn(tile_bn(t)); }
inline int tile_threads(TileShape t) { return tile_bm(t) / 8 * (tile_bn(t) / tile_tn(t)); }
inline const char* tile_name(TileShape t) {
  switch (t) {
    case TileShape::k128x128: return "128x128";
    case TileShape::k128x64: return "128x64";
    case TileShape::k64x128: return "64x128";
    case TileShape::k128x96: return "128x96";
    case TileShape::k128x32: return "128x32";
    case TileShape::k128x16: return "128x16";
  }
  return "unknown";
}

}  // namespace winconv::im2win
