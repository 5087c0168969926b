#include "tile_sweep_replay.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "cuda/im2win/shallow_select.h"

namespace winconv::bench {

bool read_tile_sweep(const std::string& path, TileSweep* sweep, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open tile sweep " + path;
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string layer, layout, tile, plan, selected;
    double ms = 0, tflops = 0, diff = 0;
    if (!(ss >> layer >> layout >> tile >> ms >> tflops >> diff >> plan >> selected) || layer == "layer") continue;
    auto& shapes = (*sweep)[{layer, layout}];
    const bool first = !shapes.count(tile);
    SweepTiming& t = shapes[tile];
    if (!first && t.plan != plan) {
      *error = path + ": " + layer + " " + layout + " " + tile + " ran as " + t.plan + " and " + plan;
      return false;
    }
    t.plan = plan;
    t.ms = first ? ms : std::min(t.ms, ms);
    t.selected = t.selected || selected == "*";
  }
  return true;
}

std::vector<ReplayCase> replay_tile_rule(const std::vector<Layer>& layers, int64_t batch, int num_sms,
                                         const TileSweep& sweep, ReplaySummary* summary) {
  std::vector<ReplayCase> cases;
  ReplaySummary s;
  double log_sum = 0;
  for (const Layer& l : layers)
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      const char* layout_name = layout == Layout::kNCHW ? "nchw" : "nhwc";
      const auto it = sweep.find({l.name, layout_name});
      if (it == sweep.end()) continue;
      const auto& shapes = it->second;
      const Conv2dProblem pb = make_config(l, batch, Precision::kFP32, layout).problem;
      ReplayCase c;
      c.layer = l.name;
      c.layout = layout_name;
      // The library's choice with on-chip windows: the direct kernel (its rule, shallow_select.h)
      // or the GEMM's tile and split plan.
      if (im2win::shallow_direct_selected(layout == Layout::kNCHW, true, pb.c, pb.r, pb.s, pb.stride_w, pb.k)) {
        c.pick = "direct";
        c.plan = split_plan_name(im2win::KSplit{});
        ++s.direct;
      } else {
        const int64_t m = pb.n * pb.p() * pb.q(), n = pb.k, k_gemm = pb.c * pb.r * pb.s;
        const im2win::AStageOrder order = im2win::a_stage_order(layout == Layout::kNHWC, pb.c);
        const im2win::TileShape tile = im2win::select_tile(m, n, k_gemm, num_sms, order);
        c.pick = im2win::tile_name(tile);
        c.plan = split_plan_name(im2win::select_k_splits(m, n, k_gemm, tile, num_sms));
      }
      // The fastest of everything the sweep timed, the direct kernel included.
      c.fastest_ms = INFINITY;
      for (const auto& [name, t] : shapes)
        if (t.ms < c.fastest_ms) c.fastest_ms = t.ms, c.fastest = name + "/" + t.plan;
      const auto pick = shapes.find(c.pick);
      c.measured = pick != shapes.end() && pick->second.plan == c.plan;
      if (c.measured) {
        c.pick_ms = pick->second.ms;
        const double ratio = c.pick_ms / c.fastest_ms;
        ++s.cases;
        s.fastest += ratio <= 1.0005;
        log_sum += std::log(ratio);
        s.worst = std::max(s.worst, ratio);
      } else {
        ++s.unmeasured;
      }
      cases.push_back(c);
    }
  s.geomean = s.cases ? std::exp(log_sum / s.cases) : 1.0;
  if (summary) *summary = s;
  return cases;
}

}  // namespace winconv::bench
