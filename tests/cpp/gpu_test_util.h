// GPU test helpers: device buffers, a skip when no device exists, NaN poisoning.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "fuzz_util.h"

namespace winconv::testing {

inline bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

#define WINCONV_REQUIRE_GPU()                                                     \
  do {                                                                            \
    if (!::winconv::testing::have_gpu()) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
  } while (0)

template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    if (n) EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(T)), cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (count) EXPECT_EQ(cudaMemcpy(ptr, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { if (ptr) cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void poison() { if (count) EXPECT_EQ(cudaMemset(ptr, 0xFF, count * sizeof(T)), cudaSuccess); }  // NaN
  std::vector<T> to_host() const {
    std::vector<T> h(count);
    if (count) EXPECT_EQ(cudaMemcpy(h.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

}  // namespace winconv::testing
