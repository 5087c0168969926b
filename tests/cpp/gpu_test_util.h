// GPU test helpers: device buffers, skips when no device exists or its memory is short, NaN
// poisoning.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>
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

// Free memory of the current device in bytes (0 when the query fails).
inline size_t device_free_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return free_bytes;
}

// Skips the test, saying how much it needs, when the device has less than `bytes` free (tests of
// tensors past 2^31 elements need tens of GB).
#define WINCONV_REQUIRE_DEVICE_MEMORY(bytes)                                                        \
  do {                                                                                              \
    const size_t need_ = size_t(bytes), free_ = ::winconv::testing::device_free_bytes();           \
    if (free_ < need_)                                                                              \
      GTEST_SKIP() << "needs " << need_ / (1 << 20) << " MiB of device memory, " << free_ / (1 << 20) \
                   << " MiB free: test skipped";                                                    \
  } while (0)

#define WINCONV_REQUIRE_GPU()                                                     \
  do {                                                                            \
    if (!::winconv::testing::have_gpu()) GTEST_SKIP() << "no CUDA device: GPU test skipped"; \
  } while (0)

// Calls f(begin, end) on consecutive ranges of [0, n), one per host thread: the host side of
// checks over tensors of billions of elements. f must not use gtest assertions (record, then check).
template <typename F>
void parallel_ranges(size_t n, F f) {
  const size_t threads = std::max<size_t>(1, std::min<size_t>(n, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(f, n * t / threads, n * (t + 1) / threads);
  for (std::thread& th : pool) th.join();
}

// Index of the largest error, or of the first NaN (which then never passes a bound).
inline size_t worst_index(const std::vector<double>& err) {
  size_t worst = 0;
  for (size_t i = 0; i < err.size(); ++i) {
    if (std::isnan(err[i])) return i;
    if (err[i] > err[worst]) worst = i;
  }
  return worst;
}

// n elements of device memory at ptr, `offset` elements past the start of their allocation: an
// offset moves ptr off the allocation's alignment, which tests the kernels' unaligned paths.
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n, size_t offset = 0) : count(n) {
    if (n == 0) return;
    EXPECT_EQ(cudaMalloc(&base_, (n + offset) * sizeof(T)), cudaSuccess);
    if (base_) ptr = base_ + offset;
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (count) EXPECT_EQ(cudaMemcpy(ptr, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { if (base_) cudaFree(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void poison() { if (count) EXPECT_EQ(cudaMemset(ptr, 0xFF, count * sizeof(T)), cudaSuccess); }  // NaN
  std::vector<T> to_host() const {
    std::vector<T> h(count);
    if (count) EXPECT_EQ(cudaMemcpy(h.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

 private:
  T* base_ = nullptr;
};

}  // namespace winconv::testing
