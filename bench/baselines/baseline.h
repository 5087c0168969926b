// The interface every conv2d implementation in the benchmark runs behind, winconv's own and the
// baselines (cuDNN, im2col + cuBLAS, direct), so one harness times, checks and sizes them all alike.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
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

// Factories. Each returns nullptr when the library it needs was not found at build time; then
// `missing` says which (so the benchmark can say which baselines it could not run).
std::unique_ptr<Conv2dImpl> make_cudnn_best(std::string* missing);      // fastest algo by FindEx
std::unique_ptr<Conv2dImpl> make_cudnn_implicit(std::string* missing);  // IMPLICIT_GEMM, no workspace
std::unique_ptr<Conv2dImpl> make_im2col_cublas(std::string* missing);   // explicit im2col + GEMM
std::unique_ptr<Conv2dImpl> make_direct(std::string* missing);          // direct convolution kernel

}  // namespace winconv::bench
