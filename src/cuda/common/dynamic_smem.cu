#include "cuda/common/dynamic_smem.h"

#include "cuda/cuda_status.h"

#include <map>
#include <mutex>
#include <utility>

namespace winconv {
namespace {

constexpr size_t kDefaultDynamicSmem = 48 * 1024;

struct RaisedLimits {
  std::mutex mutex;
  std::map<std::pair<int, const void*>, size_t> bytes;  // (device, kernel) -> limit set
};

RaisedLimits& raised() {
  static RaisedLimits r;
  return r;
}

}  // namespace

cudaError_t ensure_dynamic_smem(const void* kernel, size_t bytes) {
  if (bytes <= kDefaultDynamicSmem) return cudaSuccess;
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return cuda_take_error(e);
  RaisedLimits& r = raised();
  const std::lock_guard<std::mutex> lock(r.mutex);
  size_t& have = r.bytes[{device, kernel}];
  if (have >= bytes) return cudaSuccess;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e == cudaSuccess) have = bytes;
  return cuda_take_error(e);
}

}  // namespace winconv
