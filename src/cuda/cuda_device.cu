#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_status.h"

namespace winconv {

Status cuda_check_device(int* num_sms) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not confused
    return Status(StatusCode::kNoDevice, std::string("no usable CUDA device: ") +
                                             (err == cudaSuccess ? "device count is 0" : cudaGetErrorString(err)));
  }
  int dev = 0;
  WINCONV_RETURN_IF_CUDA_ERROR(cudaGetDevice(&dev), "cudaGetDevice");
  // Properties do not change while the process runs; read them once per device.
  static std::mutex mu;
  static std::vector<int> sms_cache(64, 0), major_cache(64, 0), minor_cache(64, 0);
  std::lock_guard<std::mutex> lock(mu);
  if (dev >= int(sms_cache.size())) return Status(StatusCode::kNoDevice, "device index out of range");
  if (sms_cache[dev] == 0) {
    WINCONV_RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&sms_cache[dev], cudaDevAttrMultiProcessorCount, dev),
                                 "cudaDeviceGetAttribute(MultiProcessorCount)");
    WINCONV_RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&major_cache[dev], cudaDevAttrComputeCapabilityMajor, dev),
                                 "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
    WINCONV_RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&minor_cache[dev], cudaDevAttrComputeCapabilityMinor, dev),
                                 "cudaDeviceGetAttribute(ComputeCapabilityMinor)");
  }
  if (major_cache[dev] != 9 || minor_cache[dev] != 0) {
    return Status(StatusCode::kUnsupported,
                  "winconv's kernels are built for sm_90a (H100/H200); device " + std::to_string(dev) +
                      " has compute capability " + std::to_string(major_cache[dev]) + "." +
                      std::to_string(minor_cache[dev]));
  }
  if (num_sms) *num_sms = sms_cache[dev];
  return Status::Ok();
}

Status cuda_check_no_pending_error() {
  const cudaError_t pending = cudaPeekAtLastError();
  if (pending == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kCudaError, std::string("an earlier CUDA call left an error pending: ") +
                                            cudaGetErrorName(pending) + " (" + cudaGetErrorString(pending) +
                                            "); nothing was launched (cudaGetLastError() reads and clears it)");
}

}  // namespace winconv
