// FP32 im2win GEMM, A from GatherWindowNhwcVec (NHWC, C % 4 == 0, 16-byte channel copies), all tile shapes.
#include "cuda/im2win/conv_fp32_launch.cuh"

namespace winconv::im2win {

cudaError_t launch_conv_fp32_window_nhwc_vec(const ConvGemmParams& p, const SplitKParams& sk, TileShape tile, cudaStream_t stream) {
  return launch_conv_fp32<GatherWindowNhwcVec, false>(p, sk, tile, stream);
}

}  // namespace winconv::im2win
