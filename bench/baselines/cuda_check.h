// Error checks shared by the baseline implementations: every failure becomes a std::runtime_error
// whose message names the call that failed and CUDA's own error name and text, so the benchmark
// log says exactly what broke (the harness catches and reports it).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace winconv::bench {

inline void throw_on_cuda_error(cudaError_t status, const std::string& context) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(context + ": " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ")");
}

// A bad launch configuration is reported by cudaGetLastError, not by the launch itself.
inline void throw_on_launch_error(const std::string& kernel_name) {
  throw_on_cuda_error(cudaGetLastError(), "launch of " + kernel_name);
}

}  // namespace winconv::bench
