// The kernel-size dispatch of every WTConv launcher (dispatch_kernel_size), on the host: the
// specialised sizes 3, 5 and 7 as themselves, k = 1 as the runtime-k instance compiled for k = 1
// alone (kOnly = 1; the level kernels' kWindows = false), every other odd size as the runtime-k
// instance, and the specialised sizes exactly plan.h's list. No GPU needed.
#include <gtest/gtest.h>

#include "cuda/wtconv/wtconv_kernels.cuh"

namespace winconv {
namespace wtconv_detail {
namespace {

TEST(WtconvDispatchHost, KernelSizeSelectsItsInstance) {
  for (int k = 1; k <= 15; k += 2) {
    int got_k = -1, got_only = -1, calls = 0;
    const cudaError_t e = dispatch_kernel_size(k, [&](auto kc, auto only) {
      got_k = decltype(kc)::value;
      got_only = decltype(only)::value;
      ++calls;
      return cudaSuccess;
    });
    EXPECT_EQ(e, cudaSuccess) << "k " << k;
    EXPECT_EQ(calls, 1) << "k " << k;
    EXPECT_EQ(got_k, specialised_kernel_size(k) ? k : 0) << "k " << k;
    EXPECT_EQ(got_only, k == 1 ? 1 : 0) << "k " << k;
  }
  // The launcher's error travels back unchanged.
  EXPECT_EQ(dispatch_kernel_size(9, [](auto, auto) { return cudaErrorNotSupported; }), cudaErrorNotSupported);
}

}  // namespace
}  // namespace wtconv_detail
}  // namespace winconv
