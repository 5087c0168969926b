// Host-side entry to the FP32 im2win GEMM kernels: one launcher per (A source, layout), each
// dispatching over the tile shapes that tile_select.h chooses from, and to the split-K kernel
// when sk.k_splits > 1.
#pragma once

#include <cuda_runtime.h>

#include "cuda/im2win/conv_gemm_params.h"
#include "cuda/im2win/tile_shape.h"

namespace winconv::im2win {

// Every launcher has this type: the GEMM's parameters, its reduction splits, the tile shape.
using ConvFp32Launcher = cudaError_t(const ConvGemmParams& p, const SplitKParams& sk, TileShape tile,
                                     cudaStream_t stream);

// On-chip windows: without padding (no bounds tests), with padding through the table's tap bits
// (R, S <= kTapMaskMaxExtent, tap_mask.h), with padding walking the reduction digits (wider filters).
ConvFp32Launcher launch_conv_fp32_onchip_nchw_unpadded;
ConvFp32Launcher launch_conv_fp32_onchip_nchw_tapmask;
ConvFp32Launcher launch_conv_fp32_onchip_nchw;
ConvFp32Launcher launch_conv_fp32_onchip_nhwc_unpadded;
ConvFp32Launcher launch_conv_fp32_onchip_nhwc_tapmask;
ConvFp32Launcher launch_conv_fp32_onchip_nhwc;
ConvFp32Launcher launch_conv_fp32_window_nchw;
ConvFp32Launcher launch_conv_fp32_window_nhwc;
// NHWC with C % 4 == 0: 16-byte channel copies into a pixel-major A stage.
ConvFp32Launcher launch_conv_fp32_onchip_nhwc_vec;
ConvFp32Launcher launch_conv_fp32_window_nhwc_vec;

}  // namespace winconv::im2win
