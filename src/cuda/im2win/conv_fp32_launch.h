// Host-side entry to the FP32 im2win GEMM kernels: one launcher per (A source, layout), each
// dispatching over the tile shapes that tile_select.h chooses from.
#pragma once

#include <cuda_runtime.h>

#include "cuda/im2win/conv_gemm_params.h"
#include "cuda/im2win/tile_shape.h"

namespace winconv::im2win {

cudaError_t launch_conv_fp32_onchip_nchw(const ConvGemmParams& p, TileShape tile, cudaStream_t stream);
// NCHW without padding: no bounds tests in the gather.
cudaError_t launch_conv_fp32_onchip_nchw_unpadded(const ConvGemmParams& p, TileShape tile, cudaStream_t stream);
cudaError_t launch_conv_fp32_onchip_nhwc(const ConvGemmParams& p, TileShape tile, cudaStream_t stream);
cudaError_t launch_conv_fp32_window_nchw(const ConvGemmParams& p, TileShape tile, cudaStream_t stream);
cudaError_t launch_conv_fp32_window_nhwc(const ConvGemmParams& p, TileShape tile, cudaStream_t stream);
// NHWC with C % 4 == 0: 16-byte channel copies into a pixel-major A stage.
cudaError_t launch_conv_fp32_onchip_nhwc_vec(const ConvGemmParams& p, TileShape tile, cudaStream_t stream);
cudaError_t launch_conv_fp32_window_nhwc_vec(const ConvGemmParams& p, TileShape tile, cudaStream_t stream);

}  // namespace winconv::im2win
