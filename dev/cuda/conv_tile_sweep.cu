// Tile sweep for the FP32 im2win GEMM: times every tile shape on every layer of a layers CSV
// (both layouts, the on-chip algorithm) and marks the one select_tile chooses, so the selection
// rule can be checked against measurements. Each shape's output is compared with the selected
// shape's (same reduction order per element, so they agree to rounding). With TILES = selected
// only the chosen shape runs (dev/variants/compare-conv times kernel variants that way); with
// TILES = direct only the direct kernel (builds that differ in it alone are compared that way). NCHW
// layers with C*R*S <= kShallowMaxDepth also time the direct shallow kernel (tile "direct",
// conv2d_forward_shallow), which the rule chooses for up to shallow_max_filters(C, R, S, stride_w)
// filters (shallow_select.h).
//
//   conv_tile_sweep LAYERS_CSV [BATCH] [ITERS] [all|selected|direct]
//
// Prints: layer layout tile ms tflops max_rel_diff splits selected hash (splits "4t": the tail of
// the last round split 4 ways after whole rounds unsplit; hash: FNV-1a of the output's bytes, equal
// across builds whose kernels sum in the same order)
//
// Build (from the repository root, after the library):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DWINCONV_HAVE_CUDA=1 -Iinclude -Isrc -Ibench \
//     dev/cuda/conv_tile_sweep.cu bench/bench_common.cpp -Lbuild -lwinconv -Xlinker -rpath='$ORIGIN/..' \
//     -o build/dev/conv_tile_sweep
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "bench_common.h"
#include "tile_sweep_replay.h"  // split_plan_name, the splits column the replay reads
#include "conv_dev_common.cuh"
#include "cuda/conv2d_forward_tiled.h"
#include "cuda/cuda_status.h"
#include "cuda/im2win/shallow_select.h"
#include "cuda/im2win/tile_select.h"

using namespace winconv;

using conv_dev::fill;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LAYERS_CSV [BATCH] [ITERS] [all|selected|direct]\n", argv[0]);
    return 1;
  }
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 128;
  const int iters = argc > 3 ? std::atoi(argv[3]) : 10;
  const std::string tiles = argc > 4 ? argv[4] : "all";
  if (tiles != "all" && tiles != "selected" && tiles != "direct") {
    std::fprintf(stderr, "TILES must be all, selected or direct, not %s\n", tiles.c_str());
    return 1;
  }
  const bool selected_only = tiles == "selected", direct_only = tiles == "direct";
  std::vector<bench::Layer> layers;
  if (!bench::load_layers_or_report(argv[1], &layers)) return 1;
  int sms = 0;  // the library's own device check, so the plans below are the ones it runs
  if (const Status st = cuda_check_device(&sms); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::printf("layer layout tile ms tflops max_rel_diff splits selected hash\n");
  for (const bench::Layer& l : layers) {
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      Conv2dConfig cfg = bench::make_config(l, batch, Precision::kFP32, layout);
      cfg.algo = Conv2dAlgo::kOnChip;
      size_t ws_bytes = 0;  // the largest any shape needs (split-K partials depend on the tile count)
      Status st = Status::Ok();
      for (im2win::TileShape t : im2win::kAllTileShapes) {
        size_t b = 0;
        st = conv2d_forward_tiled_workspace_size(cfg, &t, &b);
        if (!st.ok()) { std::fprintf(stderr, "%s: %s\n", l.name.c_str(), st.message().c_str()); return 1; }
        ws_bytes = std::max(ws_bytes, b);
      }
      const int64_t nx = cfg.problem.x_elements(), nw = cfg.problem.w_elements(), ny = cfg.problem.y_elements();
      float *x, *w, *y, *yref;
      void* ws;
      CHECK_CUDA(cudaMalloc(&x, nx * 4)); CHECK_CUDA(cudaMalloc(&w, nw * 4));
      CHECK_CUDA(cudaMalloc(&y, ny * 4)); CHECK_CUDA(cudaMalloc(&yref, ny * 4));
      CHECK_CUDA(cudaMalloc(&ws, std::max<size_t>(ws_bytes, 256)));
      fill(x, nx, 1); fill(w, nw, 2);
      st = conv2d_forward(cfg, x, w, yref, ws, ws_bytes, nullptr);
      if (!st.ok()) { std::fprintf(stderr, "%s: %s\n", l.name.c_str(), st.message().c_str()); return 1; }
      const Conv2dGemmPlan plan = conv2d_gemm_plan(cfg, sms, nullptr);
      const im2win::TileShape chosen = plan.tile;
      std::vector<float> href(ny), h(ny);
      CHECK_CUDA(cudaMemcpy(href.data(), yref, ny * 4, cudaMemcpyDeviceToHost));
      // Variant v < kNumTiles: the GEMM with tile kAllTileShapes[v]; v == kNumTiles: the direct shallow kernel.
      constexpr int kNumTiles = int(std::size(im2win::kAllTileShapes));
      const bool direct_fits = layout == Layout::kNCHW &&
                               cfg.problem.c * cfg.problem.r * cfg.problem.s <= im2win::kShallowMaxDepth;
      for (int v = 0; v <= kNumTiles; ++v) {
        const bool direct = v == kNumTiles;
        if (direct && !direct_fits) continue;
        const im2win::TileShape t = direct ? chosen : im2win::kAllTileShapes[v];
        const bool selected = direct ? plan.shallow : !plan.shallow && t == chosen;
        if ((selected_only && !selected) || (direct_only && !direct)) continue;
        auto run = [&]() {
          return direct ? conv2d_forward_shallow(cfg, x, w, y, nullptr)
                        : conv2d_forward_tiled(cfg, x, w, y, ws, ws_bytes, nullptr, &t);
        };
        CHECK_CUDA(cudaMemset(y, 0xff, ny * 4));  // NaN poison
        st = run();
        if (!st.ok()) { std::fprintf(stderr, "%s: %s\n", l.name.c_str(), st.message().c_str()); return 1; }
        CHECK_CUDA(cudaMemcpy(h.data(), y, ny * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        const uint64_t hash = conv_dev::output_hash(h);
        for (int64_t i = 0; i < ny; ++i) {
          const double d = double(h[i]) - href[i];
          num = std::isnan(h[i]) ? INFINITY : std::max(num, std::fabs(d));
          den = std::max(den, std::fabs(double(href[i])));
        }
        for (int i = 0; i < 2; ++i) run();
        const float ms = conv_dev::mean_ms(e0, e1, iters, run);
        const im2win::KSplit ks = direct ? im2win::KSplit{} : conv2d_gemm_plan(cfg, sms, &t).ksplit;
        std::printf("%s %s %s %.4f %.2f %.2e %s %s %016llx\n", l.name.c_str(),
                    layout == Layout::kNCHW ? "nchw" : "nhwc", direct ? "direct" : im2win::tile_name(t), ms,
                    cfg.problem.flops() / ms * 1e-9, num / (den > 0 ? den : 1), bench::split_plan_name(ks).c_str(),
                    selected ? "*" : "-", static_cast<unsigned long long>(hash));
        std::fflush(stdout);
      }
      CHECK_CUDA(cudaFree(x)); CHECK_CUDA(cudaFree(w)); CHECK_CUDA(cudaFree(y));
      CHECK_CUDA(cudaFree(yref)); CHECK_CUDA(cudaFree(ws));
    }
  }
  return 0;
}
