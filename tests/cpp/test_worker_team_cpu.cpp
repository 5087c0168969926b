// The CPU path's worker team: every worker runs, ranges cover their count once, and a barrier
// holds every worker until the slowest has arrived.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu/worker_team.h"

namespace winconv {
namespace {

TEST(WorkerTeam, EveryWorkerRunsOnceAndTheCallerIsWorkerZero) {
  for (int threads : {1, 2, 5}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(threads));
    std::thread::id worker0;
    int size = 0;
    WorkerTeam::run(threads, [&](WorkerTeam& team, int worker) {
      runs[size_t(worker)]++;
      if (worker == 0) worker0 = std::this_thread::get_id(), size = team.size();
    });
    EXPECT_EQ(size, threads);
    EXPECT_EQ(worker0, std::this_thread::get_id());
    for (auto& r : runs) EXPECT_EQ(r.load(), 1);
  }
}

TEST(WorkerTeam, RangesCoverTheCountOnceInOrder) {
  WorkerTeam::run(3, [&](WorkerTeam& team, int worker) {
    if (worker != 0) return;
    for (int64_t count : {0, 1, 2, 3, 7, 9, 100}) {
      int64_t next = 0;
      for (int w = 0; w < team.size(); ++w) {
        int64_t begin, end;
        team.range(count, w, &begin, &end);
        EXPECT_EQ(begin, next) << count << " " << w;
        EXPECT_LE(begin, end);
        next = end;
      }
      EXPECT_EQ(next, count);
    }
  });
}

// Worker 0 writes its slot late; after each barrier every worker must see every slot written in
// the phase before it (a barrier that let a worker through early reads a stale slot). Two workers:
// in larger teams an early release leaves the later arrivers waiting on a passed generation, a
// hang rather than a failure.
TEST(WorkerTeam, BarrierWaitsForTheSlowestWorker) {
  constexpr int kWorkers = 2, kPhases = 3;
  std::vector<std::atomic<int>> slot(kWorkers);
  std::atomic<int> stale{0};
  WorkerTeam::run(kWorkers, [&](WorkerTeam& team, int worker) {
    for (int phase = 1; phase <= kPhases; ++phase) {
      if (worker == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      slot[size_t(worker)].store(phase);
      team.barrier();
      for (auto& s : slot)
        if (s.load() < phase) stale++;
      team.barrier();  // no slot of the next phase is written before every worker has read these
    }
  });
  EXPECT_EQ(stale.load(), 0);
}

// Many short teams with several barriers each: a lost wake-up or a miscounted arrival hangs here.
TEST(WorkerTeam, ManyTeamsWithBarriersComplete) {
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 2000; ++round)
    WorkerTeam::run(2 + round % 4, [&](WorkerTeam& team, int worker) {
      for (int phase = 0; phase < 3; ++phase) {
        sum += worker;
        team.barrier();
      }
    });
  int64_t want = 0;
  for (int round = 0; round < 2000; ++round) want += 3 * (1 + round % 4) * (2 + round % 4) / 2;
  EXPECT_EQ(sum.load(), want);
}

}  // namespace
}  // namespace winconv
