// Does one conv2d layer's time follow where its buffers land? The 256-channel 3 x 3 layer at
// 14 x 14 (NCHW, 128x128 tile) runs at 0.70 ms in some processes and up to 0.89 ms in others, with
// the same bits (docs/conv2d.md, v18 and v20; the shared-memory carveout is not the cause). This
// probe runs one layer in one process with several placements, each with its buffers allocated
// after a pad buffer of another size, so x, the filter, y and the workspace (which holds the
// reduction table) sit at other addresses. All placements stay allocated, and each is timed in
// PASSES passes over all of them (the second and later in reverse and rotated order).
//   - each placement keeps its time in every pass, times differ between placements: the time
//     follows placement;
//   - a placement's time changes between passes: something that varies in time (clock, the
//     order in which blocks meet SMs), not placement;
//   - the same time everywhere in a process, different between processes: something fixed for
//     the life of a process.
// Each time is the median of 5 batches of ITERS back-to-back launches (CUDA events). After each
// batch a one-thread kernel reads the SM clock (clock64 ticks per globaltimer nanosecond), so a
// batch's time can be set beside the clock it ran at.
//
//   conv_alloc_probe LAYERS_CSV LAYER [BATCH] [PLACEMENTS] [ITERS] [nchw|nhwc] [PASSES]
//
// Prints: pass placement pad_mib x_mib w_mib y_mib ws_mib ms min_ms max_ms hash (the buffers'
// device addresses in MiB, which cudaMalloc aligns to its 2 MiB pages; min and max of the 5
// batches; hash: FNV-1a of the output, equal everywhere), then one line per batch:
// "batch pass placement ms mhz".
//
// Build (from the repository root, after the library):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DWINCONV_HAVE_CUDA=1 -Iinclude -Isrc -Ibench \
//     dev/cuda/conv_alloc_probe.cu bench/bench_common.cpp -Lbuild -lwinconv -Xlinker -rpath='$ORIGIN/..' \
//     -o build/dev/conv_alloc_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "conv_dev_common.cuh"

using namespace winconv;

namespace {

#define CHECK_STATUS(st)                                    \
  do {                                                      \
    const Status st_ = (st);                                \
    if (!st_.ok()) {                                        \
      std::fprintf(stderr, "%s\n", st_.message().c_str()); \
      std::exit(2);                                         \
    }                                                       \
  } while (0)

// The SM clock in MHz over a spin of about 0.1 ms on one thread.
__global__ void sm_clock_mhz(float* out) {
  const unsigned long long t0 = strip_bench::global_ns();
  const long long c0 = clock64();
  while (clock64() - c0 < 200000) {
  }
  const long long c1 = clock64();
  *out = float(c1 - c0) * 1000.f / float(strip_bench::global_ns() - t0);
}

unsigned long long address_mib(const void* p) { return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p) >> 20); }

// The buffers of one placement, allocated after `pad_bytes` of padding.
struct Placement {
  void* pad = nullptr;
  float *x = nullptr, *w = nullptr, *y = nullptr;
  void* ws = nullptr;
  Placement(size_t pad_bytes, int64_t nx, int64_t nw, int64_t ny, size_t ws_bytes) {
    if (pad_bytes > 0) CHECK_CUDA(cudaMalloc(&pad, pad_bytes));
    CHECK_CUDA(cudaMalloc(&x, nx * 4));
    CHECK_CUDA(cudaMalloc(&w, nw * 4));
    CHECK_CUDA(cudaMalloc(&y, ny * 4));
    CHECK_CUDA(cudaMalloc(&ws, std::max<size_t>(ws_bytes, 256)));
    conv_dev::fill(x, nx, 1);
    conv_dev::fill(w, nw, 2);
    CHECK_CUDA(cudaGetLastError());
  }
  ~Placement() {
    cudaFree(ws); cudaFree(y); cudaFree(w); cudaFree(x);
    if (pad) cudaFree(pad);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LAYERS_CSV LAYER [BATCH] [PLACEMENTS] [ITERS] [nchw|nhwc] [PASSES]\n", argv[0]);
    return 1;
  }
  bench::Options opt;
  opt.layers_file = argv[1];
  opt.layers = {argv[2]};
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 128;
  const int placements = argc > 4 ? std::max(1, std::atoi(argv[4])) : 6;
  const int iters = argc > 5 ? std::max(1, std::atoi(argv[5])) : 20;
  const Layout layout = argc > 6 && std::string(argv[6]) == "nhwc" ? Layout::kNHWC : Layout::kNCHW;
  const int passes = argc > 7 ? std::max(1, std::atoi(argv[7])) : 3;
  std::string error;
  const std::vector<bench::Layer> layers = bench::load_layers(opt, &error);
  if (!error.empty() || layers.size() != 1) {
    std::fprintf(stderr, "%s\n", error.empty() ? "no such layer" : error.c_str());
    return 1;
  }
  const Conv2dConfig cfg = bench::make_config(layers[0], batch, Precision::kFP32, layout);
  size_t ws_bytes = 0;
  CHECK_STATUS(conv2d_forward_workspace_size(cfg, &ws_bytes));
  const int64_t nx = cfg.problem.x_elements(), nw = cfg.problem.w_elements(), ny = cfg.problem.y_elements();
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> h(ny);
  float* mhz_d = nullptr;
  CHECK_CUDA(cudaMalloc(&mhz_d, sizeof(float)));
  std::vector<std::string> batch_lines;
  std::printf("pass placement pad_mib x_mib w_mib y_mib ws_mib ms min_ms max_ms hash\n");
  // Placement q follows a pad of 37 q MiB (an odd number of cudaMalloc's 2 MiB pages, so the
  // buffers move by other strides each time).
  std::vector<std::unique_ptr<Placement>> all;
  for (int q = 0; q < placements; ++q)
    all.push_back(std::make_unique<Placement>(size_t(q) * (37u << 20), nx, nw, ny, ws_bytes));
  for (int pass = 0; pass < passes; ++pass) {
    for (int i = 0; i < placements; ++i) {
      // Pass 0 in allocation order; later passes reversed and rotated, so a drift in time does
      // not line up with the placements.
      const int q = pass == 0 ? i : (placements - 1 - i + pass) % placements;
      Placement& b = *all[q];
      auto run = [&] { CHECK_STATUS(conv2d_forward(cfg, b.x, b.w, b.y, b.ws, ws_bytes, nullptr)); };
      CHECK_CUDA(cudaMemset(b.y, 0xff, ny * 4));  // NaN poison: the hash shows a run that wrote nothing
      run();
      CHECK_CUDA(cudaMemcpy(h.data(), b.y, ny * 4, cudaMemcpyDeviceToHost));
      const uint64_t hash = conv_dev::output_hash(h);
      std::vector<float> batches;
      for (int k = 0; k < 5; ++k) {
        batches.push_back(conv_dev::mean_ms(e0, e1, iters, run));
        sm_clock_mhz<<<1, 1>>>(mhz_d);
        float mhz = 0;
        CHECK_CUDA(cudaMemcpy(&mhz, mhz_d, sizeof(float), cudaMemcpyDeviceToHost));
        char line[96];
        std::snprintf(line, sizeof line, "batch %d %d %.4f %.0f", pass, q, batches.back(), mhz);
        batch_lines.push_back(line);
      }
      std::sort(batches.begin(), batches.end());
      std::printf("%d %d %d %llu %llu %llu %llu %.4f %.4f %.4f %016llx\n", pass, q, q * 37, address_mib(b.x),
                  address_mib(b.w), address_mib(b.y), address_mib(b.ws), batches[2], batches[0], batches[4],
                  static_cast<unsigned long long>(hash));
      std::fflush(stdout);
    }
  }
  for (const std::string& line : batch_lines) std::printf("%s\n", line.c_str());
  cudaFree(mhz_d);
  return 0;
}
