// Replays the FP32 kernel rules (the direct kernel's, src/cuda/im2win/shallow_select.h, and the
// GEMM's tile rule, tile_select.h; host code) against stored tile sweeps
// (dev/cuda/conv_tile_sweep.cu output, every shape and the direct kernel timed): for each layer
// and layout, the kernel, shape and split plan the rules pick now, the time the sweep measured
// for that pick, and the fastest variant of the sweep. Used by dev/cpu/tile_rule_replay.cpp and
// by the test that holds the rule to the stored sweeps (tests/data/tile_sweeps).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "cuda/im2win/tile_select.h"

namespace winconv::bench {

// A split plan as the sweep prints it and the replay reads it: "1" unsplit, "4" every tile split
// 4 ways, "4t" the tail split 4 ways after whole rounds unsplit.
inline std::string split_plan_name(const im2win::KSplit& ks) {
  if (ks.splits <= 1) return "1";
  return std::to_string(ks.splits) + (ks.head_tiles > 0 ? "t" : "");
}

struct SweepTiming {
  std::string plan;  // the sweep's splits column (split_plan_name)
  double ms = 0;     // the fastest over the logs read
  bool selected = false;  // the library of the sweep's commit ran this one (its "*")
};

// (layer, layout name) -> tile name ("128x128", ..., "direct") -> timing.
using TileSweep = std::map<std::pair<std::string, std::string>, std::map<std::string, SweepTiming>>;

// Adds one sweep log (several logs of one batch add repeats); false with the reason in *error.
bool read_tile_sweep(const std::string& path, TileSweep* sweep, std::string* error);

struct ReplayCase {
  // The rules' pick now: a shape, or "direct" for the direct kernel, and its split plan.
  std::string layer, layout, pick, plan;
  bool measured = false;                  // the sweep timed the pick with this plan
  double pick_ms = 0, fastest_ms = 0;
  std::string fastest;  // "shape/plan"
};

struct ReplaySummary {
  int cases = 0, fastest = 0, unmeasured = 0, direct = 0;  // direct: picks of the direct kernel
  double geomean = 1, worst = 1;                             // pick / fastest over the measured cases
};

// The cases of `layers` at `batch` that the sweep holds; summary (optional) over them.
std::vector<ReplayCase> replay_tile_rule(const std::vector<Layer>& layers, int64_t batch, int num_sms,
                                         const TileSweep& sweep, ReplaySummary* summary);

}  // namespace winconv::bench
