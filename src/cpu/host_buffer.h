// A host buffer of floats for the CPU path's workspace (the window tensor and the packed filter),
// left uninitialised (every element is written before it is read), aligned to 64 bytes at least.
// Buffers of several MB are placed on 2 MB pages where Linux allows it (transparent huge pages on
// request): their first touch then takes one page fault per 2 MB instead of per 4 KB, which cost
// conv4's 45 MB window as much as its transform.
#pragma once

#include <cstddef>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace winconv {

class HostBuffer {
 public:
  explicit HostBuffer(size_t elements) {
    const size_t bytes = elements * sizeof(float);
    if (bytes >= kHugeFrom) {
      const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
      data_ = static_cast<float*>(std::aligned_alloc(kHugePage, rounded));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
      if (data_) madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: 4 KB pages if refused
#endif
    } else {
      data_ = static_cast<float*>(std::aligned_alloc(kLine, (bytes + kLine) / kLine * kLine));
    }
  }
  ~HostBuffer() { std::free(data_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  float* get() const { return data_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  static constexpr size_t kHugePage = size_t(2) << 20, kHugeFrom = size_t(4) << 20, kLine = 64;
  float* data_ = nullptr;
};

}  // namespace winconv
