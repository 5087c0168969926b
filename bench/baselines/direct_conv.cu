// Direct convolution baseline for conv2d forward: what a plain CUDA kernel gets without any GEMM
// formulation or tuning. Each thread owns one output pixel and kChannelsPerThread output
// channels; the block stages those channels' filter taps in shared memory, kTapsPerStage at a
// time, and every thread walks the taps in the filter's memory order, reading its input value
// and updating all its accumulators. Accumulation is FP32 for every precision; no workspace.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "baseline.h"
#include "cuda_check.h"

namespace winconv::bench {
namespace {

constexpr int kDirectThreads = 256;
constexpr int kChannelsPerThread = 16;
constexpr int kTapsPerStage = 128;
// Stage rows padded from 16 to 20 floats: rows stay 16-byte aligned for float4 reads, and the
// staging writes (consecutive threads, consecutive taps) spread over 8 banks instead of 2.
constexpr int kStageRowFloats = kChannelsPerThread + 4;
constexpr int kMaxGridY = 65535;

static_assert(kChannelsPerThread % 4 == 0, "accumulators are updated from float4 filter reads");

struct DirectShape {
  int64_t n;
  int c, h, w;
  int k, r, s;
  int p, q;
  int stride_h, stride_w, pad_h, pad_w;
};

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Taps are visited in the filter's memory order, so a filter row is one contiguous run:
//   NCHW (w KCRS): c outermost, then r, then s;  NHWC (w KRSC): r, then s, then c innermost.
// In NHWC that order also walks each thread's input contiguously along channels.
template <typename T, bool kNHWC>
__global__ void __launch_bounds__(kDirectThreads)
    direct_conv_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                       DirectShape shape) {
  __shared__ __align__(16) float filter_stage[kTapsPerStage][kStageRowFloats];

  const int pq_count = shape.p * shape.q;
  const int64_t pixel = int64_t(blockIdx.x) * kDirectThreads + threadIdx.x;  // over N*P*Q
  const bool active = pixel < shape.n * pq_count;
  int64_t n = 0;
  int pq = 0;
  if (active) {
    n = pixel / pq_count;
    pq = int(pixel - n * pq_count);
  }
  const int p = pq / shape.q;
  const int q = pq - p * shape.q;
  const int h_origin = p * shape.stride_h - shape.pad_h;
  const int w_origin = q * shape.stride_w - shape.pad_w;
  const T* x_image = x + n * (int64_t(shape.c) * shape.h * shape.w);
  const int64_t taps = int64_t(shape.c) * shape.r * shape.s;
  const int inner_extent = kNHWC ? shape.c : shape.s;
  const int middle_extent = kNHWC ? shape.s : shape.r;

  for (int64_t k_begin = int64_t(blockIdx.y) * kChannelsPerThread; k_begin < shape.k;
       k_begin += int64_t(gridDim.y) * kChannelsPerThread) {
    float acc[kChannelsPerThread];
#pragma unroll
    for (int j = 0; j < kChannelsPerThread; ++j) acc[j] = 0.0f;
    int inner = 0, middle = 0, outer = 0;

    for (int64_t tap_begin = 0; tap_begin < taps; tap_begin += kTapsPerStage) {
      const int stage_taps = int(min(int64_t(kTapsPerStage), taps - tap_begin));
      __syncthreads();  // every thread is done with the previous stage
      // Consecutive threads take consecutive taps of one channel: coalesced filter reads.
      for (int i = threadIdx.x; i < kTapsPerStage * kChannelsPerThread; i += kDirectThreads) {
        const int channel = i / kTapsPerStage;
        const int tap = i - channel * kTapsPerStage;
        const int64_t k = k_begin + channel;
        float value = 0.0f;  // channels past K and taps past the end contribute nothing
        if (tap < stage_taps && k < shape.k) value = to_float(w[k * taps + tap_begin + tap]);
        filter_stage[tap][channel] = value;
      }
      __syncthreads();
      if (!active) continue;

      for (int tap = 0; tap < stage_taps; ++tap) {
        const int c = kNHWC ? inner : outer;
        const int r = kNHWC ? outer : middle;
        const int s = kNHWC ? middle : inner;
        const int ih = h_origin + r;
        const int iw = w_origin + s;
        float input = 0.0f;  // zero padding
        if (unsigned(ih) < unsigned(shape.h) && unsigned(iw) < unsigned(shape.w)) {
          const int64_t offset = kNHWC ? (int64_t(ih) * shape.w + iw) * shape.c + c
                                       : (int64_t(c) * shape.h + ih) * shape.w + iw;
          input = to_float(x_image[offset]);
        }
        // Every thread reads the same row: a shared-memory broadcast.
        const float4* filter = reinterpret_cast<const float4*>(filter_stage[tap]);
#pragma unroll
        for (int v = 0; v < kChannelsPerThread / 4; ++v) {
          const float4 f = filter[v];
          acc[4 * v + 0] = fmaf(input, f.x, acc[4 * v + 0]);
          acc[4 * v + 1] = fmaf(input, f.y, acc[4 * v + 1]);
          acc[4 * v + 2] = fmaf(input, f.z, acc[4 * v + 2]);
          acc[4 * v + 3] = fmaf(input, f.w, acc[4 * v + 3]);
        }
        if (++inner == inner_extent) {
          inner = 0;
          if (++middle == middle_extent) {
            middle = 0;
            ++outer;
          }
        }
      }
    }

    if (active) {
#pragma unroll
      for (int j = 0; j < kChannelsPerThread; ++j) {
        const int64_t k = k_begin + j;
        if (k < shape.k) {
          const int64_t offset = kNHWC ? pixel * shape.k + k : (n * shape.k + k) * pq_count + pq;
          y[offset] = from_float<T>(acc[j]);
        }
      }
    }
  }
}

template <typename T>
void launch_direct_conv(const void* x, const void* w, void* y, const DirectShape& shape,
                        Layout layout, cudaStream_t stream) {
  const int64_t pixels = shape.n * shape.p * shape.q;
  const dim3 grid(unsigned((pixels + kDirectThreads - 1) / kDirectThreads),
                  unsigned(std::min<int64_t>(kMaxGridY, (shape.k + kChannelsPerThread - 1) /
                                                            kChannelsPerThread)));
  const T* x_typed = static_cast<const T*>(x);
  const T* w_typed = static_cast<const T*>(w);
  T* y_typed = static_cast<T*>(y);
  if (layout == Layout::kNHWC) {
    direct_conv_kernel<T, true><<<grid, kDirectThreads, 0, stream>>>(x_typed, w_typed, y_typed, shape);
    throw_on_launch_error("direct_conv_kernel (nhwc)");
  } else {
    direct_conv_kernel<T, false><<<grid, kDirectThreads, 0, stream>>>(x_typed, w_typed, y_typed, shape);
    throw_on_launch_error("direct_conv_kernel (nchw)");
  }
}

class DirectConv final : public Conv2dImpl {
 public:
  std::string name() const override { return "direct"; }

  bool prepare(const Conv2dConfig& config, const void* /*x*/, const void* /*w*/, void* /*y*/,
               std::string* why) override {
    try {
      config_ = config;
      shape_ = checked_shape(config.problem);
      prepared_ = true;
      return true;
    } catch (const std::exception& e) {
      if (why != nullptr) *why = name() + ": " + e.what();
      prepared_ = false;
      return false;
    }
  }

  size_t extra_bytes() const override { return 0; }

  void run(const void* x, const void* w, void* y, cudaStream_t stream) override {
    if (!prepared_) throw std::runtime_error(name() + ": run() before a successful prepare()");
    switch (config_.precision) {
      case Precision::kFP32: launch_direct_conv<float>(x, w, y, shape_, config_.layout, stream); break;
      case Precision::kFP16: launch_direct_conv<__half>(x, w, y, shape_, config_.layout, stream); break;
      case Precision::kBF16:
        launch_direct_conv<__nv_bfloat16>(x, w, y, shape_, config_.layout, stream);
        break;
    }
  }

  std::string detail() const override {
    return "1 pixel x " + std::to_string(kChannelsPerThread) + " output channels per thread, " +
           std::to_string(kTapsPerStage) + "-tap filter stages in shared memory";
  }

 private:
  // The kernel keeps spatial coordinates and per-image pixel counts in int, offsets in int64.
  static DirectShape checked_shape(const Conv2dProblem& pb) {
    check_baseline_problem(pb,
                           {pb.c, pb.k, pb.h + 2 * pb.pad_h, pb.w + 2 * pb.pad_w, pb.stride_h, pb.stride_w,
                            pb.p() * pb.q()},
                           "the direct kernel");
    const int64_t blocks = (pb.n * pb.p() * pb.q() + kDirectThreads - 1) / kDirectThreads;
    if (blocks > INT_MAX) throw std::runtime_error("too many output pixels for one launch");
    return DirectShape{pb.n,        int(pb.c),        int(pb.h),        int(pb.w),
                       int(pb.k),   int(pb.r),        int(pb.s),        int(pb.p()),
                       int(pb.q()), int(pb.stride_h), int(pb.stride_w), int(pb.pad_h),
                       int(pb.pad_w)};
  }

  Conv2dConfig config_;
  DirectShape shape_{};
  bool prepared_ = false;
};

}  // namespace

std::unique_ptr<Conv2dImpl> make_direct(std::string* /*missing*/) {
  return std::make_unique<DirectConv>();
}

}  // namespace winconv::bench
