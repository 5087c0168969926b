// im2win transform kernels. Writes are contiguous runs of the output (one block per window row,
// consecutive threads on consecutive elements); reads come from at most R input rows per block
// and hit L1/L2. Index decomposition uses FastDivmod: with ~10 integer instructions per element
// the transform stays bound by memory, not by the integer pipe.
#include "cuda/common/fast_divmod.cuh"
#include "cuda/im2win/im2win_transform.h"
#include "cuda/im2win/reduction_digits.h"
#include "cuda/im2win/tap_mask.h"

namespace winconv::im2win {
namespace {

constexpr int kTransformThreads = 256;

struct WindowShape {
  int c, h, w, p, r, stride_h, pad_h, pad_w, w_padded;
  int64_t rows;        // NCHW: N*C*P rows of W'*R; NHWC: N*P rows of W'*R*C
  int row_elements;
  FastDivmod div_r, div_c, div_p, div_cp;
};

// NCHW: row (n, c, p) holds I_hat[n, c, p, w*R + u] = X'[n, c, p*s_h + u, w].
__global__ void im2win_window_nchw_kernel(const float* __restrict__ x, float* __restrict__ window, WindowShape s) {
  for (int64_t row = blockIdx.x; row < s.rows; row += gridDim.x) {
    const int64_t nc = row / s.p;  // (n*C + c)
    const int p = int(row - nc * s.p);
    const float* plane = x + nc * s.h * s.w;
    float* out = window + row * s.row_elements;
    for (int e = threadIdx.x; e < s.row_elements; e += blockDim.x) {
      uint32_t wp, u;
      s.div_r.divmod(uint32_t(e), wp, u);
      const int ih = p * s.stride_h + int(u) - s.pad_h, iw = int(wp) - s.pad_w;
      const bool inside = unsigned(ih) < unsigned(s.h) && unsigned(iw) < unsigned(s.w);
      out[e] = inside ? __ldg(plane + ih * s.w + iw) : 0.f;
    }
  }
}

// NHWC: row (n, p) holds I_hat[n, p, w, u, c] = X'[n, p*s_h + u, w, c].
__global__ void im2win_window_nhwc_kernel(const float* __restrict__ x, float* __restrict__ window, WindowShape s) {
  for (int64_t row = blockIdx.x; row < s.rows; row += gridDim.x) {
    const int64_t n = row / s.p;
    const int p = int(row - n * s.p);
    const float* image = x + n * s.h * s.w * s.c;
    float* out = window + row * s.row_elements;
    for (int e = threadIdx.x; e < s.row_elements; e += blockDim.x) {
      uint32_t t, c, wp, u;
      s.div_c.divmod(uint32_t(e), t, c);
      s.div_r.divmod(t, wp, u);
      const int ih = p * s.stride_h + int(u) - s.pad_h, iw = int(wp) - s.pad_w;
      const bool inside = unsigned(ih) < unsigned(s.h) && unsigned(iw) < unsigned(s.w);
      out[e] = inside ? __ldg(image + (int64_t(ih) * s.w + iw) * s.c + c) : 0.f;
    }
  }
}

struct RepackShape {
  int k, c, h, w, r, s, kg, kg_pad, n_pad;
  ReductionOrder order;
  bool tap_bits;  // the table carries the padded gathers' tap bits after its offsets
};

// Filter tap kk of `order` -> (c, u, v): the digits of kk, most significant first, are
// (c, u, v), (c, v, u), (u, v, c) or (v, u, c).
__device__ void reduction_tap(const RepackShape& s, int kk, int& c, int& u, int& v) {
  ReductionDigits d{};
  switch (s.order) {
    case ReductionOrder::kCUV: d = split_reduction(kk, s.r, s.s); c = d.hi; u = d.mid; v = d.lo; return;
    case ReductionOrder::kCVU: d = split_reduction(kk, s.s, s.r); c = d.hi; v = d.mid; u = d.lo; return;
    case ReductionOrder::kUVC: d = split_reduction(kk, s.s, s.c); u = d.hi; v = d.mid; c = d.lo; return;
    case ReductionOrder::kVUC: d = split_reduction(kk, s.r, s.c); v = d.hi; u = d.mid; c = d.lo; return;
  }
}

// One element of b per thread; the threads of column k = 0 also write the reduction table entry
// of their row when there is a table (the on-chip gathers read it), and with tap bits the entry's
// bits kg_pad further on.
__global__ void filter_repack_kernel(const float* __restrict__ w, float* __restrict__ b, int* __restrict__ table,
                                     RepackShape s) {
  const int64_t total = int64_t(s.kg_pad) * s.n_pad;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int kk = int(e / s.n_pad), k = int(e - int64_t(kk) * s.n_pad);
    int c = 0, u = 0, v = 0;
    if (kk < s.kg) reduction_tap(s, kk, c, u, v);
    // The user's filter is KCRS for NCHW and KRSC for NHWC.
    const bool nhwc = s.order == ReductionOrder::kUVC || s.order == ReductionOrder::kVUC;
    const int src = nhwc ? (u * s.s + v) * s.c + c : (c * s.r + u) * s.s + v;
    b[e] = k < s.k && kk < s.kg ? w[int64_t(k) * s.kg + src] : 0.f;
    if (table && k == 0) {
      table[kk] = kk < s.kg ? (nhwc ? (u * s.w + v) * s.c + c : (c * s.h + u) * s.w + v) : 0;
      if (s.tap_bits) table[s.kg_pad + kk] = int(kk < s.kg ? tap_bits(u, v) : kTapTailBit);
    }
  }
}

int grid_for(int64_t work, int per_block) {
  const int64_t blocks = (work + per_block - 1) / per_block;
  return int(blocks < 65536 * 16 ? blocks : 65536 * 16);
}

}  // namespace

cudaError_t launch_im2win_window(const Conv2dConfig& config, const float* x, float* window, cudaStream_t stream) {
  const Conv2dProblem& pb = config.problem;
  WindowShape s{};
  s.c = int(pb.c); s.h = int(pb.h); s.w = int(pb.w); s.p = int(pb.p()); s.r = int(pb.r);
  s.stride_h = int(pb.stride_h); s.pad_h = int(pb.pad_h); s.pad_w = int(pb.pad_w);
  s.w_padded = int(pb.w + 2 * pb.pad_w);
  s.div_r = FastDivmod(uint32_t(pb.r));
  s.div_c = FastDivmod(uint32_t(pb.c));
  if (config.layout == Layout::kNCHW) {
    s.rows = pb.n * pb.c * pb.p();
    s.row_elements = s.w_padded * s.r;
    im2win_window_nchw_kernel<<<grid_for(s.rows, 1), kTransformThreads, 0, stream>>>(x, window, s);
  } else {
    s.rows = pb.n * pb.p();
    s.row_elements = s.w_padded * s.r * s.c;
    im2win_window_nhwc_kernel<<<grid_for(s.rows, 1), kTransformThreads, 0, stream>>>(x, window, s);
  }
  return cudaGetLastError();
}

cudaError_t launch_filter_repack(const Conv2dConfig& config, ReductionOrder order, const float* w, float* b,
                                 int n_pad, int kg_pad, int* table, bool tap_bits, cudaStream_t stream) {
  const Conv2dProblem& pb = config.problem;
  RepackShape s{int(pb.k), int(pb.c), int(pb.h), int(pb.w), int(pb.r), int(pb.s), int(pb.c * pb.r * pb.s),
                kg_pad, n_pad, order, tap_bits};
  filter_repack_kernel<<<grid_for(int64_t(kg_pad) * n_pad, 256), 256, 0, stream>>>(w, b, table, s);
  return cudaGetLastError();
}

}  // namespace winconv::im2win
