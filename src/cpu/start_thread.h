// Starting a worker thread of the CPU paths without letting a failure end the process.
#pragma once

#include <system_error>
#include <thread>
#include <vector>

namespace winconv {

// Runs `work` on a new thread added to `pool`, or, when no thread can be started (address space,
// process limits: std::thread throws), on the calling thread now. The caller joins the pool.
template <typename Work>
void start_or_run_inline(std::vector<std::thread>& pool, Work work) {
  try {
    pool.emplace_back(work);
  } catch (const std::system_error&) {
    work();
  }
}

}  // namespace winconv
