// Scores the kernel rules of this source (the direct kernel's and the tile rule) against stored
// tile sweeps, without a GPU (bench/tile_sweep_replay.h): one line per layer and layout, then the
// summary. Several logs of one batch add repeats. A change to the rules can be scored here before
// it is measured; tests/cpp/test_tile_rule_replay_cpu.cpp holds them to the sweeps in
// tests/data/tile_sweeps.
//
//   tile_rule_replay LAYERS_CSV BATCH SWEEP_LOG [SWEEP_LOG ...] [--sms N] [--quiet]
//
// Build (from the repository root, no CUDA needed), one command:
//   c++ -std=c++17 -O2 -Iinclude -Isrc -Ibench -o tile_rule_replay dev/cpu/tile_rule_replay.cpp
//       bench/tile_sweep_replay.cpp bench/bench_common.cpp src/common/names.cpp src/common/status.cpp
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tile_sweep_replay.h"

using namespace winconv;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s LAYERS_CSV BATCH SWEEP_LOG [SWEEP_LOG ...] [--sms N] [--quiet]\n", argv[0]);
    return 1;
  }
  const int64_t batch = std::atoll(argv[2]);
  int sms = 132;
  bool quiet = false;
  bench::TileSweep sweep;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    std::string error;
    if (a == "--sms" && i + 1 < argc) {
      sms = std::atoi(argv[++i]);
    } else if (a == "--quiet") {
      quiet = true;
    } else if (!bench::read_tile_sweep(a, &sweep, &error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 1;
    }
  }
  if (batch < 1 || sms < 1) {
    std::fprintf(stderr, "BATCH and --sms must be positive\n");
    return 1;
  }
  std::vector<bench::Layer> layers;
  if (!bench::load_layers_or_report(argv[1], &layers)) return 1;
  bench::ReplaySummary s;
  for (const bench::ReplayCase& c : bench::replay_tile_rule(layers, batch, sms, sweep, &s)) {
    if (quiet) continue;
    if (c.measured)
      std::printf("%-12s %s pick %s/%s %.4f ms, fastest %s %.4f ms, %.3fx\n", c.layer.c_str(), c.layout.c_str(),
                  c.pick.c_str(), c.plan.c_str(), c.pick_ms, c.fastest.c_str(), c.fastest_ms, c.pick_ms / c.fastest_ms);
    else
      std::printf("%-12s %s pick %s/%s not measured by the sweep\n", c.layer.c_str(), c.layout.c_str(), c.pick.c_str(),
                  c.plan.c_str());
  }
  std::printf("batch %lld, %d SMs: %d cases, fastest pick in %d, pick / fastest geometric mean %.4f, worst %.3f;"
              " %d unmeasured, %d direct\n",
              static_cast<long long>(batch), sms, s.cases, s.fastest, s.geomean, s.worst, s.unmeasured, s.direct);
  return s.cases + s.unmeasured > 0 ? 0 : 1;
}
