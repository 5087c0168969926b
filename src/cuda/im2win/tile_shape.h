// The block tile shapes of the FP32 im2win GEMM (BM pixels x BN output channels). Host-only and
// free of CUDA headers, so the selection rule can be tested on a machine without CUDA. A 64x64
// tile (2-warp blocks) was measured and dropped: it never beat the best of these three by more
// than 0.5%, and lost up to 29% where it was chosen for GEMMs too small to fill the GPU.
#pragma once

namespace winconv::im2win {

enum class TileShape { k128x128, k128x64, k64x128 };

inline int tile_bm(TileShape t) { return (t == TileShape::k128x128 || t == TileShape::k128x64) ? 128 : 64; }
inline int tile_bn(TileShape t) { return (t == TileShape::k128x128 || t == TileShape::k64x128) ? 128 : 64; }
inline const char* tile_name(TileShape t) {
  switch (t) {
    case TileShape::k128x128: return "128x128";
    case TileShape::k128x64: return "128x64";
    case TileShape::k64x128: return "64x128";
  }
  return "unknown";
}

}  // namespace winconv::im2win
