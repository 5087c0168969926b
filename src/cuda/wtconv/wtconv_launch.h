// Internal launchers of the WTConv kernels (one per kernel file) and the two drivers that the
// public API calls. Host-only declarations; the definitions live in the .cu files beside it.
#pragma once

#include <cstdint>

#include "winconv/status.h"
#include "winconv/wtconv.h"
#include "wtconv_plan.h"

namespace winconv {
namespace wtconv_detail {

Status wtconv_forward_cuda(const WtconvRun& run, Precision precision, const void* x,
                           const WtconvParams& params, void* y, void* workspace, cudaStream_t stream);
Status wtconv_backward_cuda(const WtconvRun& run, Precision precision, const void* dy, const void* x,
                            const WtconvParams& params, void* dx, const WtconvParamGrads& grads,
                            void* workspace, cudaStream_t stream);

}  // namespace wtconv_detail
}  // namespace winconv
