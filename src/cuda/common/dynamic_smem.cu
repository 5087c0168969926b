#include "cuda/common/dynamic_smem.h"

#include "cuda/common/shared_carveout.h"
#include "cuda/cuda_status.h"

#include <map>
#include <mutex>
#include <utility>

namespace winconv {
namespace {

constexpr size_t kDefaultDynamicSmem = 48 * 1024;

struct KernelSmem {
  size_t limit = 0;         // the dynamic shared-memory limit set (0: the default)
  bool fitted = false;      // a carveout was fitted, to launches of fitted_bytes
  size_t fitted_bytes = 0;
};

struct KernelSmemTable {
  std::mutex mutex;
  std::map<std::pair<int, const void*>, KernelSmem> kernels;  // (device, kernel)
};

KernelSmemTable& table() {
  static KernelSmemTable t;
  return t;
}

cudaError_t raise_limit(const void* kernel, size_t bytes, KernelSmem& k) {
  if (bytes <= kDefaultDynamicSmem || k.limit >= bytes) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (e == cudaSuccess) k.limit = bytes;
  return cuda_take_error(e);
}

// The occupancy query runs with the limit already raised, so it counts the blocks of this size.
cudaError_t fit_carveout(const void* kernel, size_t bytes, int threads, int device, KernelSmem& k) {
  if (k.fitted && k.fitted_bytes == bytes) return cudaSuccess;
  int blocks = 0, smem_per_sm = 0, reserved = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, bytes);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device);
  if (e != cudaSuccess) return cuda_take_error(e);
  const int percent = carveout_percent(blocks, int(bytes), reserved, smem_per_sm);
  if (percent >= 0) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, percent);
    if (e != cudaSuccess) return cuda_take_error(e);
  }
  k.fitted = true;
  k.fitted_bytes = bytes;
  return cudaSuccess;
}

cudaError_t ensure(const void* kernel, size_t bytes, int fitted_threads) {
  if (bytes <= kDefaultDynamicSmem && fitted_threads <= 0) return cudaSuccess;
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return cuda_take_error(e);
  KernelSmemTable& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  KernelSmem& k = t.kernels[{device, kernel}];
  e = raise_limit(kernel, bytes, k);
  if (e == cudaSuccess && fitted_threads > 0) e = fit_carveout(kernel, bytes, fitted_threads, device, k);
  return e;
}

}  // namespace

cudaError_t ensure_dynamic_smem(const void* kernel, size_t bytes) { return ensure(kernel, bytes, 0); }

cudaError_t ensure_dynamic_smem_fitted(const void* kernel, size_t bytes, int threads) {
  if (threads <= 0) return cudaErrorInvalidValue;
  return ensure(kernel, bytes, threads);
}

}  // namespace winconv
