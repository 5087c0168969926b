// The CPU paths' thread pool (worker_pool.h). One call holds it at a time; its helpers learn of a
// call from one atomic word, the call's generation and helper count together, so that a helper
// never pairs one call's count with another's work.
#include "cpu/worker_pool.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <condition_variable>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include <unistd.h>

namespace winconv {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

class WorkerPool {
 public:
  // The process's pool. A child forked from a process with a pool gets a new one: the parent's
  // threads do not exist in it. The old pool is left as it was (its lock may even be held).
  static WorkerPool& instance() {
    static std::atomic<WorkerPool*> current{nullptr};
    const pid_t pid = getpid();
    WorkerPool* pool = current.load(std::memory_order_acquire);
    while (!pool || pool->pid_ != pid) {
      WorkerPool* fresh = new WorkerPool(pid);  // never deleted: helpers wait on it until exit
      if (current.compare_exchange_strong(pool, fresh, std::memory_order_acq_rel)) return *fresh;
      delete fresh;  // another thread installed one first; `pool` now holds it
    }
    return *pool;
  }

  bool try_hold() { return use_.try_lock(); }
  void release() { use_.unlock(); }

  // With the pool held: starts helpers until there are `wanted` (or no more can start) and
  // returns how many there are, at most `wanted`.
  int reserve(int wanted) {
    while (helpers_ < wanted) {
      try {
        std::thread(&WorkerPool::serve, this, helpers_ + 1, job_.load(std::memory_order_relaxed)).detach();
      } catch (const std::system_error&) {
        break;
      } catch (const std::bad_alloc&) {
        break;
      }
      ++helpers_;
    }
    return helpers_ < wanted ? helpers_ : wanted;
  }

  // With the pool held: helpers 1..count run fn(work, helper).
  void start(void (*fn)(void*, int), void* work, int count) {
    fn_ = fn;
    work_ = work;
    remaining_.store(count, std::memory_order_relaxed);
    bool sleeping;
    {
      // Under the sleepers' lock, so that a helper deciding to sleep either sees the new call
      // or is already counted and is woken.
      std::lock_guard<std::mutex> lock(sleep_);
      const uint64_t generation = (job_.load(std::memory_order_relaxed) >> 32) + 1;
      job_.store(generation << 32 | uint32_t(count), std::memory_order_release);
      sleeping = sleepers_ > 0;
    }
    if (sleeping) wake_.notify_all();
  }

  void wait() {
    spin_until([&] { return remaining_.load(std::memory_order_acquire) == 0; });
  }

 private:
  explicit WorkerPool(pid_t pid) : pid_(pid) {}

  // Helper `index`'s life: wait for a call after `seen`, run it if the call counts this helper.
  // A helper the last call left out sleeps at once: the next call is likely to be as wide.
  void serve(int index, uint64_t seen) {
    for (bool took_part = true;;) {
      const uint64_t job = next_job(seen, took_part);
      seen = job;
      took_part = index <= int(job & 0xffffffffu);
      if (took_part) {
        fn_(work_, index);
        remaining_.fetch_sub(1, std::memory_order_release);
      }
    }
  }

  uint64_t next_job(uint64_t seen, bool spin) {
    static const std::chrono::microseconds spin_for = PooledHelpers::spin_after_call();
    const auto deadline = std::chrono::steady_clock::now() + spin_for;
    // Spinning, then yielding between checks: a runnable helper keeps its core awake for the next
    // call, and yields it to any other thread that has work (a helper spinning without yielding
    // held a core from the threads of the process's next parallel loop for the whole spin).
    for (int spins = 0; spin && spin_for.count() > 0; ++spins) {
      const uint64_t job = job_.load(std::memory_order_acquire);
      if (job != seen) return job;
      if (spins < 1024) {
        cpu_relax();
      } else {
        std::this_thread::yield();
        if (std::chrono::steady_clock::now() > deadline) break;
      }
    }
    std::unique_lock<std::mutex> lock(sleep_);
    ++sleepers_;
    wake_.wait(lock, [&] { return job_.load(std::memory_order_acquire) != seen; });
    --sleepers_;
    return job_.load(std::memory_order_acquire);
  }

  const pid_t pid_;
  std::mutex use_;  // held by the call using the pool
  int helpers_ = 0;
  // The call: generation << 32 | helpers taking part. fn_ and work_ are written before it is
  // published and read only by the helpers it counts, which the caller waits for.
  std::atomic<uint64_t> job_{0};
  void (*fn_)(void*, int) = nullptr;
  void* work_ = nullptr;
  std::atomic<int> remaining_{0};
  std::mutex sleep_;
  std::condition_variable wake_;
  int sleepers_ = 0;
};

std::chrono::microseconds PooledHelpers::spin_from_text(const char* text) {
  if (!text || *text < '0' || *text > '9') return kDefaultSpin;  // strtoll would skip spaces and take signs
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0 || value > 1000000) return kDefaultSpin;
  return std::chrono::microseconds(value);
}

std::chrono::microseconds PooledHelpers::spin_after_call() {
  static const std::chrono::microseconds spin = spin_from_text(std::getenv("WINCONV_CPU_SPIN_US"));
  return spin;
}

int PooledHelpers::default_most() {
  static const int most = int(std::thread::hardware_concurrency()) - 1;
  return most;
}

PooledHelpers::PooledHelpers(int wanted, int most) {
  if (wanted <= 0 || wanted > most) return;
  WorkerPool& pool = WorkerPool::instance();
  if (!pool.try_hold()) return;
  pool_ = &pool;
  count_ = pool.reserve(wanted);
}

PooledHelpers::~PooledHelpers() {
  if (!pool_) return;
  wait();
  pool_->release();
}

void PooledHelpers::start_erased(void (*fn)(void*, int), void* work) {
  if (!pool_ || count_ == 0) return;
  pool_->start(fn, work, count_);
  started_ = true;
}

void PooledHelpers::wait() {
  if (started_) pool_->wait();
  started_ = false;
}

}  // namespace winconv
