// Replays the FP32 GEMM's tile rule (src/cuda/im2win/tile_select.h, host code) against stored
// tile sweeps (dev/cuda/conv_tile_sweep.cu output, every shape timed), so that a change to the
// rule can be scored on a machine without a GPU before it is measured: for each layer and layout
// the shape and split plan the rule picks now, the time the sweep measured for that shape with
// that plan, and its ratio to the fastest GEMM shape of the sweep.
//
//   tile_rule_replay LAYERS_CSV BATCH SWEEP_LOG [SWEEP_LOG ...] [--sms N] [--quiet]
//
// Several logs of one batch add repeats (each shape's fastest run counts). A case the sweep ran on
// the direct shallow kernel is left out (the GEMM's pick does not run there); a pick whose split
// plan differs from the one the sweep ran is "unknown" (its time was not measured). Prints one
// line per case, then: cases, fastest picks, the geometric mean and worst of pick / fastest.
//
// Build (from the repository root, no CUDA needed):
//   c++ -std=c++17 -O2 -Iinclude -Isrc -Ibench -o tile_rule_replay dev/cpu/tile_rule_replay.cpp
//       bench/bench_common.cpp src/common/names.cpp src/common/status.cpp     (one command)
// Stored sweeps: dev/data/tile_sweeps/ (README.md there says which GPU and commit ran each).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "cuda/im2win/tile_select.h"

using namespace winconv;

namespace {

struct Timing {
  std::string plan;  // the sweep's splits column: "1", "4" (every tile split), "4t" (tail split)
  double ms = INFINITY;
  bool selected = false;  // the library ran this one (the sweep's "*")
};

// (layer, layout) -> shape name -> its fastest timing over the logs.
using Sweep = std::map<std::pair<std::string, std::string>, std::map<std::string, Timing>>;

bool read_sweep(const std::string& path, Sweep* sweep) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string layer, layout, tile, plan, selected;
    double ms = 0, tflops = 0, diff = 0;
    if (!(ss >> layer >> layout >> tile >> ms >> tflops >> diff >> plan >> selected) || layer == "layer") continue;
    Timing& t = (*sweep)[{layer, layout}][tile];
    if (!t.plan.empty() && t.plan != plan) std::fprintf(stderr, "%s %s %s: plans %s and %s across logs\n", layer.c_str(),
                                                        layout.c_str(), tile.c_str(), t.plan.c_str(), plan.c_str());
    t.plan = plan;
    t.ms = std::min(t.ms, ms);
    t.selected = t.selected || selected == "*";
  }
  return true;
}

std::string plan_name(const im2win::KSplit& ks) {
  if (ks.splits <= 1) return "1";
  return std::to_string(ks.splits) + (ks.head_tiles > 0 ? "t" : "");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s LAYERS_CSV BATCH SWEEP_LOG [SWEEP_LOG ...] [--sms N] [--quiet]\n", argv[0]);
    return 1;
  }
  const int64_t batch = std::atoll(argv[2]);
  int sms = 132;
  bool quiet = false;
  Sweep sweep;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sms" && i + 1 < argc) {
      sms = std::atoi(argv[++i]);
    } else if (a == "--quiet") {
      quiet = true;
    } else if (!read_sweep(a, &sweep)) {
      std::fprintf(stderr, "cannot read %s\n", a.c_str());
      return 1;
    }
  }
  if (batch < 1 || sms < 1) {
    std::fprintf(stderr, "BATCH and --sms must be positive\n");
    return 1;
  }
  std::vector<bench::Layer> layers;
  if (!bench::load_layers_or_report(argv[1], &layers)) return 1;
  int cases = 0, fastest = 0, unknown = 0, direct = 0;
  double log_sum = 0, worst = 1;
  for (const bench::Layer& l : layers)
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      const char* layout_name = layout == Layout::kNCHW ? "nchw" : "nhwc";
      const auto it = sweep.find({l.name, layout_name});
      if (it == sweep.end()) continue;
      const auto& shapes = it->second;
      // Where the library ran the direct kernel, the GEMM's pick does not matter.
      if (const auto d = shapes.find("direct"); d != shapes.end() && d->second.selected) {
        ++direct;
        continue;
      }
      const Conv2dProblem pb = bench::make_config(l, batch, Precision::kFP32, layout).problem;
      const int64_t m = pb.n * pb.p() * pb.q(), n = pb.k, k_gemm = pb.c * pb.r * pb.s;
      // As conv2d_forward.cu: the NHWC vector gather (C % 4 == 0) stores A pixel-major.
      const auto order = layout == Layout::kNHWC && pb.c % 4 == 0 ? im2win::AStageOrder::kPixelMajor
                                                                   : im2win::AStageOrder::kKMajor;
      const im2win::TileShape tile = im2win::select_tile(m, n, k_gemm, sms, order);
      const std::string plan = plan_name(im2win::select_k_splits(m, n, k_gemm, tile, sms));
      double best = INFINITY;
      std::string best_tile;
      for (const auto& [name, t] : shapes)
        if (name != "direct" && t.ms < best) best = t.ms, best_tile = name + "/" + t.plan;
      const auto pick = shapes.find(im2win::tile_name(tile));
      if (pick == shapes.end() || pick->second.plan != plan) {
        ++unknown;
        if (!quiet)
          std::printf("%-12s %s pick %s/%s not measured (sweep ran %s)\n", l.name.c_str(), layout_name,
                      im2win::tile_name(tile), plan.c_str(), pick == shapes.end() ? "no such shape" : pick->second.plan.c_str());
        continue;
      }
      const double ratio = pick->second.ms / best;
      ++cases;
      fastest += ratio <= 1.0005;
      log_sum += std::log(ratio);
      worst = std::max(worst, ratio);
      if (!quiet)
        std::printf("%-12s %s pick %s/%s %.4f ms, fastest %s %.4f ms, %.3fx\n", l.name.c_str(), layout_name,
                    im2win::tile_name(tile), plan.c_str(), pick->second.ms, best_tile.c_str(), best, ratio);
    }
  std::printf("batch %lld, %d SMs: %d cases, fastest pick in %d, pick / fastest geometric mean %.4f, worst %.3f;"
              " %d unknown, %d direct\n",
              static_cast<long long>(batch), sms, cases, fastest, cases ? std::exp(log_sum / cases) : 1.0, worst, unknown,
              direct);
  return cases + unknown > 0 ? 0 : 1;
}
