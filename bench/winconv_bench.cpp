// winconv-bench: times winconv's conv2d against the baselines of DESIGN.md in one process and
// writes conv2d.csv, conv2d_detail.csv and conv2d_summary.md. With a GPU it runs the CUDA paths
// (batch 128 by default); without one, the CPU im2win path against the FP64 reference.
#include <cmath>
#include <cstdio>

#include "bench_paths.h"

int main(int argc, char** argv) {
  using namespace winconv::bench;
  Options opt;
  int exit_code = 0;
  if (!parse_options(argc, argv, &opt, &exit_code)) return exit_code;
  std::string error;
  const std::vector<Layer> layers = load_layers(opt, &error);
  if (!error.empty()) {
    std::fprintf(stderr, "winconv-bench: %s\n", error.c_str());
    return 2;
  }
  std::vector<ResultRow> rows;
  RunHeader header;
  bool ok = false;
#if WINCONV_HAVE_CUDA
  if (!opt.cpu && gpu_available()) {
    ok = run_gpu_bench(opt, layers, &rows, &header, &error);
  } else {
    if (!opt.cpu) std::printf("winconv-bench: no CUDA device found; running the CPU im2win path\n");
    ok = run_cpu_bench(opt, layers, &rows, &header, &error);
  }
#else
  std::printf("winconv-bench: built without CUDA; running the CPU im2win path\n");
  ok = run_cpu_bench(opt, layers, &rows, &header, &error);
#endif
  if (!ok) {
    std::fprintf(stderr, "winconv-bench: %s\n", error.c_str());
    return 1;
  }
  if (!write_results(opt, header, rows, &error)) {
    std::fprintf(stderr, "winconv-bench: %s\n", error.c_str());
    return 1;
  }
  std::printf("wrote %s/conv2d.csv, conv2d_detail.csv, conv2d_summary.md\n", opt.out_dir.c_str());
  int failures = 0;
  // The error bound is winconv's contract; baselines' errors (FFT, Winograd) are reported only.
  for (const auto& r : rows)
    failures += r.skipped.empty() && (!std::isfinite(r.rel_err) ||  // NaN/unwritten output: no implementation passes
                                      (r.impl.rfind("winconv", 0) == 0 && !(r.rel_err <= (r.precision == "fp32" ? 1e-5 : 1e-2))));
  if (failures) {
    std::fprintf(stderr, "winconv-bench: %d row(s) exceed the error bound (fp32 1e-5, half 1e-2)\n", failures);
    return 3;
  }
  return 0;
}
