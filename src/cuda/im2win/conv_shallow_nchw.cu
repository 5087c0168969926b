// The direct FP32 kernel for NCHW layers with a shallow reduction (shallow_select.h): each warp
// job is 128 consecutive output pixels of one image (lane l takes pixels l, l + 32, l + 64 and
// l + 96, so every store instruction of a warp writes 128 contiguous bytes of one output channel)
// times the KT output channels of its block. The block's filter slice sits in shared memory as
// [tap][channel] (one broadcast 16-byte load gives four channels of a tap); each tap costs a lane
// four loads of x, which neighbouring lanes take from neighbouring columns, for 4 KT multiply-adds.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/fast_divmod.cuh"
#include "cuda/im2win/conv_shallow.h"

namespace winconv::im2win {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kPixelsPerLane = 4;
constexpr int kJobPixels = int(kShallowJobPixels);
static_assert(kJobPixels == 32 * kPixelsPerLane, "a job is four pixels per lane");
constexpr int kMaxDepth = int(kShallowMaxDepth);

// The problem as the caller gave it, and what the kernel derives from it once on the host.
struct ShallowKernelArgs {
  ShallowConvParams conv;
  int rs, depth, pq;         // taps of one channel; taps of a window (C R S); pixels of one plane
  int64_t x_image, y_image;  // elements of one image of x and of y
  uint32_t jobs;             // N * jobs_per_image
  int groups;                // output-channel groups of KT
  FastDivmod job_div;        // job -> (image, job in image)
  FastDivmod q_div;          // pixel -> (row p, column q)
};

template <int KT>
__global__ void __launch_bounds__(kThreads, 2) conv_shallow_nchw_kernel(const ShallowKernelArgs a) {
  __shared__ __align__(16) float wt[kMaxDepth * KT];  // the group's filters, [tap][channel]
  __shared__ int tap_off[kMaxDepth];                  // a tap's offset in x from the window origin
  __shared__ int tap_r[kMaxDepth], tap_s[kMaxDepth];
  const int group = int(blockIdx.x % unsigned(a.groups));
  const int f0 = group * KT;
  for (int i = threadIdx.x; i < a.depth * KT; i += kThreads) {
    const int t = i / KT, f = i % KT;
    wt[i] = f0 + f < a.conv.k ? a.conv.w[int64_t(f0 + f) * a.depth + t] : 0.f;
  }
  for (int t = threadIdx.x; t < a.depth; t += kThreads) {
    const int c = t / a.rs, r = t % a.rs / a.conv.s, s = t % a.conv.s;
    tap_off[t] = (c * a.conv.h + r) * a.conv.w_in + s;
    tap_r[t] = r;
    tap_s[t] = s;
  }
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const uint32_t job_step = gridDim.x / unsigned(a.groups) * kWarps;
  for (uint32_t job = blockIdx.x / unsigned(a.groups) * kWarps + threadIdx.x / 32; job < a.jobs; job += job_step) {
    uint32_t image, in_image;
    a.job_div.divmod(job, image, in_image);
    const int m0 = int(in_image) * kJobPixels + lane;
    const float* xi = a.conv.x + int64_t(image) * a.x_image;
    int origin[kPixelsPerLane], ih0[kPixelsPerLane], iw0[kPixelsPerLane];
    bool interior = true;
#pragma unroll
    for (int j = 0; j < kPixelsPerLane; ++j) {
      const int m = m0 + 32 * j;
      uint32_t p, q;
      a.q_div.divmod(uint32_t(m < a.pq ? m : 0), p, q);  // past the image: pixel 0, never stored
      ih0[j] = int(p) * a.conv.stride_h - a.conv.pad_h;
      iw0[j] = int(q) * a.conv.stride_w - a.conv.pad_w;
      origin[j] = ih0[j] * a.conv.w_in + iw0[j];
      interior &= ih0[j] >= 0 && ih0[j] + a.conv.r <= a.conv.h && iw0[j] >= 0 &&
                  iw0[j] + a.conv.s <= a.conv.w_in;
    }
    float acc[kPixelsPerLane][KT];
#pragma unroll
    for (int j = 0; j < kPixelsPerLane; ++j)
#pragma unroll
      for (int f = 0; f < KT; ++f) acc[j][f] = 0.f;
    // acc += v * (the tap's KT weights): the same order of taps on both paths below.
    auto accumulate = [&](int t, const float (&v)[kPixelsPerLane]) {
      const float4* wq = reinterpret_cast<const float4*>(wt + t * KT);
#pragma unroll
      for (int g = 0; g < KT / 4; ++g) {
        const float4 wv = wq[g];
#pragma unroll
        for (int j = 0; j < kPixelsPerLane; ++j) {
          acc[j][4 * g] = fmaf(v[j], wv.x, acc[j][4 * g]);
          acc[j][4 * g + 1] = fmaf(v[j], wv.y, acc[j][4 * g + 1]);
          acc[j][4 * g + 2] = fmaf(v[j], wv.z, acc[j][4 * g + 2]);
          acc[j][4 * g + 3] = fmaf(v[j], wv.w, acc[j][4 * g + 3]);
        }
      }
    };
    if (__all_sync(0xffffffffu, interior)) {
      // Every window of the warp lies inside x: no bounds tests.
#pragma unroll 2
      for (int t = 0; t < a.depth; ++t) {
        const int off = tap_off[t];
        float v[kPixelsPerLane];
#pragma unroll
        for (int j = 0; j < kPixelsPerLane; ++j) v[j] = __ldg(xi + origin[j] + off);
        accumulate(t, v);
      }
    } else {
      for (int t = 0; t < a.depth; ++t) {
        const int off = tap_off[t], r = tap_r[t], s = tap_s[t];
        float v[kPixelsPerLane];
#pragma unroll
        for (int j = 0; j < kPixelsPerLane; ++j) {
          v[j] = 0.f;  // zero padding
          if (unsigned(ih0[j] + r) < unsigned(a.conv.h) && unsigned(iw0[j] + s) < unsigned(a.conv.w_in))
            v[j] = __ldg(xi + origin[j] + off);
        }
        accumulate(t, v);
      }
    }
    float* yi = a.conv.y + int64_t(image) * a.y_image + int64_t(f0) * a.pq;
#pragma unroll
    for (int f = 0; f < KT; ++f) {
      if (f0 + f >= a.conv.k) break;
#pragma unroll
      for (int j = 0; j < kPixelsPerLane; ++j)
        if (m0 + 32 * j < a.pq) yi[m0 + 32 * j] = acc[j][f];
      yi += a.pq;
    }
  }
}

template <int KT>
cudaError_t launch(ShallowKernelArgs a, int num_sms, cudaStream_t stream) {
  a.groups = (a.conv.k + KT - 1) / KT;
  // Job blocks per group: enough for every job, capped at ~16 blocks per SM in all (two resident
  // at a time), the rest taken in the grid-stride loop.
  const int64_t needed = (int64_t(a.jobs) + kWarps - 1) / kWarps;
  const int64_t cap = std::max<int64_t>(1, int64_t(std::max(num_sms, 1)) * 16 / a.groups);
  const int64_t blocks = std::min(needed, cap) * a.groups;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  conv_shallow_nchw_kernel<KT><<<unsigned(blocks), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_conv_fp32_shallow_nchw(const ShallowConvParams& p, int num_sms, cudaStream_t stream) {
  if (!shallow_kernel_fits(p)) return cudaErrorInvalidValue;
  const int64_t pq = int64_t(p.p) * p.q;
  const int64_t jobs_per_image = (pq + kJobPixels - 1) / kJobPixels;
  ShallowKernelArgs a{};
  a.conv = p;
  a.rs = p.r * p.s;
  a.depth = p.c * a.rs;
  a.pq = int(pq);
  a.x_image = int64_t(p.c) * p.h * p.w_in;
  a.y_image = int64_t(p.k) * pq;
  a.jobs = uint32_t(p.n * jobs_per_image);
  a.job_div = FastDivmod(uint32_t(jobs_per_image));
  a.q_div = FastDivmod(uint32_t(p.q));
  // Eight channels per thread where sixteen would be half padding or more.
  return p.k <= 8 ? launch<8>(a, num_sms, stream) : launch<16>(a, num_sms, stream);
}

}  // namespace winconv::im2win
