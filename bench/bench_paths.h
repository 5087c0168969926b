// The two benchmark paths winconv-bench chooses between.
#pragma once

#include <vector>

#include "bench_common.h"

namespace winconv::bench {

// Fills *rows; returns false (with *error) when the run could not be carried out.
bool run_cpu_bench(const Options& opt, const std::vector<Layer>& layers, std::vector<ResultRow>* rows,
                   RunHeader* header, std::string* error);

#if WINCONV_HAVE_CUDA
// True when a CUDA device is present (the GPU path then runs).
bool gpu_available();
bool run_gpu_bench(const Options& opt, const std::vector<Layer>& layers, std::vector<ResultRow>* rows,
                   RunHeader* header, std::string* error);
#endif

// Random values in [-1, 1) from a counter-based hash: reproducible, parallel, never constant.
void fill_random(float* data, size_t count, uint64_t seed);

}  // namespace winconv::bench
