// FP32 im2win GEMM, A from GatherOnChipNhwcTapMask, all tile shapes. One file per variant keeps builds parallel.
#include "cuda/im2win/conv_fp32_launch.cuh"

namespace winconv::im2win {

cudaError_t launch_conv_fp32_onchip_nhwc_tapmask(const ConvGemmParams& p, const SplitKParams& sk, TileShape tile,
                                                 cudaStream_t stream) {
  return launch_conv_fp32<GatherOnChipNhwcTapMask, false>(p, sk, tile, stream);
}

}  // namespace winconv::im2win
