// The CPU paths' thread pool: its helpers are kept between calls, wake from sleep, run exactly the
// calls that count them, leave concurrent callers a full team, are rebuilt in a forked child, and
// are simply fewer (none) where no thread can start.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include <unistd.h>

#include "cpu/worker_pool.h"
#include "cpu/worker_team.h"
#include "no_room_for_threads.h"

namespace winconv {
namespace {

// Runs `calls` on a thread of its own, and ends the test binary with a failure if they have not
// returned within a minute: a lost wake-up hangs a call, and a hung call cannot be abandoned.
template <typename Calls>
void within_a_minute(Calls calls) {
  std::promise<void> done;
  std::future<void> returned = done.get_future();
  std::thread caller([&] {
    calls();
    done.set_value();
  });
  if (returned.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "a pool call did not return within a minute\n");
    std::_Exit(1);
  }
  caller.join();
}

// Long enough for the helpers to have gone to sleep.
void sleep_past_the_spin() {
  std::this_thread::sleep_for(3 * PooledHelpers::spin_after_call() + std::chrono::milliseconds(1));
}

// The thread that ran worker 1 of a two-worker team, and the team's size.
std::thread::id worker1_of_team(int* size) {
  std::thread::id id;
  WorkerTeam::run(2, [&](WorkerTeam& team, int worker) {
    if (worker == 1) id = std::this_thread::get_id();
    if (worker == 0) *size = team.size();
  });
  return id;
}

TEST(WorkerPool, HelpersAreKeptBetweenCalls) {
  if (PooledHelpers::default_most() < 1) GTEST_SKIP() << "one hardware thread: calls use no pool";
  within_a_minute([] {
    int size = 0;
    const std::thread::id first = worker1_of_team(&size);
    EXPECT_EQ(size, 2);
    EXPECT_NE(first, std::this_thread::get_id());
    for (int call = 0; call < 20; ++call) EXPECT_EQ(worker1_of_team(&size), first) << call;
  });
}

// After the spin the helper sleeps; the next call must wake it, not wait forever.
TEST(WorkerPool, HelpersWakeFromSleep) {
  if (PooledHelpers::default_most() < 1) GTEST_SKIP() << "one hardware thread: calls use no pool";
  within_a_minute([] {
    int size = 0;
    const std::thread::id first = worker1_of_team(&size);
    for (int call = 0; call < 3; ++call) {
      sleep_past_the_spin();
      EXPECT_EQ(worker1_of_team(&size), first);
      EXPECT_EQ(size, 2);
    }
  });
}

// Calls of random widths on a pool of up to 7 helpers (more than this machine may have): each call
// runs helpers 1..count() once each, and no helper it leaves out. A helper that paired one call's
// width with another's work, or missed a call, fails the counts or hangs here.
TEST(WorkerPool, EachCallRunsExactlyTheHelpersItCounts) {
  constexpr int kMost = 7;
  std::mt19937 rng(7);
  std::vector<std::atomic<int>> runs(kMost + 1);
  std::vector<int> want(kMost + 1, 0);
  within_a_minute([&] {
    for (int call = 0; call < 400; ++call) {
      const int wanted = 1 + int(rng() % kMost);
      PooledHelpers helpers(wanted, kMost);
      ASSERT_GT(helpers.count(), 0) << "the pool should be free: no other call holds it";
      ASSERT_LE(helpers.count(), wanted);
      auto work = [&](int worker) { runs[size_t(worker)]++; };
      helpers.start(work);
      helpers.wait();
      for (int w = 1; w <= helpers.count(); ++w) want[size_t(w)]++;
      if (call % 100 == 0) sleep_past_the_spin();  // some calls find the helpers asleep
    }
  });
  for (int w = 0; w <= kMost; ++w) EXPECT_EQ(runs[size_t(w)].load(), want[size_t(w)]) << "helper " << w;
}

TEST(WorkerPool, SpinFromTheEnvironmentText) {
  using us = std::chrono::microseconds;
  EXPECT_EQ(PooledHelpers::spin_from_text(nullptr), PooledHelpers::kDefaultSpin);
  EXPECT_EQ(PooledHelpers::spin_from_text(""), PooledHelpers::kDefaultSpin);
  EXPECT_EQ(PooledHelpers::spin_from_text("0"), us(0));
  EXPECT_EQ(PooledHelpers::spin_from_text("150"), us(150));
  EXPECT_EQ(PooledHelpers::spin_from_text("1000000"), us(1000000));
  for (const char* bad : {"-1", "1000001", "12us", "abc", " 5", "99999999999999999999"})
    EXPECT_EQ(PooledHelpers::spin_from_text(bad), PooledHelpers::kDefaultSpin) << bad;
}

// Where no helper can start (address space, process limits: std::thread throws), a call gets
// none and its caller works alone; the failure must not leave the call. In a re-executed child,
// where no thread has run before (no_room_for_threads.h).
TEST(WorkerPoolDeathTest, HelpersThatCannotStartLeaveTheCallerAlone) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int code = 3;
        {
          const testing::NoRoomForThreads limit;
          if (limit.ok()) {
            PooledHelpers helpers(3, 7);
            code = helpers.count() == 0 ? 0 : 1;
          }
        }
        std::_Exit(code);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(WorkerPool, CallsWantingMoreThanTheMostUseNoPool) {
  PooledHelpers helpers(3, 2);
  EXPECT_EQ(helpers.count(), 0);
  PooledHelpers none(0, 2);
  EXPECT_EQ(none.count(), 0);
}

// Two callers at once: one holds the pool, the other starts threads of its own; both always get
// their full team, and every barrier completes.
TEST(WorkerPool, ConcurrentCallersEachGetAFullTeam) {
  std::atomic<int> short_teams{0};
  std::atomic<int64_t> sum{0};
  auto caller = [&] {
    for (int call = 0; call < 300; ++call)
      WorkerTeam::run(2, [&](WorkerTeam& team, int worker) {
        if (worker == 0 && team.size() != 2) short_teams++;
        sum += worker + 1;
        team.barrier();
        sum += worker + 1;
      });
  };
  within_a_minute([&] {
    std::thread other(caller);
    caller();
    other.join();
  });
  EXPECT_EQ(short_teams.load(), 0);
  EXPECT_EQ(sum.load(), 2 * 300 * 2 * 3);
}

#if defined(__SANITIZE_THREAD__)
#define WINCONV_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WINCONV_UNDER_TSAN 1
#endif
#endif

// A child forked after the pool started has none of its threads: its calls must build a new pool
// (waiting on the parent's helpers would hang; the alarm turns a hang into a failure).
TEST(WorkerPool, ForkedChildRunsTeams) {
#if defined(WINCONV_UNDER_TSAN)
  GTEST_SKIP() << "ThreadSanitizer does not run threads started after a multi-threaded fork";
#else
  if (PooledHelpers::default_most() < 1) GTEST_SKIP() << "one hardware thread: calls use no pool";
  int size = 0;
  worker1_of_team(&size);  // the parent's pool exists
  GTEST_FLAG_SET(death_test_style, "fast");  // fork, not re-execution: the child inherits the pool
  EXPECT_EXIT(
      {
        alarm(20);
        std::atomic<int> ran{0};
        for (int call = 0; call < 10; ++call)
          WorkerTeam::run(2, [&](WorkerTeam& team, int) {
            ran++;
            team.barrier();
          });
        std::exit(ran.load() == 20 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
#endif
}

}  // namespace
}  // namespace winconv
