// im2win convolution on the CPU: the path the benchmark runs without a GPU. The window tensor is
// built once; each output pixel then is a dot product of ONE contiguous window run (S*R for NCHW
// per channel, S*R*C for NHWC) with a filter row, which the compiler vectorizes. Output channels
// are blocked by kKBlock so each window run is loaded once per block of filters.
#include <algorithm>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/conv2d_validate.h"
#include "cpu/im2win_cpu.h"
#include "cpu/start_thread.h"

namespace winconv {
namespace {

constexpr int kKBlock = 8;

// Runs body(i) for i in [0, count) on `threads` threads, in contiguous chunks.
template <typename Body>
void parallel_for(int64_t count, int threads, Body body) {
  threads = int(std::max<int64_t>(1, std::min<int64_t>(threads, count)));
  if (threads == 1) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (count + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = t * chunk, end = std::min(count, begin + chunk);
    start_or_run_inline(pool, [=] {
      for (int64_t i = begin; i < end; ++i) body(i);
    });
  }
  for (auto& th : pool) th.join();
}

// acc[b] += dot(run, filt + b*filter_stride) for b < kb, over `len` contiguous elements.
inline void dot_block(const float* run, const float* filt, int64_t filter_stride, int64_t len,
                      int kb, float* acc) {
  for (int b = 0; b < kb; ++b) {
    const float* f = filt + b * filter_stride;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < len; ++j) sum += run[j] * f[j];
    acc[b] += sum;
  }
}

}  // namespace

int64_t im2win_window_elements(const Conv2dProblem& pb) {
  return pb.n * pb.c * pb.p() * (pb.w + 2 * pb.pad_w) * pb.r;
}

void im2win_transform_cpu(const Conv2dConfig& config, const float* x, float* window) {
  const Conv2dProblem& pb = config.problem;
  const int64_t P = pb.p(), Wp = pb.w + 2 * pb.pad_w, R = pb.r, C = pb.c;
  auto x_padded = [&](int64_t n, int64_t c, int64_t h, int64_t wp) -> float {
    const int64_t hh = h - pb.pad_h, ww = wp - pb.pad_w;
    if (hh < 0 || hh >= pb.h || ww < 0 || ww >= pb.w) return 0.f;
    return config.layout == Layout::kNCHW ? x[((n * C + c) * pb.h + hh) * pb.w + ww]
                                          : x[((n * pb.h + hh) * pb.w + ww) * C + c];
  };
  for (int64_t n = 0; n < pb.n; ++n)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t wp = 0; wp < Wp; ++wp)
          for (int64_t u = 0; u < R; ++u) {
            const float v = x_padded(n, c, p * pb.stride_h + u, wp);
            if (config.layout == Layout::kNCHW)
              window[((n * C + c) * P + p) * Wp * R + wp * R + u] = v;
            else
              window[(((n * P + p) * Wp + wp) * R + u) * C + c] = v;
          }
}

void im2win_filter_transpose_cpu(const Conv2dConfig& config, const float* w, float* wt) {
  const Conv2dProblem& pb = config.problem;
  const int64_t K = pb.k, C = pb.c, R = pb.r, S = pb.s;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s) {
          if (config.layout == Layout::kNCHW)
            wt[((k * C + c) * S + s) * R + r] = w[((k * C + c) * R + r) * S + s];
          else
            wt[((k * S + s) * R + r) * C + c] = w[((k * R + r) * S + s) * C + c];
        }
}

Status conv2d_forward_cpu_extra_bytes(const Conv2dConfig& config, size_t* bytes) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  if (!bytes) return Status(StatusCode::kNullPointer, "bytes is null");
  *bytes = sizeof(float) * size_t(im2win_window_elements(config.problem) + config.problem.w_elements());
  return Status::Ok();
}

Status conv2d_forward_cpu(const Conv2dConfig& config, const float* x, const float* w, float* y,
                          int threads) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  if (!x) return Status(StatusCode::kNullPointer, "x is null");
  if (!w) return Status(StatusCode::kNullPointer, "w is null");
  if (!y) return Status(StatusCode::kNullPointer, "y is null");
  if (threads < 0) return Status(StatusCode::kInvalidArgument, "threads must be >= 0");
  if (threads == 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));

  const Conv2dProblem& pb = config.problem;
  const int64_t P = pb.p(), Q = pb.q(), Wp = pb.w + 2 * pb.pad_w;
  const int64_t R = pb.r, S = pb.s, C = pb.c, K = pb.k;
  std::vector<float> window, wt;
  try {
    window.resize(size_t(im2win_window_elements(pb)));
    wt.resize(size_t(pb.w_elements()));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, "cannot allocate " + std::to_string(4 * im2win_window_elements(pb)) +
                                                " bytes of host memory for the window tensor");
  }
  im2win_transform_cpu(config, x, window.data());
  im2win_filter_transpose_cpu(config, w, wt.data());
  const bool nchw = config.layout == Layout::kNCHW;

  // One task per (n, p) output row: every pixel of the row reads the same window row.
  parallel_for(pb.n * P, threads, [&](int64_t row) {
    const int64_t n = row / P, p = row % P;
    float acc[kKBlock];
    for (int64_t q = 0; q < Q; ++q) {
      for (int64_t k0 = 0; k0 < K; k0 += kKBlock) {
        const int kb = int(std::min<int64_t>(kKBlock, K - k0));
        std::fill(acc, acc + kb, 0.f);
        if (nchw) {
          // Per channel, the window of (p, q) is S*R contiguous elements at q*s_w*R.
          for (int64_t c = 0; c < C; ++c) {
            const float* run = window.data() + ((n * C + c) * P + p) * Wp * R + q * pb.stride_w * R;
            dot_block(run, wt.data() + (k0 * C + c) * S * R, C * S * R, S * R, kb, acc);
          }
          for (int b = 0; b < kb; ++b) y[((n * K + k0 + b) * P + p) * Q + q] = acc[b];
        } else {
          // NHWC: the whole window is one run of S*R*C elements at q*s_w*R*C.
          const float* run = window.data() + ((n * P + p) * Wp + q * pb.stride_w) * R * C;
          dot_block(run, wt.data() + k0 * S * R * C, S * R * C, S * R * C, kb, acc);
          for (int b = 0; b < kb; ++b) y[((n * P + p) * Q + q) * K + k0 + b] = acc[b];
        }
      }
    }
  });
  return Status::Ok();
}

}  // namespace winconv
