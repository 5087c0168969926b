// conv2d_forward with the GEMM tile shape given by the caller instead of select_tile's choice
// (the reduction splits follow from it), and the plan either one runs.
// Not public API: the tile sweep in dev/ uses it to measure the shapes the selection rule
// chooses between. A null tile_override is exactly conv2d_forward.
#pragma once

#include <cstdint>

#include "cuda/im2win/conv_fp32_launch.h"
#include "cuda/im2win/tile_select.h"
#include "winconv/conv2d.h"

namespace winconv {

// The reduction table the GEMM's gather reads (reduction_table.h): none (materialized windows,
// the NHWC channel-vector gather, and padded windows past the tap mask's reach, which walk the
// reduction digits), offsets (on chip without padding), or offsets and tap bits (on chip with
// padding, tap_mask.h).
enum class ReductionTableKind { kNone, kOffsets, kOffsetsAndTapBits };

// How the FP32 GEMM of a call runs on a device with num_sms SMs: the GEMM size, how the A stage
// is stored (pixel-major for NHWC with C % 4 == 0: 16-byte channel copies), the reduction table,
// the tile shape and the reduction splits. With no device (num_sms = 0) there is one split.
struct Conv2dGemmPlan {
  // The direct kernel instead of the GEMM (shallow_select.h): the fields below then go unused.
  bool shallow = false;
  int64_t m = 0, n = 0;
  im2win::AStageOrder a_order = im2win::AStageOrder::kKMajor;
  ReductionTableKind table = ReductionTableKind::kNone;
  im2win::TileShape tile = im2win::TileShape::k128x128;
  im2win::KSplit ksplit;
};

// tile_override: the shape to use instead of select_tile's (null: select_tile's, or the direct
// shallow kernel where shallow_direct_selected holds; a tile override always runs the GEMM).
Conv2dGemmPlan conv2d_gemm_plan(const Conv2dConfig& config, int num_sms, const im2win::TileShape* tile_override);

// The workspace conv2d_forward_tiled needs with this tile (null: select_tile's).
Status conv2d_forward_tiled_workspace_size(const Conv2dConfig& config, const im2win::TileShape* tile_override,
                                           size_t* bytes);

Status conv2d_forward_tiled(const Conv2dConfig& config, const void* x, const void* w, void* y, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream, const im2win::TileShape* tile_override);

// The direct shallow kernel on any NCHW problem it fits (C*R*S up to kShallowMaxDepth),
// whatever the rule says: the tile sweep measures it beside the GEMM's tiles to place the rule's
// filter threshold. No workspace. kUnsupported where the kernel does not fit the problem.
Status conv2d_forward_shallow(const Conv2dConfig& config, const void* x, const void* w, void* y, cudaStream_t stream);

}  // namespace winconv
