// The CPU path of winconv-bench: conv2d_forward_cpu in a workspace of its own, timed with a steady
// clock, checked against the FP64 reference on sampled pixels. Baselines of the GPU path do not exist here.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <new>
#include <random>
#include <thread>

#include "bench_paths.h"
#include "cpu/host_buffer.h"
#include "cpu/window_gemm_cpu.h"

namespace winconv::bench {

void fill_random(float* data, size_t count, uint64_t seed) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  const size_t chunk = (count + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      for (size_t i = t * chunk; i < std::min(count, (t + 1) * chunk); ++i) {
        uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);  // splitmix64
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        data[i] = float(double(z >> 40) / double(1ull << 24) * 2.0 - 1.0);
      }
    });
  }
  for (auto& th : pool) th.join();
}

bool run_cpu_bench(const Options& opt, const std::vector<Layer>& layers, std::vector<ResultRow>* rows,
                   RunHeader* header, std::string* error) {
  const int reps = opt.reps_given ? opt.reps : 3;  // CPU runs are long and steady; three give a median
  header->device = "CPU path (" + std::to_string(std::thread::hardware_concurrency()) + " hardware threads, " +
                   cpu_isa_name(widest_cpu_isa()) + ")";
  header->timing = "median of " + std::to_string(reps) +
                   " runs after one untimed run, workspace allocated once per configuration (host steady clock)";
  const int64_t batch = opt.batch > 0 ? opt.batch : 1;
  std::mt19937_64 rng(1234);
  for (const Layer& layer : layers) {
    for (Layout layout : opt.layouts) {
      for (Precision prec : opt.precisions) {
        Conv2dConfig cfg = make_config(layer, batch, prec, layout);
        ResultRow row{layer.name, precision_name(prec), layout_name(layout), "winconv"};
        if (!opt.impls.empty() && std::find(opt.impls.begin(), opt.impls.end(), "winconv") == opt.impls.end()) continue;
        Status st = conv2d_validate(cfg);
        if (!st.ok()) {
          row.skipped = st.to_string();
          rows->push_back(row);
          continue;
        }
        const Conv2dProblem& pb = cfg.problem;
        std::vector<float> x, w, y;
        try {
          x.resize(size_t(pb.x_elements()));
          w.resize(size_t(pb.w_elements()));
          y.assign(size_t(pb.y_elements()), std::numeric_limits<float>::quiet_NaN());
        } catch (const std::bad_alloc&) {
          row.skipped = "not enough host memory for x, w and y";
          rows->push_back(row);
          continue;
        }
        fill_random(x.data(), x.size(), rng());
        fill_random(w.data(), w.size(), rng());
        // The workspace is the caller's, as on the GPU path: allocated once and faulted into memory
        // by the untimed first run, so the timed runs measure the convolution, not the page faults
        // of a fresh 10-45 MB window tensor.
        size_t workspace_bytes = 0;
        conv2d_forward_cpu_extra_bytes(cfg, &workspace_bytes);
        const HostBuffer workspace((workspace_bytes + sizeof(float) - 1) / sizeof(float));
        if (!workspace) {
          row.skipped = "not enough host memory for the workspace";
          rows->push_back(row);
          continue;
        }
        std::vector<double> times;
        for (int i = -1; i < reps; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          st = conv2d_forward_cpu(cfg, x.data(), w.data(), y.data(), workspace.get(), workspace_bytes);
          if (!st.ok()) break;
          if (i >= 0)
            times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        if (!st.ok()) {
          *error = layer.name + ": " + st.to_string();
          return false;
        }
        std::vector<double> got, ref, ref_k(size_t(pb.k));
        for (int i = 0; i < opt.check_pixels; ++i) {
          const int64_t n = int64_t(rng() % uint64_t(pb.n)), p = int64_t(rng() % uint64_t(pb.p())),
                        q = int64_t(rng() % uint64_t(pb.q()));
          conv2d_reference_pixel(cfg, x.data(), w.data(), n, p, q, ref_k.data());
          for (int64_t k = 0; k < pb.k; ++k) {
            ref.push_back(ref_k[size_t(k)]);
            got.push_back(layout == Layout::kNCHW ? y[size_t(((n * pb.k + k) * pb.p() + p) * pb.q() + q)]
                                                  : y[size_t(((n * pb.p() + p) * pb.q() + q) * pb.k + k)]);
          }
        }
        for (float v : y)
          if (!std::isfinite(v)) got.push_back(v), ref.push_back(0);  // any unwritten element fails
        row.ms = median(times);
        row.tflops = pb.flops() / (row.ms * 1e-3) / 1e12;
        row.extra_bytes = workspace_bytes;
        row.peak_bytes = row.extra_bytes + 4 * size_t(pb.x_elements() + pb.w_elements() + pb.y_elements());
        row.rel_err = relative_l2(got, ref);
        row.detail = "cpu im2win";
        std::printf("%-9s %s %s winconv(cpu) %9.3f ms %7.3f TFLOPS rel_err %.2e\n", layer.name.c_str(),
                    precision_name(prec), layout_name(layout), row.ms, row.tflops, row.rel_err);
        std::fflush(stdout);
        rows->push_back(row);
      }
    }
  }
  return true;
}

}  // namespace winconv::bench
