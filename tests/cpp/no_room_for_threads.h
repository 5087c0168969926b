// An address-space limit that leaves no room for a new thread's stack, for the tests of what the
// CPU paths do when std::thread cannot start. The limit is process-wide: set it in a child process
// (a death test), and before any thread of that process has run and been joined, since glibc
// hands the cached stacks of joined threads to new ones, which then start under the limit.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <cstdio>

namespace winconv::testing {

// Virtual address space of this process in bytes (Linux), 0 where it cannot be read.
inline size_t virtual_bytes() {
  unsigned long pages = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return size_t(pages) * 4096;
}

// Holds RLIMIT_AS 4 MiB above the address space in use (less than one default 8 MiB thread
// stack) until destroyed; ok() is false where the limit could not be set.
class NoRoomForThreads {
 public:
  NoRoomForThreads() {
    const size_t in_use = virtual_bytes();
    if (in_use == 0 || getrlimit(RLIMIT_AS, &before_) != 0) return;
    const rlimit lim{in_use + (size_t(4) << 20), before_.rlim_max};
    ok_ = setrlimit(RLIMIT_AS, &lim) == 0;
  }
  ~NoRoomForThreads() {
    if (ok_) setrlimit(RLIMIT_AS, &before_);
  }
  NoRoomForThreads(const NoRoomForThreads&) = delete;
  NoRoomForThreads& operator=(const NoRoomForThreads&) = delete;
  bool ok() const { return ok_; }

 private:
  rlimit before_{};
  bool ok_ = false;
};

}  // namespace winconv::testing
