// The interface every conv2d implementation in the benchmark runs behind, winconv's own and the
// baselines (cuDNN, im2col + cuBLAS, direct), so one harness times, checks and sizes them all alike.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "winconv/conv2d.h"

namespace winconv::bench {

class Conv2dImpl {
 public:
  virtual ~Conv2dImpl() = default;
  // The impl column of conv2d.csv: winconv, winconv_materialized, cudnn_best, ...
  virtual std::string name() const = 0;
  // Allocates what the implementation needs beyond x, w and y (workspace, window tensor,
  // handles, algorithm search). Returns false with `why` filled when it cannot run this config
  // (e.g. cuDNN has no algorithm for it); the harness then reports the row as skipped.
  virtual bool prepare(const Conv2dConfig& config, const void* x, const void* w, void* y,
                       std::string* why) = 0;
  // Device bytes it holds beyond x, w and y after prepare(), exactly (workspace, window or
  // column tensor, scratch).
  virtual size_t extra_bytes() const = 0;
  // Enqueues one forward call on `stream` with the given buffers (same shapes as in prepare;
  // the harness rotates buffers between calls). Everything the method needs per call
  // (transforms included) happens here.
  virtual void run(const void* x, const void* w, void* y, cudaStream_t stream) = 0;
  // A short description for logs (algorithm id chosen, tile config, ...).
  virtual std::string detail() const { return ""; }
};

// Throws std::runtime_error unless the baselines can run pb: dilation and groups 1, positive
// sizes, an output of at least 1x1, and each of `must_fit_int` (the sizes the baseline indexes
// with int) at most INT_MAX; `indexer` names what indexes with int in the message.
inline void check_baseline_problem(const Conv2dProblem& pb, std::initializer_list<int64_t> must_fit_int,
                                   const char* indexer) {
  if (pb.dilation_h != 1 || pb.dilation_w != 1 || pb.groups != 1) {
    throw std::runtime_error("only dilation 1 and groups 1 are benchmarked");
  }
  if (pb.n < 1 || pb.c < 1 || pb.h < 1 || pb.w < 1 || pb.k < 1 || pb.r < 1 || pb.s < 1 || pb.stride_h < 1 ||
      pb.stride_w < 1 || pb.pad_h < 0 || pb.pad_w < 0 || pb.p() < 1 || pb.q() < 1) {
    throw std::runtime_error("invalid problem size");
  }
  for (int64_t v : must_fit_int) {
    if (v > INT_MAX) {
      throw std::runtime_error("a size (" + std::to_string(v) + ") exceeds the int range of " + indexer);
    }
  }
}

// Factories. Each returns nullptr when the library it needs was not found at build time; then
// `missing` says which (so the benchmark can say which baselines it could not run).
std::unique_ptr<Conv2dImpl> make_cudnn_best(std::string* missing);      // fastest algo by FindEx
std::unique_ptr<Conv2dImpl> make_cudnn_implicit(std::string* missing);  // IMPLICIT_GEMM, no workspace
std::unique_ptr<Conv2dImpl> make_im2col_cublas(std::string* missing);   // explicit im2col + GEMM
std::unique_ptr<Conv2dImpl> make_direct(std::string* missing);          // direct convolution kernel

}  // namespace winconv::bench
