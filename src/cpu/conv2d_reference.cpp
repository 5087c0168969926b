// The oracle every conv2d test compares against: the definition of the convolution, evaluated
// directly with double accumulation. Slow on purpose; no shortcut that could share a bug with
// the fast paths (no window tensor, no GEMM view).
#include <algorithm>
#include <thread>
#include <vector>

#include "common/conv2d_validate.h"
#include "cpu/start_thread.h"
#include "winconv/conv2d.h"

namespace winconv {
namespace {

// y_k[k] = sum_{c,r,s} x[n, c, p*sh + r - ph, q*sw + s - pw] * w[k, c, r, s], zero padding.
void reference_pixel(const Conv2dConfig& config, const float* x, const float* w, int64_t n, int64_t p, int64_t q,
                     double* y_k) {
  const Conv2dProblem& pb = config.problem;
  const bool nchw = config.layout == Layout::kNCHW;
  for (int64_t k = 0; k < pb.k; ++k) {
    double acc = 0.0;
    for (int64_t c = 0; c < pb.c; ++c)
      for (int64_t r = 0; r < pb.r; ++r) {
        const int64_t h = p * pb.stride_h + r - pb.pad_h;
        if (h < 0 || h >= pb.h) continue;
        for (int64_t s = 0; s < pb.s; ++s) {
          const int64_t ww = q * pb.stride_w + s - pb.pad_w;
          if (ww < 0 || ww >= pb.w) continue;
          const double xv = nchw ? x[((n * pb.c + c) * pb.h + h) * pb.w + ww] : x[((n * pb.h + h) * pb.w + ww) * pb.c + c];
          const double wv = nchw ? w[((k * pb.c + c) * pb.r + r) * pb.s + s] : w[((k * pb.r + r) * pb.s + s) * pb.c + c];
          acc += xv * wv;
        }
      }
    y_k[k] = acc;
  }
}

}  // namespace

Status conv2d_reference_pixel(const Conv2dConfig& config, const float* x, const float* w, int64_t n, int64_t p,
                              int64_t q, double* y_k) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  if (!x || !w || !y_k) return Status(StatusCode::kNullPointer, "conv2d_reference_pixel: x, w and y_k must be non-null");
  const Conv2dProblem& pb = config.problem;
  if (n < 0 || n >= pb.n || p < 0 || p >= pb.p() || q < 0 || q >= pb.q())
    return Status(StatusCode::kInvalidArgument, "conv2d_reference_pixel: (n, p, q) outside the output");
  reference_pixel(config, x, w, n, p, q, y_k);
  return Status::Ok();
}

Status conv2d_reference(const Conv2dConfig& config, const float* x, const float* w, double* y) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  if (!x || !w || !y) return Status(StatusCode::kNullPointer, "conv2d_reference: x, w and y must be non-null");
  const Conv2dProblem& pb = config.problem;
  const int64_t P = pb.p(), Q = pb.q();
  const bool nchw = config.layout == Layout::kNCHW;
  // Output rows are independent; threads only shorten the wait, the arithmetic is unchanged.
  const int64_t rows = pb.n * P;
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(rows, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) {
    start_or_run_inline(pool, [&, t] {
      std::vector<double> y_k(size_t(pb.k));
      for (int64_t row = t; row < rows; row += threads) {
        const int64_t n = row / P, p = row % P;
        for (int64_t q = 0; q < Q; ++q) {
          reference_pixel(config, x, w, n, p, q, y_k.data());
          for (int64_t k = 0; k < pb.k; ++k)
            y[nchw ? ((n * pb.k + k) * P + p) * Q + q : ((n * P + p) * Q + q) * pb.k + k] = y_k[size_t(k)];
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  return Status::Ok();
}

}  // namespace winconv
