// FP32 im2win GEMM, A from GatherOnChipNhwcUnpadded (NHWC, C % 4 != 0, no padding), all tile shapes.
#include "cuda/im2win/conv_fp32_launch.cuh"

namespace winconv::im2win {

cudaError_t launch_conv_fp32_onchip_nhwc_unpadded(const ConvGemmParams& p, const SplitKParams& sk, TileShape tile, cudaStream_t stream) {
  return launch_conv_fp32<GatherOnChipNhwcUnpadded, false>(p, sk, tile, stream);
}

}  // namespace winconv::im2win
