// GPU test helpers: device buffers, a skip when no device exists, NaN poisoning.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace winconv::testing {

// The fuzz tests' case count and first seed: a few cases in every run of the suite, and a longer
// campaign on demand (WINCONV_FUZZ_CASES=500 WINCONV_FUZZ_SEED=7 winconv_tests_gpu
// --gtest_filter='*Fuzz*'). A value that is not a positive integer keeps the default.
inline int64_t fuzz_env(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (*end == '\0' && n > 0) ? int64_t(n) : fallback;
}
inline int64_t fuzz_cases(int64_t fallback) { return fuzz_env("WINCONV_FUZZ_CASES", fallback); }
inline uint64_t fuzz_seed(uint64_t fallback) { return uint64_t(fuzz_env("WINCONV_FUZZ_SEED", int64_t(fallback))); }

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
