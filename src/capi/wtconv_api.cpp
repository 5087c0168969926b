// WTConv C++ API front-end: argument validation, workspace queries and the entry points.
// Host-only and compiled in every build; without CUDA the entry points validate their arguments
// and then report kNoDevice.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "cuda/wtconv/wtconv_plan.h"
#include "winconv/wtconv.h"
#if WINCONV_HAVE_CUDA
#include "cuda/cuda_status.h"
#include "cuda/wtconv/wtconv_launch.h"
#endif

namespace winconv {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Status invalid(const std::string& m) { return Status(StatusCode::kInvalidArgument, "wtconv: " + m); }

Status check_pointer(const void* ptr, size_t align, const char* name, bool required) {
  if (ptr == nullptr) {
    if (!required) return Status::Ok();
    return Status(StatusCode::kNullPointer, std::string("wtconv: ") + name + " must not be null");
  }
  if (reinterpret_cast<uintptr_t>(ptr) % align != 0)
    return Status(StatusCode::kMisalignedPointer, std::string("wtconv: ") + name + " must be aligned to " +
                                                      str(int64_t(align)) + " bytes, got address " +
                                                      str(int64_t(reinterpret_cast<uintptr_t>(ptr) % 4096)) +
                                                      " mod 4096");
  return Status::Ok();
}

Status check_params(const WtconvProblem& p, const WtconvParams& prm) {
  Status st;
  if (!(st = check_pointer(prm.base_weight, 4, "params.base_weight", true)).ok()) return st;
  if (!(st = check_pointer(prm.base_bias, 4, "params.base_bias", false)).ok()) return st;
  if (!(st = check_pointer(prm.base_scale, 4, "params.base_scale", true)).ok()) return st;
  for (int l = 0; l < int(p.levels); ++l) {
    const std::string w = "params.level_weight[" + std::to_string(l) + "]";
    const std::string s = "params.level_scale[" + std::to_string(l) + "]";
    if (!(st = check_pointer(prm.level_weight[l], 4, w.c_str(), true)).ok()) return st;
    if (!(st = check_pointer(prm.level_scale[l], 4, s.c_str(), true)).ok()) return st;
  }
  return Status::Ok();
}

// The largest stride the kernels' 32-bit index arithmetic takes.
constexpr int64_t kMaxKernelStride = INT_MAX / 64;

// Every stride >= max(height, width) keeps only the output pixel (0, 0). A stride past the
// kernels' range runs as the smallest such stride, so any stride >= 1 is accepted (a 1 x 1 map at
// stride 2^40 included); strides in range keep their own plans.
WtconvProblem with_reduced_stride(WtconvProblem p) {
  if (p.stride > kMaxKernelStride) p.stride = std::min(p.stride, std::max(p.height, p.width));
  return p;
}

// Validates `requested` and, when it is valid, gives the problem the library runs for it.
Status validated(const WtconvProblem& requested, WtconvProblem* problem) {
  Status st = wtconv_validate(requested);
  if (st.ok()) *problem = with_reduced_stride(requested);
  return st;
}

#if WINCONV_HAVE_CUDA
// A call that failed on a machine without a usable sm_90 device says so (NoDevice, Unsupported),
// as conv2d does; the device is looked at only then, not on every call's host path.
Status with_device_reason(Status st) {
  if (st.ok()) return st;
  const Status device = cuda_check_device(nullptr);
  return device.ok() ? st : device;
}
#endif

Status check_workspace(const void* ws, size_t bytes, size_t need) {
  if (bytes < need)
    return Status(StatusCode::kWorkspaceTooSmall,
                  "wtconv: workspace_bytes must be >= " + str(int64_t(need)) + ", got " + str(int64_t(bytes)));
  if (need > 0) return check_pointer(ws, 16, "workspace", true);
  return Status::Ok();
}

}  // namespace

Status wtconv_validate(const WtconvProblem& p) {
  if (p.batch < 1) return invalid("batch must be >= 1, got " + str(p.batch));
  if (p.channels < 1) return invalid("channels must be >= 1, got " + str(p.channels));
  if (p.height < 1) return invalid("height must be >= 1, got " + str(p.height));
  if (p.width < 1) return invalid("width must be >= 1, got " + str(p.width));
  if (p.kernel_size < 1 || p.kernel_size > kWtconvMaxKernelSize || p.kernel_size % 2 == 0)
    return invalid("kernel_size must be odd and in [1, " + str(kWtconvMaxKernelSize) + "], got " + str(p.kernel_size));
  if (p.levels < 1 || p.levels > kWtconvMaxLevels)
    return invalid("levels must be in [1, " + str(kWtconvMaxLevels) + "], got " + str(p.levels));
  if (p.stride < 1) return invalid("stride must be >= 1, got " + str(p.stride));
  if (p.precision != Precision::kFP32 && p.precision != Precision::kFP16 && p.precision != Precision::kBF16)
    return Status(StatusCode::kUnsupported, "wtconv: precision must be fp32, fp16 or bf16");
  // The kernels index inside a plane, the batch, channels and the grid with 32-bit ints; plane
  // offsets and whole-tensor offsets are 64-bit.
  const int64_t kMaxInt = INT_MAX;
  if (with_reduced_stride(p).stride > kMaxKernelStride)
    return invalid("stride must be <= " + str(kMaxKernelStride) + " or >= max(height, width), got " + str(p.stride));
  if (p.height > kMaxInt / 4 || p.width > kMaxInt / 4 || p.height * p.width > kMaxInt / 4)
    return Status(StatusCode::kIndexOverflow, "wtconv: height * width must be <= " + str(kMaxInt / 4) +
                                                  ", got " + str(p.height) + " x " + str(p.width));
  if (p.batch > kMaxInt || p.channels > kMaxInt / 8 || p.batch * p.channels > kMaxInt)
    return Status(StatusCode::kIndexOverflow, "wtconv: batch * channels must be <= " + str(kMaxInt) +
                                                  " (channels <= " + str(kMaxInt / 8) + "), got " + str(p.batch) +
                                                  " x " + str(p.channels));
  if (p.x_elements() > (int64_t(1) << 40))
    return Status(StatusCode::kIndexOverflow, "wtconv: batch*channels*height*width must be <= 2^40, got " +
                                                  str(p.x_elements()));
  return Status::Ok();
}

Status wtconv_forward_workspace_size(const WtconvProblem& requested, size_t* bytes) {
  if (bytes == nullptr) return Status(StatusCode::kNullPointer, "wtconv: bytes must not be null");
  WtconvProblem problem;
  Status st = validated(requested, &problem);
  if (!st.ok()) return st;
  *bytes = wtconv_detail::make_wtconv_run(problem, false).bytes;
  return Status::Ok();
}

Status wtconv_io_bytes(const WtconvProblem& requested, uint64_t* forward_bytes, uint64_t* backward_bytes) {
  if (forward_bytes == nullptr || backward_bytes == nullptr)
    return Status(StatusCode::kNullPointer, "wtconv: forward_bytes and backward_bytes must not be null");
  WtconvProblem problem;
  Status st = validated(requested, &problem);
  if (!st.ok()) return st;
  wtconv_detail::run_io_bytes(problem, forward_bytes, backward_bytes);
  return Status::Ok();
}

Status wtconv_backward_workspace_size(const WtconvProblem& requested, size_t* bytes) {
  if (bytes == nullptr) return Status(StatusCode::kNullPointer, "wtconv: bytes must not be null");
  WtconvProblem problem;
  Status st = validated(requested, &problem);
  if (!st.ok()) return st;
  *bytes = wtconv_detail::make_wtconv_run(problem, true).bytes;
  return Status::Ok();
}

Status wtconv_forward(const WtconvProblem& requested, const void* x, const WtconvParams& params, void* y,
                      void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  WtconvProblem problem;
  Status st = validated(requested, &problem);
  if (!st.ok()) return st;
  const size_t ab = precision_bytes(problem.precision);
  if (!(st = check_pointer(x, ab, "x", true)).ok()) return st;
  if (!(st = check_pointer(y, ab, "y", true)).ok()) return st;
  if (!(st = check_params(problem, params)).ok()) return st;
  const wtconv_detail::WtconvRun run = wtconv_detail::make_wtconv_run(problem, false);
  if (!(st = check_workspace(workspace, workspace_bytes, run.bytes)).ok()) return st;
#if WINCONV_HAVE_CUDA
  if (!(st = with_device_reason(cuda_check_no_pending_error())).ok()) return st;
  return with_device_reason(wtconv_detail::wtconv_forward_cuda(run, problem.precision, x, params, y, workspace, stream));
#else
  (void)stream;
  return Status(StatusCode::kNoDevice, "wtconv_forward: this build of winconv has no CUDA support");
#endif
}

Status wtconv_backward(const WtconvProblem& requested, const void* dy, const void* x, const WtconvParams& params,
                       void* dx, const WtconvParamGrads& grads, void* workspace, size_t workspace_bytes,
                       cudaStream_t stream) {
  WtconvProblem problem;
  Status st = validated(requested, &problem);
  if (!st.ok()) return st;
  const size_t ab = precision_bytes(problem.precision);
  if (!(st = check_pointer(dy, ab, "dy", true)).ok()) return st;
  if (!(st = check_pointer(x, ab, "x", true)).ok()) return st;
  if (!(st = check_pointer(dx, ab, "dx", true)).ok()) return st;
  if (!(st = check_params(problem, params)).ok()) return st;
  if (!(st = check_pointer(grads.base_weight, 4, "grads.base_weight", true)).ok()) return st;
  if (!(st = check_pointer(grads.base_bias, 4, "grads.base_bias", false)).ok()) return st;
  if (!(st = check_pointer(grads.base_scale, 4, "grads.base_scale", true)).ok()) return st;
  for (int l = 0; l < int(problem.levels); ++l) {
    const std::string w = "grads.level_weight[" + std::to_string(l) + "]";
    const std::string s = "grads.level_scale[" + std::to_string(l) + "]";
    if (!(st = check_pointer(grads.level_weight[l], 4, w.c_str(), true)).ok()) return st;
    if (!(st = check_pointer(grads.level_scale[l], 4, s.c_str(), true)).ok()) return st;
  }
  const wtconv_detail::WtconvRun run = wtconv_detail::make_wtconv_run(problem, true);
  if (!(st = check_workspace(workspace, workspace_bytes, run.bytes)).ok()) return st;
#if WINCONV_HAVE_CUDA
  if (!(st = with_device_reason(cuda_check_no_pending_error())).ok()) return st;
  return with_device_reason(
      wtconv_detail::wtconv_backward_cuda(run, problem.precision, dy, x, params, dx, grads, workspace, stream));
#else
  (void)stream;
  return Status(StatusCode::kNoDevice, "wtconv_backward: this build of winconv has no CUDA support");
#endif
}

}  // namespace winconv
