// The direct FP32 kernel for NCHW layers with a shallow reduction (shallow_select.h): each warp
// job is 128 consecutive output pixels of one image (lane l takes pixels l, l + 32, l + 64 and
// l + 96, so every store instruction of a warp writes 128 contiguous bytes of one output channel)
// times the KT output channels of its block (KT 16, 8 or 4 by how many warps the grid gives each
// SM: shallow_filters_per_thread). The block's filter slice sits in shared memory as
// [tap][channel] (one broadcast 16-byte load gives four channels of a tap); each tap costs a lane
// four loads of x, which neighbouring lanes take from neighbouring columns, for 4 KT multiply-adds.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

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

// kS: the filter width at compile time (0: at run time). Windows that lie inside x then walk their
// C R window rows, each a run of kS taps at consecutive addresses of x and of the filter slice,
// so every load of a row takes its address from the row's pointer plus a constant (per tap before,
// a 64-bit address was formed for each of the four loads: a third of the loop's instructions).
template <int KT, int kS>
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
    // Window rows of kS taps (kS > 0): a row's four pointers, then kS taps at constant offsets
    // from them. A warp with a window past the edge of x tests each load (zero padding): the
    // row once per pixel, the column per tap.
    auto row_passes = [&](auto guarded) {
      constexpr bool kGuarded = decltype(guarded)::value;
      const int rows = a.depth / (kS > 0 ? kS : 1);
#pragma unroll 1
      for (int row = 0; row < rows; ++row) {
        const int t0 = row * kS;
        const float* xr[kPixelsPerLane];
        bool row_in[kPixelsPerLane];
#pragma unroll
        for (int j = 0; j < kPixelsPerLane; ++j) {
          if constexpr (kGuarded) {
            xr[j] = xi + (origin[j] + tap_off[t0]);  // not read where outside x
            row_in[j] = unsigned(ih0[j] + tap_r[t0]) < unsigned(a.conv.h);
          } else {
            xr[j] = xi + unsigned(origin[j] + tap_off[t0]);  // >= 0: inside x
          }
        }
#pragma unroll
        for (int s = 0; s < kS; ++s) {
          float v[kPixelsPerLane];
#pragma unroll
          for (int j = 0; j < kPixelsPerLane; ++j) {
            if constexpr (kGuarded)
              v[j] = row_in[j] && unsigned(iw0[j] + s) < unsigned(a.conv.w_in) ? __ldg(xr[j] + s) : 0.f;
            else
              v[j] = __ldg(xr[j] + s);
          }
          accumulate(t0 + s, v);
        }
      }
    };
    // Asks for every window row of a warp that lies inside x before its taps are read, so that
    // the rows' misses overlap instead of arriving one row at a time inside the tap loop (the
    // rows of padded warps are not asked for: some lie outside x).
    auto prefetch_rows = [&] {
      for (int t = 0; t < a.depth; t += a.conv.s) {
        const int off = tap_off[t];
#pragma unroll
        for (int j = 0; j < kPixelsPerLane; ++j)
          asm volatile("prefetch.global.L1 [%0];" ::"l"(xi + unsigned(origin[j] + off)));
      }
    };
    const bool inside = __all_sync(0xffffffffu, interior);
    if (inside) prefetch_rows();
    if constexpr (kS > 0) {
      if (inside)
        row_passes(std::false_type{});
      else
        row_passes(std::true_type{});
    } else if (inside) {
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
    // A channel's four pixels of this lane lie 32 floats apart from one pointer.
    float* yc = a.conv.y + int64_t(image) * a.y_image + int64_t(f0) * a.pq + m0;
    if (f0 + KT <= a.conv.k && m0 + 32 * (kPixelsPerLane - 1) < a.pq) {
      // A whole group of channels and all four pixels (every job but an image's last): no tests.
#pragma unroll
      for (int f = 0; f < KT; ++f, yc += a.pq)
#pragma unroll
        for (int j = 0; j < kPixelsPerLane; ++j) yc[32 * j] = acc[j][f];
    } else {
#pragma unroll
      for (int f = 0; f < KT; ++f, yc += a.pq) {
        if (f0 + f >= a.conv.k) break;
#pragma unroll
        for (int j = 0; j < kPixelsPerLane; ++j)
          if (m0 + 32 * j < a.pq) yc[32 * j] = acc[j][f];
      }
    }
  }
}

template <int KT, int kS>
cudaError_t launch(ShallowKernelArgs a, int num_sms, cudaStream_t stream) {
  a.groups = (a.conv.k + KT - 1) / KT;
  // Job blocks per group: enough for every job, capped at ~16 blocks per SM in all (two resident
  // at a time), the rest taken in the grid-stride loop.
  const int64_t needed = (int64_t(a.jobs) + kWarps - 1) / kWarps;
  const int64_t cap = std::max<int64_t>(1, int64_t(std::max(num_sms, 1)) * 16 / a.groups);
  const int64_t blocks = std::min(needed, cap) * a.groups;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  conv_shallow_nchw_kernel<KT, kS><<<unsigned(blocks), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

// The filter widths of the common small kernels at compile time; others at run time.
template <int KT>
cudaError_t launch_width(const ShallowKernelArgs& a, int num_sms, cudaStream_t stream) {
  switch (a.conv.s) {
    case 1: return launch<KT, 1>(a, num_sms, stream);
    case 2: return launch<KT, 2>(a, num_sms, stream);
    case 3: return launch<KT, 3>(a, num_sms, stream);
    case 4: return launch<KT, 4>(a, num_sms, stream);
    case 5: return launch<KT, 5>(a, num_sms, stream);
    case 7: return launch<KT, 7>(a, num_sms, stream);
    case 8: return launch<KT, 8>(a, num_sms, stream);
    default: return launch<KT, 0>(a, num_sms, stream);
  }
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
  switch (shallow_filters_per_thread(a.jobs, p.k, num_sms)) {
    case 16: return launch_width<16>(a, num_sms, stream);
    case 8: return launch_width<8>(a, num_sms, stream);
    default: return launch_width<4>(a, num_sms, stream);
  }
}

}  // namespace winconv::im2win
