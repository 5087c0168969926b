// A team of workers for one call of a CPU path: the calling thread is worker 0 and the others are
// the thread pool's helpers (worker_pool.h), or threads started for the call where the pool is
// held by another call, all running the same body, which splits its phases by worker and
// separates them with barriers. One team per call, where a parallel loop per phase started and
// joined its threads each time (about 30 us a thread here, a tenth of a 1 ms layer's time).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#include "cpu/worker_pool.h"

namespace winconv {

class WorkerTeam {
 public:
  int size() const { return size_.load(std::memory_order_acquire); }

  // Blocks until every worker of the team has called it (as often as this one). The waiters spin:
  // a phase's workers finish within microseconds of each other, and a sleeping thread's wake-up
  // took 0.1-1 ms on a virtual machine (the barrier on a condition variable made 1 ms layers
  // 1.5x slower in median).
  void barrier() {
    const int64_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == size()) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(generation + 1, std::memory_order_release);
    } else {
      spin_until([&] { return generation_.load(std::memory_order_acquire) != generation; });
    }
  }

  // [begin, end) of worker's share of [0, count): contiguous ranges in worker order, the last
  // ones empty where count < size.
  void range(int64_t count, int worker, int64_t* begin, int64_t* end) const {
    const int64_t workers = size(), chunk = (count + workers - 1) / workers;
    *begin = std::min(count, worker * chunk);
    *end = std::min(count, *begin + chunk);
  }

  // Runs body(team, worker) on a team of up to `threads` workers: the pool's helpers, or, while
  // another call holds the pool, threads started for this call. A thread that cannot be started
  // (address space, process limits: std::thread throws) leaves the team smaller rather than ending
  // the process; the workers learn the final size before any of them starts.
  template <typename Body>
  static void run(int threads, Body body) {
    WorkerTeam team;
    auto helper = [&team, &body](int worker) { body(team, worker); };
    PooledHelpers pooled(threads - 1);  // its destructor waits for the helpers
    if (pooled.count() > 0) {
      team.size_.store(1 + pooled.count(), std::memory_order_release);
      pooled.start(helper);
      body(team, 0);
      return;
    }
    std::vector<std::thread> pool;
    try {
      pool.reserve(size_t(std::max(threads, 1) - 1));
      for (int t = 1; t < threads; ++t)
        pool.emplace_back([&team, &body, t] {
          spin_until([&] { return team.size() > 0; });
          body(team, t);
        });
    } catch (...) {  // std::system_error from the thread, or std::bad_alloc for its state
    }
    team.size_.store(1 + int(pool.size()), std::memory_order_release);
    body(team, 0);
    for (auto& th : pool) th.join();
  }

 private:
  WorkerTeam() = default;

  std::atomic<int> size_{0}, arrived_{0};
  std::atomic<int64_t> generation_{0};
};

}  // namespace winconv
