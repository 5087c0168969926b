// Explicit im2col + cuBLAS GEMM baseline for conv2d forward: the classic GEMM formulation with
// the column matrix materialized in device memory for the whole batch, both steps timed.
//   NCHW: col is [N][C*R*S][P*Q] (row (c*R + r)*S + s, matching w's KCRS order); one strided-
//         batched GEMM over images computes y_n[K][P*Q] = w[K][C*R*S] x col_n, i.e. NKPQ directly.
//   NHWC: col is [N*P*Q][R*S*C] (column (r*S + s)*C + c, matching w's KRSC order); one GEMM
//         computes y[N*P*Q][K] = col x w^T, i.e. NPQK directly.
// FP32 uses CUBLAS_COMPUTE_32F_PEDANTIC (no TF32); FP16/BF16 use CUBLAS_COMPUTE_32F (FP32
// accumulation on tensor cores), inputs and output in the problem's precision.
#include "baseline.h"

#ifndef WINCONV_HAVE_CUBLAS
#define WINCONV_HAVE_CUBLAS 0
#endif

#if WINCONV_HAVE_CUBLAS

#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_check.h"

namespace winconv::bench {
namespace {

constexpr size_t kColumnBufferLimitBytes = size_t(40) << 30;
// cuBLAS's recommended workspace on Hopper; set explicitly so extra_bytes() can count it.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

constexpr int kIm2colThreads = 256;
// Each thread copies this many consecutive column rows, so the divisions that locate a row are
// paid once per run of rows and the rest advance by increments.
constexpr int kIm2colRowsPerThread = 8;
constexpr int kMaxGridYZ = 65535;

// All extents in "words": the element for NCHW; for NHWC a word may pack several channels.
struct Im2colShape {
  int64_t n;
  int c, h, w;
  int r, s;
  int p, q;
  int stride_h, stride_w, pad_h, pad_w;
};

// im2col is a pure copy, so it runs on unsigned words of the element's size (or, in NHWC, of a
// whole vector of channels): all-zero bits are 0.0 in FP32, FP16 and BF16 alike.
template <typename Word>
__global__ void __launch_bounds__(kIm2colThreads)
    im2col_nchw_kernel(const Word* __restrict__ x, Word* __restrict__ col, Im2colShape shape) {
  const int pq_count = shape.p * shape.q;
  // threadIdx.x runs along p*q: the contiguous dimension of a column row, so stores coalesce
  // and, for stride 1, loads of neighbouring outputs are neighbouring inputs.
  const int pq = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (pq >= pq_count) return;
  const int p = pq / shape.q;
  const int q = pq - p * shape.q;
  const int h_origin = p * shape.stride_h - shape.pad_h;
  const int w_origin = q * shape.stride_w - shape.pad_w;
  const int rs_count = shape.r * shape.s;
  const int crs_count = shape.c * rs_count;
  const int64_t plane = int64_t(shape.h) * shape.w;

  for (int64_t n = blockIdx.z; n < shape.n; n += gridDim.z) {
    for (int64_t run = int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
         run * kIm2colRowsPerThread < crs_count; run += int64_t(gridDim.y) * blockDim.y) {
      const int crs_begin = int(run * kIm2colRowsPerThread);
      const int rows = min(kIm2colRowsPerThread, crs_count - crs_begin);
      int c = crs_begin / rs_count;
      const int rs = crs_begin - c * rs_count;
      int r = rs / shape.s;
      int s = rs - r * shape.s;
      const Word* x_plane = x + (n * shape.c + c) * plane;
      Word* out = col + (n * crs_count + crs_begin) * int64_t(pq_count) + pq;
      for (int i = 0; i < rows; ++i) {
        const int ih = h_origin + r;
        const int iw = w_origin + s;
        Word value{};
        if (unsigned(ih) < unsigned(shape.h) && unsigned(iw) < unsigned(shape.w)) {
          value = x_plane[int64_t(ih) * shape.w + iw];
        }
        *out = value;
        out += pq_count;
        if (++s == shape.s) {
          s = 0;
          if (++r == shape.r) {
            r = 0;
            x_plane += plane;  // next input channel
          }
        }
      }
    }
  }
}

template <typename Word>
__global__ void __launch_bounds__(kIm2colThreads)
    im2col_nhwc_kernel(const Word* __restrict__ x, Word* __restrict__ col, Im2colShape shape) {
  const int sc_count = shape.s * shape.c;
  const int rsc_count = shape.r * sc_count;
  // threadIdx.x runs along (r, s, c): for a fixed r the S*C words of a row are contiguous in x
  // as well as in col, so both loads and stores coalesce.
  const int j = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (j >= rsc_count) return;
  const int r = j / sc_count;
  const int sc = j - r * sc_count;
  const int s = sc / shape.c;
  const int c = sc - s * shape.c;
  const int pq_count = shape.p * shape.q;
  const int64_t npq_count = shape.n * pq_count;

  for (int64_t run = int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
       run * kIm2colRowsPerThread < npq_count; run += int64_t(gridDim.y) * blockDim.y) {
    const int64_t npq_begin = run * kIm2colRowsPerThread;
    const int rows = int(min(int64_t(kIm2colRowsPerThread), npq_count - npq_begin));
    int64_t n = npq_begin / pq_count;
    const int pq = int(npq_begin - n * pq_count);
    int p = pq / shape.q;
    int q = pq - p * shape.q;
    Word* out = col + npq_begin * rsc_count + j;
    for (int i = 0; i < rows; ++i) {
      const int ih = p * shape.stride_h - shape.pad_h + r;
      const int iw = q * shape.stride_w - shape.pad_w + s;
      Word value{};
      if (unsigned(ih) < unsigned(shape.h) && unsigned(iw) < unsigned(shape.w)) {
        value = x[((n * shape.h + ih) * shape.w + iw) * shape.c + c];
      }
      *out = value;
      out += rsc_count;
      if (++q == shape.q) {
        q = 0;
        if (++p == shape.p) {
          p = 0;
          ++n;
        }
      }
    }
  }
}

// threadIdx.x covers the contiguous extent (rounded up to a warp, at most the whole block);
// the rest of the block takes further rows, so short rows (7x7 outputs, C = 3) waste few lanes.
dim3 im2col_block(int64_t contiguous_extent) {
  const int x = int(std::min<int64_t>(kIm2colThreads, (contiguous_extent + 31) / 32 * 32));
  return dim3(unsigned(x), unsigned(kIm2colThreads / x));
}

unsigned grid_extent(int64_t work, int64_t per_block, int64_t cap) {
  return unsigned(std::max<int64_t>(1, std::min(cap, (work + per_block - 1) / per_block)));
}

template <typename Word>
void launch_im2col_nchw(const void* x, void* col, const Im2colShape& shape, cudaStream_t stream) {
  const int64_t pq_count = int64_t(shape.p) * shape.q;
  const int64_t crs_count = int64_t(shape.c) * shape.r * shape.s;
  const dim3 block = im2col_block(pq_count);
  const dim3 grid(grid_extent(pq_count, block.x, INT_MAX),
                  grid_extent(crs_count, int64_t(block.y) * kIm2colRowsPerThread, kMaxGridYZ),
                  grid_extent(shape.n, 1, kMaxGridYZ));
  im2col_nchw_kernel<Word><<<grid, block, 0, stream>>>(static_cast<const Word*>(x),
                                                        static_cast<Word*>(col), shape);
  throw_on_launch_error("im2col_nchw_kernel");
}

template <typename Word>
void launch_im2col_nhwc(const void* x, void* col, const Im2colShape& shape, cudaStream_t stream) {
  const int64_t rsc_count = int64_t(shape.r) * shape.s * shape.c;
  const int64_t npq_count = shape.n * shape.p * shape.q;
  const dim3 block = im2col_block(rsc_count);
  const dim3 grid(grid_extent(rsc_count, block.x, INT_MAX),
                  grid_extent(npq_count, int64_t(block.y) * kIm2colRowsPerThread, kMaxGridYZ));
  im2col_nhwc_kernel<Word><<<grid, block, 0, stream>>>(static_cast<const Word*>(x),
                                                        static_cast<Word*>(col), shape);
  throw_on_launch_error("im2col_nhwc_kernel");
}

void throw_on_cublas_error(cublasStatus_t status, const std::string& context) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(context + ": " + cublasGetStatusString(status));
}

size_t element_bytes(Precision precision) { return precision == Precision::kFP32 ? 4 : 2; }

cudaDataType_t cublas_data_type(Precision precision) {
  switch (precision) {
    case Precision::kFP32: return CUDA_R_32F;
    case Precision::kFP16: return CUDA_R_16F;
    case Precision::kBF16: return CUDA_R_16BF;
  }
  throw std::runtime_error("unknown precision");
}

class Im2colCublasConv final : public Conv2dImpl {
 public:
  ~Im2colCublasConv() override {
    release_buffers();
    if (handle_ != nullptr) cublasDestroy(handle_);
  }

  std::string name() const override { return "im2col_cublas"; }

  bool prepare(const Conv2dConfig& config, const void* /*x*/, const void* /*w*/, void* /*y*/,
               std::string* why) override {
    try {
      release_buffers();
      config_ = config;
      check_sizes();
      const Conv2dProblem& pb = config.problem;
      const int64_t gemm_k = pb.c * pb.r * pb.s;
      column_bytes_ = size_t(pb.n * pb.p() * pb.q()) * size_t(gemm_k) * element_bytes(config.precision);
      if (column_bytes_ > kColumnBufferLimitBytes) {
        throw std::runtime_error("the column matrix would take " + std::to_string(column_bytes_) +
                                 " bytes, over the 40 GiB limit");
      }
      if (handle_ == nullptr) throw_on_cublas_error(cublasCreate(&handle_), "cublasCreate");
      throw_on_cuda_error(cudaMalloc(&column_, column_bytes_),
                          "cudaMalloc(column matrix of " + std::to_string(column_bytes_) + " bytes)");
      throw_on_cuda_error(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes),
                          "cudaMalloc(cuBLAS workspace)");
      return true;
    } catch (const std::exception& e) {
      if (why != nullptr) *why = name() + ": " + e.what();
      release_buffers();
      return false;
    }
  }

  size_t extra_bytes() const override {
    return column_ != nullptr ? column_bytes_ + kCublasWorkspaceBytes : 0;
  }

  void run(const void* x, const void* w, void* y, cudaStream_t stream) override {
    if (column_ == nullptr) throw std::runtime_error(name() + ": run() before a successful prepare()");
    enqueue_im2col(x, stream);
    enqueue_gemm(w, y, stream);
  }

  std::string detail() const override {
    const Conv2dProblem& pb = config_.problem;
    const int64_t crs = pb.c * pb.r * pb.s;
    if (config_.layout == Layout::kNCHW) {
      return "strided-batched gemm m=" + std::to_string(pb.p() * pb.q()) + " n=" +
             std::to_string(pb.k) + " k=" + std::to_string(crs) + " batch=" + std::to_string(pb.n) +
             " column_bytes=" + std::to_string(column_bytes_) +
             " cublas_workspace=" + std::to_string(kCublasWorkspaceBytes);
    }
    return "gemm m=" + std::to_string(pb.k) + " n=" + std::to_string(pb.n * pb.p() * pb.q()) +
           " k=" + std::to_string(crs) + " column_bytes=" + std::to_string(column_bytes_) +
           " cublas_workspace=" + std::to_string(kCublasWorkspaceBytes);
  }

 private:
  // The kernels index rows and GEMM dimensions with int (cuBLAS takes int m, n, k, ld and batch).
  void check_sizes() const {
    const Conv2dProblem& pb = config_.problem;
    check_baseline_problem(pb,
                           {pb.n, pb.k, pb.h + 2 * pb.pad_h, pb.w + 2 * pb.pad_w, pb.stride_h, pb.stride_w,
                            pb.p() * pb.q(), pb.c * pb.r * pb.s, pb.n * pb.p() * pb.q()},
                           "the im2col kernels / cuBLAS");
  }

  Im2colShape shape_in_words(int64_t channels_per_word) const {
    const Conv2dProblem& pb = config_.problem;
    return Im2colShape{pb.n,          int(pb.c / channels_per_word),
                       int(pb.h),     int(pb.w),
                       int(pb.r),     int(pb.s),
                       int(pb.p()),   int(pb.q()),
                       int(pb.stride_h), int(pb.stride_w),
                       int(pb.pad_h), int(pb.pad_w)};
  }

  void enqueue_im2col(const void* x, cudaStream_t stream) {
    const size_t elem = element_bytes(config_.precision);
    if (config_.layout == Layout::kNCHW) {
      const Im2colShape shape = shape_in_words(1);
      if (elem == 4) {
        launch_im2col_nchw<uint32_t>(x, column_, shape, stream);
      } else {
        launch_im2col_nchw<uint16_t>(x, column_, shape, stream);
      }
      return;
    }
    // NHWC: copy whole groups of channels per thread with the widest word that divides a pixel's
    // channel run and that x's address allows (the column buffer is cudaMalloc-aligned and its
    // rows are whole pixel runs, so it is at least as aligned).
    const size_t pixel_bytes = size_t(config_.problem.c) * elem;
    const uintptr_t x_address = reinterpret_cast<uintptr_t>(x);
    size_t word = 16;
    while (word > elem && (pixel_bytes % word != 0 || x_address % word != 0)) word /= 2;
    const Im2colShape shape = shape_in_words(int64_t(word / elem));
    switch (word) {
      case 16: launch_im2col_nhwc<uint4>(x, column_, shape, stream); break;
      case 8: launch_im2col_nhwc<uint2>(x, column_, shape, stream); break;
      case 4: launch_im2col_nhwc<uint32_t>(x, column_, shape, stream); break;
      default: launch_im2col_nhwc<uint16_t>(x, column_, shape, stream); break;
    }
  }

  void enqueue_gemm(const void* w, void* y, cudaStream_t stream) {
    // cublasSetStream resets the workspace to cuBLAS's default pool, so set ours after it.
    throw_on_cublas_error(cublasSetStream(handle_, stream), "cublasSetStream");
    throw_on_cublas_error(cublasSetWorkspace(handle_, cublas_workspace_, kCublasWorkspaceBytes),
                          "cublasSetWorkspace");
    const Conv2dProblem& pb = config_.problem;
    const cudaDataType_t type = cublas_data_type(config_.precision);
    const cublasComputeType_t compute = config_.precision == Precision::kFP32
                                            ? CUBLAS_COMPUTE_32F_PEDANTIC
                                            : CUBLAS_COMPUTE_32F;
    const float alpha = 1.0f, beta = 0.0f;  // FLOAT scaling: both compute types are 32F
    const int64_t pq = pb.p() * pb.q();
    const int64_t crs = pb.c * pb.r * pb.s;

    // cuBLAS is column-major; a row-major [rows][cols] matrix is a column-major cols x rows one.
    if (config_.layout == Layout::kNCHW) {
      // Per image, column-major: y_n (PQ x K, ld PQ) = col_n (PQ x CRS, ld PQ) * w (CRS x K, ld CRS).
      throw_on_cublas_error(
          cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, int(pq), int(pb.k), int(crs),
                                     &alpha, column_, type, int(pq), crs * pq, w, type, int(crs),
                                     0, &beta, y, type, int(pq), pb.k * pq, int(pb.n), compute,
                                     CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx (im2col_cublas, nchw)");
    } else {
      // Column-major: y (K x NPQ, ld K) = w^T (w stored RSC x K, ld RSC, transposed)
      //                                   * col (RSC x NPQ, ld RSC).
      const int64_t npq = pb.n * pq;
      throw_on_cublas_error(
          cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, int(pb.k), int(npq), int(crs), &alpha, w,
                       type, int(crs), column_, type, int(crs), &beta, y, type, int(pb.k), compute,
                       CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx (im2col_cublas, nhwc)");
    }
  }

  void release_buffers() {
    if (column_ != nullptr) cudaFree(column_);
    if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);
    column_ = nullptr;
    cublas_workspace_ = nullptr;
    column_bytes_ = 0;
  }

  Conv2dConfig config_;
  cublasHandle_t handle_ = nullptr;
  void* column_ = nullptr;
  size_t column_bytes_ = 0;
  void* cublas_workspace_ = nullptr;
};

}  // namespace

std::unique_ptr<Conv2dImpl> make_im2col_cublas(std::string* /*missing*/) {
  return std::make_unique<Im2colCublasConv>();
}

}  // namespace winconv::bench

#else  // !WINCONV_HAVE_CUBLAS

namespace winconv::bench {

std::unique_ptr<Conv2dImpl> make_im2col_cublas(std::string* missing) {
  if (missing != nullptr) *missing = "cuBLAS";
  return nullptr;
}

}  // namespace winconv::bench

#endif  // WINCONV_HAVE_CUBLAS
