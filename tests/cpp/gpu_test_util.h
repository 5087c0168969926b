// GPU test helpers: device buffers with guards, skips when no device exists or its memory is
// short, NaN poisoning.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
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

// Leaves a non-sticky error pending in the CUDA runtime, as a caller's unchecked failed call would
// (a copy of an invalid direction fails in the runtime, before the device sees it); returns it.
inline cudaError_t leave_pending_error() {
  return cudaMemcpy(nullptr, nullptr, 1, static_cast<cudaMemcpyKind>(42));
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

// True where a missing device is an error (scripts/gpu-check sets WINCONV_REQUIRE_GPU=1: a run
// that skipped every GPU test must not read as passed).
inline bool gpu_required() {
  const char* v = std::getenv("WINCONV_REQUIRE_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// Skips the test when there is no CUDA device, or fails it under WINCONV_REQUIRE_GPU=1.
#define WINCONV_REQUIRE_GPU()                                                                    \
  do {                                                                                           \
    if (!::winconv::testing::have_gpu()) {                                                       \
      if (::winconv::testing::gpu_required()) FAIL() << "no CUDA device, and WINCONV_REQUIRE_GPU=1"; \
      GTEST_SKIP() << "no CUDA device: GPU test skipped";                                        \
    }                                                                                            \
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

// Bytes of guard before and after every DeviceBuffer. 256 keeps ptr's alignment what the offset
// makes it, as without guards.
constexpr size_t kGuardBytes = 256;

// The guards' fill, by address parity: A5 at even bytes, FF at odd ones, so every aligned 2- or
// 4-byte read of a guard is a NaN in fp16 (0xFFA5), bf16 (0xFFA5) and fp32 (0xFFA5FFA5) that no
// arithmetic writes (the GPU's NaNs are 0x7FFF / 0x7FFFFFFF).
inline std::vector<unsigned char> guard_fill(size_t first, size_t bytes) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = (first + i) % 2 ? 0xFF : 0xA5;
  return v;
}

// n elements of device memory at ptr, `offset` elements past the start of their storage: an
// offset moves ptr off the allocation's alignment, which tests the kernels' unaligned paths.
// Guards fill everything in the allocation before ptr (the offset too) and kGuardBytes after
// ptr + n; reading the buffer back or freeing it fails the test when a guard changed (a store
// just outside the tensor, which the comparison against the oracle cannot see).
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n, size_t offset = 0) : count(n) {
    if (n == 0) return;
    front_ = kGuardBytes + offset * sizeof(T);
    EXPECT_EQ(cudaMalloc(&base_, front_ + n * sizeof(T) + kGuardBytes), cudaSuccess);
    if (!base_) return;
    ptr = reinterpret_cast<T*>(base_ + front_);
    const std::vector<unsigned char> front = guard_fill(0, front_), back = guard_fill(back_start(), kGuardBytes);
    EXPECT_EQ(cudaMemcpy(base_, front.data(), front.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(base_ + back_start(), back.data(), back.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (count) EXPECT_EQ(cudaMemcpy(ptr, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() {
    if (!base_) return;
    expect_guards_intact();
    cudaFree(base_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void poison() { if (count) EXPECT_EQ(cudaMemset(ptr, 0xFF, count * sizeof(T)), cudaSuccess); }  // NaN
  std::vector<T> to_host() const {
    std::vector<T> h(count);
    if (count) EXPECT_EQ(cudaMemcpy(h.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    expect_guards_intact();
    return h;
  }
  // Fails the test when a byte of either guard changed. A copy that fails (a sticky error after a
  // faulting kernel, reported where it happened) checks nothing.
  void expect_guards_intact() const {
    if (!base_) return;
    std::vector<unsigned char> front(front_), back(kGuardBytes);
    if (cudaMemcpy(front.data(), base_, front.size(), cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(back.data(), base_ + back_start(), back.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    EXPECT_TRUE(front == guard_fill(0, front_)) << "a store before the start of a " << count << "-element buffer";
    EXPECT_TRUE(back == guard_fill(back_start(), kGuardBytes)) << "a store past the end of a " << count
                                                                 << "-element buffer";
  }

 private:
  size_t back_start() const { return front_ + count * sizeof(T); }
  char* base_ = nullptr;
  size_t front_ = 0;
};

}  // namespace winconv::testing
