// Threads kept between calls of the CPU paths. A thread started per call cost 18-44 us, and on a
// virtual machine a core left idle between calls was often slow to come back: two threads then
// ran a 1 ms layer in the time of one (conv1 NHWC: a median of 1.73 ms against 0.89-1.0 ms for
// two-fifths of the calls). The pool's threads wait for the next call spinning for a while
// (spin_after_call()), then asleep, as OpenMP runtimes do.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace winconv {

// Spins a while, then yields between checks, so that more waiting threads than cores still
// progress: how a caller waits for its helpers and a team's workers wait for each other.
template <typename Done>
void spin_until(Done done) {
  for (int spins = 0; !done();)
    if (spins < 4096) ++spins;
    else std::this_thread::yield();
}

class WorkerPool;

// The pool's threads for one call: up to `wanted` helpers, numbered 1..count(), the caller being
// worker 0. count() is 0 while another call holds the pool (that caller then starts threads of its
// own), where `wanted` exceeds `most` (by default one helper per hardware thread besides the
// caller's: oversubscribing calls start their own threads), and where no thread could be started.
// The destructor waits until every helper has returned.
class PooledHelpers {
 public:
  explicit PooledHelpers(int wanted, int most = default_most());
  static int default_most();
  ~PooledHelpers();
  PooledHelpers(const PooledHelpers&) = delete;
  PooledHelpers& operator=(const PooledHelpers&) = delete;

  int count() const { return count_; }
  // Runs work(worker) for worker = 1..count() on the helpers and returns at once; work must stay
  // alive until the destructor (or wait()) has returned.
  template <typename Work>
  void start(Work& work) {
    start_erased([](void* w, int worker) { (*static_cast<Work*>(w))(worker); }, &work);
  }
  // Blocks until every started helper has returned from its work.
  void wait();

  // How long a helper spins for the next call before it sleeps: WINCONV_CPU_SPIN_US microseconds
  // (0: sleep at once, for programs that would rather keep the cores than the latency), read once,
  // else kDefaultSpin.
  static constexpr std::chrono::microseconds kDefaultSpin{2000};
  static std::chrono::microseconds spin_after_call();
  // The spin a value of WINCONV_CPU_SPIN_US asks for: a whole number of microseconds up to one
  // second; anything else (unset, empty, negative, not a number, larger) gives kDefaultSpin.
  static std::chrono::microseconds spin_from_text(const char* text);

 private:
  void start_erased(void (*fn)(void*, int), void* work);
  WorkerPool* pool_ = nullptr;
  int count_ = 0;
  bool started_ = false;
};

}  // namespace winconv
