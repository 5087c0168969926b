#include "cuda/im2win/conv_fp32_launch.h"

namespace winconv::im2win {

const char* tile_name(TileShape t) {
  switch (t) {
    case TileShape::k128x128: return "128x128";
    case TileShape::k128x64: return "128x64";
    case TileShape::k64x128: return "64x128";
    case TileShape::k64x64: return "64x64";
  }
  return "unknown";
}

}  // namespace winconv::im2win
