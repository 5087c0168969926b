// conv2d_forward with the GEMM tile shape given by the caller instead of select_tile's choice.
// Not public API: the tile sweep in dev/ uses it to measure the shapes the selection rule
// chooses between. A null tile_override is exactly conv2d_forward.
#pragma once

#include "cuda/im2win/conv_fp32_launch.h"
#include "winconv/conv2d.h"

namespace winconv {

Status conv2d_forward_tiled(const Conv2dConfig& config, const void* x, const void* w, void* y, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream, const im2win::TileShape* tile_override);

}  // namespace winconv
