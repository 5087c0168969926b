// cuDNN baselines for conv2d forward, through cuDNN's legacy convolution API:
//   cudnn_best:     the fastest algorithm cudnnFindConvolutionForwardAlgorithmEx measures on the
//                   caller's own buffers (8 GiB workspace cap), then run with exactly its workspace.
//   cudnn_implicit: CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, which needs no workspace.
// FP32 runs with CUDNN_FMA_MATH so TF32 tensor cores can never be used; FP16/BF16 run with
// CUDNN_TENSOR_OP_MATH and FP32 compute (accumulation) type.
#include "baseline.h"

#ifndef WINCONV_HAVE_CUDNN
#define WINCONV_HAVE_CUDNN 0
#endif

#if WINCONV_HAVE_CUDNN

#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_check.h"

namespace winconv::bench {
namespace {

constexpr size_t kFindWorkspaceCapBytes = size_t(8) << 30;

void throw_on_cudnn_error(cudnnStatus_t status, const std::string& context) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::string message = context + ": " + cudnnGetErrorString(status);
  // cuDNN 9 keeps a more specific explanation (which check failed) per thread.
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  if (detail[0] != '\0') message += std::string(" [") + detail + "]";
  throw std::runtime_error(message);
}

const char* fwd_algo_name(cudnnConvolutionFwdAlgo_t algo) {
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "UNKNOWN";
  }
}

const char* math_type_name(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_DEFAULT_MATH: return "DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH: return "TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "FMA_MATH";
    default: return "UNKNOWN_MATH";
  }
}

cudnnDataType_t cudnn_data_type(Precision precision) {
  switch (precision) {
    case Precision::kFP32: return CUDNN_DATA_FLOAT;
    case Precision::kFP16: return CUDNN_DATA_HALF;
    case Precision::kBF16: return CUDNN_DATA_BFLOAT16;
  }
  throw std::runtime_error("unknown precision");
}

// cuDNN's 4-D descriptors take int sizes and compute int strides, so every size and every
// per-image element count must fit an int.
void check_fits_cudnn_descriptors(const Conv2dProblem& pb) {
  check_baseline_problem(pb,
                         {pb.n, pb.c, pb.h, pb.w, pb.k, pb.r, pb.s, pb.p(), pb.q(), pb.stride_h, pb.stride_w,
                          pb.pad_h, pb.pad_w, pb.c * pb.h * pb.w, pb.k * pb.p() * pb.q(), pb.c * pb.r * pb.s},
                         "cuDNN's descriptors");
}

class CudnnConv final : public Conv2dImpl {
 public:
  enum class Mode { kFastestFound, kImplicitGemm };

  explicit CudnnConv(Mode mode) : mode_(mode) {}

  ~CudnnConv() override {
    release_problem_state();
    if (handle_ != nullptr) cudnnDestroy(handle_);
  }

  std::string name() const override {
    return mode_ == Mode::kFastestFound ? "cudnn_best" : "cudnn_implicit";
  }

  bool prepare(const Conv2dConfig& config, const void* x, const void* w, void* y,
               std::string* why) override {
    try {
      release_problem_state();
      describe_problem(config);
      if (mode_ == Mode::kFastestFound) {
        choose_fastest_found(x, w, y);
      } else {
        choose_implicit_gemm();
      }
      allocate_workspace();
      run_once_to_confirm_support(x, w, y);
      return true;
    } catch (const std::exception& e) {
      if (why != nullptr) *why = name() + ": " + e.what();
      release_problem_state();
      return false;
    }
  }

  size_t extra_bytes() const override { return workspace_bytes_; }

  void run(const void* x, const void* w, void* y, cudaStream_t stream) override {
    if (conv_desc_ == nullptr) throw std::runtime_error(name() + ": run() before a successful prepare()");
    throw_on_cudnn_error(cudnnSetStream(handle_, stream), name() + ": cudnnSetStream");
    enqueue_forward(x, w, y);
  }

  std::string detail() const override { return detail_; }

 private:
  void describe_problem(const Conv2dConfig& config) {
    const Conv2dProblem& pb = config.problem;
    check_fits_cudnn_descriptors(pb);
    precision_ = config.precision;
    if (handle_ == nullptr) throw_on_cudnn_error(cudnnCreate(&handle_), "cudnnCreate");
    // Find and the confirming run in prepare() go to the legacy default stream; run() re-targets.
    throw_on_cudnn_error(cudnnSetStream(handle_, nullptr), "cudnnSetStream");

    const cudnnDataType_t dtype = cudnn_data_type(config.precision);
    // NCHW: x NCHW, w KCRS, y NKPQ. NHWC: x NHWC, w KRSC, y NPQK (cuDNN's NHWC filter format).
    const cudnnTensorFormat_t format =
        config.layout == Layout::kNHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;

    throw_on_cudnn_error(cudnnCreateTensorDescriptor(&x_desc_), "cudnnCreateTensorDescriptor(x)");
    throw_on_cudnn_error(cudnnSetTensor4dDescriptor(x_desc_, format, dtype, int(pb.n), int(pb.c),
                                                    int(pb.h), int(pb.w)),
                         "cudnnSetTensor4dDescriptor(x)");
    throw_on_cudnn_error(cudnnCreateFilterDescriptor(&w_desc_), "cudnnCreateFilterDescriptor(w)");
    throw_on_cudnn_error(cudnnSetFilter4dDescriptor(w_desc_, dtype, format, int(pb.k), int(pb.c),
                                                    int(pb.r), int(pb.s)),
                         "cudnnSetFilter4dDescriptor(w)");
    throw_on_cudnn_error(cudnnCreateConvolutionDescriptor(&conv_desc_),
                         "cudnnCreateConvolutionDescriptor");
    // Compute type FLOAT for every precision: FP32 accumulation for FP16/BF16 too.
    throw_on_cudnn_error(
        cudnnSetConvolution2dDescriptor(conv_desc_, int(pb.pad_h), int(pb.pad_w), int(pb.stride_h),
                                        int(pb.stride_w), 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
    requested_math_ = config.precision == Precision::kFP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    throw_on_cudnn_error(cudnnSetConvolutionMathType(conv_desc_, requested_math_),
                         "cudnnSetConvolutionMathType");

    int n = 0, k = 0, p = 0, q = 0;
    throw_on_cudnn_error(
        cudnnGetConvolution2dForwardOutputDim(conv_desc_, x_desc_, w_desc_, &n, &k, &p, &q),
        "cudnnGetConvolution2dForwardOutputDim");
    if (n != pb.n || k != pb.k || p != pb.p() || q != pb.q()) {
      throw std::runtime_error("cuDNN's output shape " + std::to_string(n) + "x" +
                               std::to_string(k) + "x" + std::to_string(p) + "x" +
                               std::to_string(q) + " differs from the problem's " +
                               std::to_string(pb.n) + "x" + std::to_string(pb.k) + "x" +
                               std::to_string(pb.p()) + "x" + std::to_string(pb.q()));
    }
    throw_on_cudnn_error(cudnnCreateTensorDescriptor(&y_desc_), "cudnnCreateTensorDescriptor(y)");
    throw_on_cudnn_error(cudnnSetTensor4dDescriptor(y_desc_, format, dtype, int(pb.n), int(pb.k),
                                                    int(pb.p()), int(pb.q())),
                         "cudnnSetTensor4dDescriptor(y)");
  }

  // The Find workspace is the largest any algorithm asks for, capped at 8 GiB; it lives only for
  // the search. When the device cannot hold it, the cap is halved until it fits, and detail() says so.
  void choose_fastest_found(const void* x, const void* w, void* y) {
    int max_count = 0;
    throw_on_cudnn_error(cudnnGetConvolutionForwardAlgorithmMaxCount(handle_, &max_count),
                         "cudnnGetConvolutionForwardAlgorithmMaxCount");
    if (max_count <= 0) max_count = int(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);

    size_t largest_request = 0;
    for (int a = 0; a < int(CUDNN_CONVOLUTION_FWD_ALGO_COUNT); ++a) {
      size_t bytes = 0;
      // Algorithms that do not support this configuration answer with an error: skip them.
      if (cudnnGetConvolutionForwardWorkspaceSize(handle_, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                  cudnnConvolutionFwdAlgo_t(a), &bytes) ==
          CUDNN_STATUS_SUCCESS) {
        largest_request = std::max(largest_request, bytes);
      }
    }
    size_t find_bytes = std::min(largest_request, kFindWorkspaceCapBytes);
    void* find_workspace = nullptr;
    while (find_bytes > 0) {
      if (cudaMalloc(&find_workspace, find_bytes) == cudaSuccess) break;
      cudaGetLastError();  // clear the allocation failure; try a smaller search workspace
      find_workspace = nullptr;
      find_bytes /= 2;
    }

    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max_count));
    int returned = 0;
    const cudnnStatus_t find_status = cudnnFindConvolutionForwardAlgorithmEx(
        handle_, x_desc_, x, w_desc_, w, conv_desc_, y_desc_, y, max_count, &returned,
        perf.data(), find_workspace, find_bytes);
    const cudaError_t free_status = find_workspace ? cudaFree(find_workspace) : cudaSuccess;
    throw_on_cudnn_error(find_status, "cudnnFindConvolutionForwardAlgorithmEx");
    throw_on_cuda_error(free_status, "cudaFree(find workspace)");

    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    std::string rejected;
    for (int i = 0; i < returned; ++i) {
      const cudnnConvolutionFwdAlgoPerf_t& candidate = perf[size_t(i)];
      const bool tensor_op_math = candidate.mathType == CUDNN_TENSOR_OP_MATH ||
                                  candidate.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
      if (candidate.status != CUDNN_STATUS_SUCCESS) {
        rejected += std::string(" ") + fwd_algo_name(candidate.algo) + "=" +
                    cudnnGetErrorString(candidate.status);
        continue;
      }
      // FP32 must never run on TF32 tensor cores.
      if (precision_ == Precision::kFP32 && tensor_op_math) {
        rejected += std::string(" ") + fwd_algo_name(candidate.algo) + "=tensor-op-math";
        continue;
      }
      if (best == nullptr || candidate.time < best->time) best = &candidate;
    }
    if (best == nullptr) {
      throw std::runtime_error("no forward algorithm succeeded in Find (find workspace " +
                               std::to_string(find_bytes) + " bytes):" + rejected);
    }
    algo_ = best->algo;
    found_workspace_bytes_ = best->memory;
    // Run with the math type the algorithm was timed with (an algorithm without tensor-core
    // kernels is reported with DEFAULT_MATH). FP32 keeps FMA_MATH: DEFAULT_MATH would allow TF32.
    chosen_math_ = precision_ == Precision::kFP32 ? requested_math_ : best->mathType;
    throw_on_cudnn_error(cudnnSetConvolutionMathType(conv_desc_, chosen_math_),
                         "cudnnSetConvolutionMathType(chosen)");

    char find_summary[160];
    std::snprintf(find_summary, sizeof(find_summary), " find_ms=%.4f find_workspace=%zu%s",
                  double(best->time), find_bytes,
                  find_bytes < std::min(largest_request, kFindWorkspaceCapBytes)
                      ? " (reduced: device could not hold the cap)"
                      : "");
    find_summary_ = find_summary;
  }

  void choose_implicit_gemm() {
    algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    chosen_math_ = requested_math_;
    found_workspace_bytes_ = 0;
  }

  // Exactly what the chosen algorithm needs under the math type it runs with.
  void allocate_workspace() {
    size_t bytes = 0;
    throw_on_cudnn_error(cudnnGetConvolutionForwardWorkspaceSize(handle_, x_desc_, w_desc_,
                                                                 conv_desc_, y_desc_, algo_, &bytes),
                         std::string("cudnnGetConvolutionForwardWorkspaceSize(") +
                             fwd_algo_name(algo_) + ")");
    bytes = std::max(bytes, found_workspace_bytes_);
    if (bytes > 0) {
      throw_on_cuda_error(cudaMalloc(&workspace_, bytes),
                          "cudaMalloc(workspace of " + std::to_string(bytes) + " bytes)");
    }
    workspace_bytes_ = bytes;
    detail_ = "algo=" + std::to_string(int(algo_)) + " " + fwd_algo_name(algo_) +
              " math=" + math_type_name(chosen_math_) +
              " workspace=" + std::to_string(workspace_bytes_) + find_summary_;
  }

  // Some unsupported configurations only surface when the forward call executes; finding out
  // here turns them into a skipped row instead of a failed timing run.
  void run_once_to_confirm_support(const void* x, const void* w, void* y) {
    enqueue_forward(x, w, y);
    throw_on_cuda_error(cudaDeviceSynchronize(), name() + ": confirming forward run");
  }

  void enqueue_forward(const void* x, const void* w, void* y) {
    const float alpha = 1.0f, beta = 0.0f;  // FLOAT scaling for every data type (FP32 compute)
    throw_on_cudnn_error(
        cudnnConvolutionForward(handle_, &alpha, x_desc_, x, w_desc_, w, conv_desc_, algo_,
                                workspace_, workspace_bytes_, &beta, y_desc_, y),
        name() + ": cudnnConvolutionForward(" + fwd_algo_name(algo_) + ")");
  }

  void release_problem_state() {
    if (workspace_ != nullptr) cudaFree(workspace_);
    workspace_ = nullptr;
    workspace_bytes_ = 0;
    found_workspace_bytes_ = 0;
    if (conv_desc_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc_);
    if (w_desc_ != nullptr) cudnnDestroyFilterDescriptor(w_desc_);
    if (x_desc_ != nullptr) cudnnDestroyTensorDescriptor(x_desc_);
    if (y_desc_ != nullptr) cudnnDestroyTensorDescriptor(y_desc_);
    conv_desc_ = nullptr;
    w_desc_ = nullptr;
    x_desc_ = nullptr;
    y_desc_ = nullptr;
    detail_.clear();
    find_summary_.clear();
  }

  Mode mode_;
  Precision precision_ = Precision::kFP32;
  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t x_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnTensorDescriptor_t y_desc_ = nullptr;
  cudnnMathType_t requested_math_ = CUDNN_FMA_MATH;
  cudnnMathType_t chosen_math_ = CUDNN_FMA_MATH;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t found_workspace_bytes_ = 0;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::string find_summary_;
  std::string detail_;
};

}  // namespace

std::unique_ptr<Conv2dImpl> make_cudnn_best(std::string* /*missing*/) {
  return std::make_unique<CudnnConv>(CudnnConv::Mode::kFastestFound);
}

std::unique_ptr<Conv2dImpl> make_cudnn_implicit(std::string* /*missing*/) {
  return std::make_unique<CudnnConv>(CudnnConv::Mode::kImplicitGemm);
}

}  // namespace winconv::bench

#else  // !WINCONV_HAVE_CUDNN

namespace winconv::bench {

std::unique_ptr<Conv2dImpl> make_cudnn_best(std::string* missing) {
  if (missing != nullptr) *missing = "cuDNN";
  return nullptr;
}

std::unique_ptr<Conv2dImpl> make_cudnn_implicit(std::string* missing) {
  if (missing != nullptr) *missing = "cuDNN";
  return nullptr;
}

}  // namespace winconv::bench

#endif  // WINCONV_HAVE_CUDNN
