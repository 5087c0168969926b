// conv2d forward: public C++ API.
//
// Dense 2-D convolution (cross-correlation, as cuDNN and PyTorch define it) with zero padding:
//   y[n, k, p, q] = sum_{c, r, s} x[n, c, p*stride_h + r - pad_h, q*stride_w + s - pad_w] * w[k, c, r, s]
// Tensors are dense and packed in the layout named by Conv2dConfig::layout:
//   NCHW: x [N][C][H][W], w [K][C][R][S], y [N][K][P][Q]
//   NHWC: x [N][H][W][C], w [K][R][S][C], y [N][P][Q][K]
// Pointers are device pointers; every call is asynchronous on the given stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include "winconv/status.h"

// The API only passes the stream through; avoid making every user include the CUDA runtime.
typedef struct CUstream_st* cudaStream_t;

namespace winconv {

enum class Layout { kNCHW, kNHWC };
enum class Precision { kFP32, kFP16, kBF16 };

// Which implementation runs. kAuto is what a user gets by default: the library's own choice.
enum class Conv2dAlgo {
  kAuto,
  kMaterialized,  // im2win transform into a window tensor in device memory, then the window GEMM
  kOnChip,        // windows formed in shared memory straight from x; no window tensor in memory
};

struct Conv2dProblem {
  int64_t n = 1, c = 1, h = 1, w = 1;  // input
  int64_t k = 1, r = 1, s = 1;         // output channels, filter height, filter width
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;  // only 1 is supported
  int64_t groups = 1;                      // only 1 is supported

  int64_t p() const { return (h + 2 * pad_h - r) / stride_h + 1; }  // output height
  int64_t q() const { return (w + 2 * pad_w - s) / stride_w + 1; }  // output width
  int64_t x_elements() const { return n * c * h * w; }
  int64_t w_elements() const { return k * c * r * s; }
  int64_t y_elements() const { return n * k * p() * q(); }
  // 2 FLOPs per multiply-add, for every algorithm.
  double flops() const { return 2.0 * double(n) * double(k) * double(p()) * double(q()) * double(c) * double(r) * double(s); }
};

struct Conv2dConfig {
  Conv2dProblem problem;
  Layout layout = Layout::kNCHW;
  Precision precision = Precision::kFP32;
  Conv2dAlgo algo = Conv2dAlgo::kAuto;
};

// Checks every field of the problem (sizes, output size, unsupported options, index overflow)
// and the precision/algo combination. Host-only; launches nothing.
Status conv2d_validate(const Conv2dConfig& config);

// Bytes of device workspace conv2d_forward needs for this config on the current CUDA device: the
// repacked filter, a table of one int per reduction index (on-chip algorithm, but for the NHWC
// channel-vector gather; two with padding, none with padding and R or S above 15), the window
// tensor (materialized algorithm) and, for GEMMs
// too small to fill the GPU, the partial tiles of the reduction splits. The splits depend on the
// device's SM count, so ask with the device current that will run the call. Without a device, in
// a build with the CUDA kernels: the unsplit size; a build without them returns kNoDevice.
Status conv2d_forward_workspace_size(const Conv2dConfig& config, size_t* bytes);

// The algorithm kAuto resolves to for this config (already resolved ones are returned unchanged).
Status conv2d_select_algo(const Conv2dConfig& config, Conv2dAlgo* algo);

// Runs y = conv2d(x, w) on `stream`. x, w and y must be non-null and aligned to 16 bytes; so
// must the workspace, which may be null only when the workspace size is 0.
Status conv2d_forward(const Conv2dConfig& config, const void* x, const void* w, void* y,
                      void* workspace, size_t workspace_bytes, cudaStream_t stream);

// ---- CPU path (host pointers, fp32 only; the benchmark's path when no GPU is present).

// im2win on the CPU: the window tensor is built in host memory, then blocked dot products over
// contiguous window runs; where the whole tensor would exceed 16 MiB, each thread instead builds
// the window rows of the output rows it computes, just before them, in a buffer of its own.
// threads = 0 uses every hardware thread. The threads besides the
// caller's come from a pool kept for the process (started at the first call); they wait for the
// next call spinning, yielding to other work, for 2 ms after each call (WINCONV_CPU_SPIN_US
// microseconds if set; 0 sleeps at once), then asleep. A call made
// while another holds the pool, or asking for more threads than the hardware has, starts threads
// of its own.
Status conv2d_forward_cpu(const Conv2dConfig& config, const float* x, const float* w, float* y,
                          int threads = 0);
// The same in the caller's workspace, allocated nothing per call: workspace_bytes at least
// conv2d_forward_cpu_extra_bytes(config, &bytes, threads) with the same threads, and the workspace
// aligned to 64 bytes. A workspace kept between calls is faulted into memory once (a 45 MB window
// tensor's first touch took a tenth of its layer's time).
Status conv2d_forward_cpu(const Conv2dConfig& config, const float* x, const float* w, float* y, void* workspace,
                          size_t workspace_bytes, int threads = 0);
// Host bytes conv2d_forward_cpu allocates (or needs as its workspace) beyond x, w and y with this
// many threads (0: every hardware thread): the window tensor (or one buffer of window rows per
// thread) and, from the next 64-byte boundary, the packed filter (whole, or a block per thread:
// which one depends on the problem and on the L2 size this CPU reports).
Status conv2d_forward_cpu_extra_bytes(const Conv2dConfig& config, size_t* bytes, int threads = 0);

// The oracle: direct convolution with double accumulation and a double output.
Status conv2d_reference(const Conv2dConfig& config, const float* x, const float* w, double* y);
// The oracle for one output pixel (n, p, q): all K channels into y_k[0..K).
Status conv2d_reference_pixel(const Conv2dConfig& config, const float* x, const float* w, int64_t n, int64_t p,
                              int64_t q, double* y_k);

const char* layout_name(Layout layout);        // "nchw", "nhwc"
const char* precision_name(Precision p);       // "fp32", "fp16", "bf16"
const char* algo_name(Conv2dAlgo algo);        // "auto", "materialized", "onchip"
size_t precision_bytes(Precision p);

}  // namespace winconv
