// Argument checking for conv2d: every size, option and overflow case gets a message that names
// the argument, what was expected and what was given. Host-only; shared by the CPU and GPU paths.
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "common/conv2d_validate.h"
#include "winconv/conv2d.h"

namespace winconv {
namespace {

template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// a * b * ... without signed overflow; false when the product leaves int64.
bool checked_product(std::initializer_list<int64_t> factors, int64_t* out) {
  int64_t acc = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(acc, f, &acc)) return false;
  }
  *out = acc;
  return true;
}

Status check_positive(const char* name, int64_t value) {
  if (value >= 1) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, cat(name, " must be >= 1, got ", value));
}

}  // namespace

Status conv2d_validate(const Conv2dConfig& config) {
  const Conv2dProblem& pb = config.problem;
  const std::pair<const char*, int64_t> sizes[] = {
      {"n (batch)", pb.n}, {"c (input channels)", pb.c}, {"h (input height)", pb.h},
      {"w (input width)", pb.w}, {"k (output channels)", pb.k}, {"r (filter height)", pb.r},
      {"s (filter width)", pb.s}, {"stride_h", pb.stride_h}, {"stride_w", pb.stride_w}};
  for (const auto& [name, value] : sizes) {
    Status st = check_positive(name, value);
    if (!st.ok()) return st;
  }
  if (pb.pad_h < 0 || pb.pad_w < 0) {
    return Status(StatusCode::kInvalidArgument,
                  cat("padding must be >= 0, got pad_h=", pb.pad_h, " pad_w=", pb.pad_w));
  }
  if (pb.dilation_h != 1 || pb.dilation_w != 1) {
    return Status(StatusCode::kUnsupported,
                  cat("dilation other than 1 is not supported, got dilation_h=", pb.dilation_h,
                      " dilation_w=", pb.dilation_w));
  }
  if (pb.groups != 1) {
    return Status(StatusCode::kUnsupported,
                  cat("groups other than 1 is not supported, got groups=", pb.groups));
  }
  // Sizes this large overflow the padded-extent arithmetic below before anything else.
  const int64_t kDimLimit = int64_t(1) << 31;
  const std::pair<const char*, int64_t> dims[] = {
      {"n", pb.n}, {"c", pb.c}, {"h", pb.h}, {"w", pb.w}, {"k", pb.k}, {"r", pb.r}, {"s", pb.s},
      {"stride_h", pb.stride_h}, {"stride_w", pb.stride_w}, {"pad_h", pb.pad_h}, {"pad_w", pb.pad_w}};
  for (const auto& [name, value] : dims) {
    if (value >= kDimLimit) {
      return Status(StatusCode::kIndexOverflow,
                    cat(name, "=", value, " exceeds the supported maximum of 2^31-1"));
    }
  }
  if (pb.h + 2 * pb.pad_h < pb.r) {
    return Status(StatusCode::kInvalidArgument,
                  cat("output height would be < 1: filter height r=", pb.r,
                      " exceeds padded input height h+2*pad_h=", pb.h + 2 * pb.pad_h));
  }
  if (pb.w + 2 * pb.pad_w < pb.s) {
    return Status(StatusCode::kInvalidArgument,
                  cat("output width would be < 1: filter width s=", pb.s,
                      " exceeds padded input width w+2*pad_w=", pb.w + 2 * pb.pad_w));
  }
  if (config.precision != Precision::kFP32) {
    return Status(StatusCode::kUnsupported,
                  cat("precision ", precision_name(config.precision),
                      " is not implemented for conv2d yet (fp32 only)"));
  }
  if (config.layout != Layout::kNCHW && config.layout != Layout::kNHWC) {
    return Status(StatusCode::kInvalidArgument,
                  cat("layout must be kNCHW or kNHWC, got ", static_cast<int>(config.layout)));
  }
  if (config.algo != Conv2dAlgo::kAuto && config.algo != Conv2dAlgo::kMaterialized &&
      config.algo != Conv2dAlgo::kOnChip) {
    return Status(StatusCode::kInvalidArgument,
                  cat("algo must be kAuto, kMaterialized or kOnChip, got ", static_cast<int>(config.algo)));
  }
  return conv2d_check_index_ranges(config);
}

Status conv2d_check_index_ranges(const Conv2dConfig& config) {
  const Conv2dProblem& pb = config.problem;
  const int64_t p = pb.p(), q = pb.q();
  const int64_t wp = pb.w + 2 * pb.pad_w;
  const int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  // Kernels keep offsets inside one image (and the GEMM's M, N and K extents) in 32-bit
  // integers and step between images with 64-bit offsets, so only these must fit in int32.
  struct Extent {
    const char* what;
    std::initializer_list<int64_t> factors;
  };
  const Extent extents[] = {
      {"one input image c*h*w", {pb.c, pb.h, pb.w}},
      {"one output image k*p*q", {pb.k, p, q}},
      {"one window-tensor image c*p*(w+2*pad_w)*r", {pb.c, p, wp, pb.r}},
      {"the GEMM M = n*p*q", {pb.n, p, q}},
      {"the GEMM K = c*r*s", {pb.c, pb.r, pb.s}},
      {"the filter k*c*r*s", {pb.k, pb.c, pb.r, pb.s}},
  };
  for (const Extent& e : extents) {
    int64_t count = 0;
    if (!checked_product(e.factors, &count) || count > kInt32Max) {
      return Status(StatusCode::kIndexOverflow,
                    cat(e.what, " exceeds 2^31-1 elements; split the batch or the image"));
    }
  }
  // The GPU GEMM pads the reduction to whole 16-deep stages, and that padded depth is an int32.
  if (pb.c * pb.r * pb.s > kInt32Max - 15) {
    return Status(StatusCode::kIndexOverflow,
                  cat("the GEMM K = c*r*s = ", pb.c * pb.r * pb.s,
                      " exceeds 2^31-16 (the GPU path pads it to a multiple of 16)"));
  }
  // Input rows and columns are addressed as p*stride + u - pad (and likewise for q) in int32: the
  // padded extents, which bound those sums, must fit.
  if (pb.h + 2 * pb.pad_h > kInt32Max || pb.w + 2 * pb.pad_w > kInt32Max) {
    return Status(StatusCode::kIndexOverflow,
                  cat("the padded input h+2*pad_h = ", pb.h + 2 * pb.pad_h, " or w+2*pad_w = ", pb.w + 2 * pb.pad_w,
                      " exceeds 2^31-1"));
  }
  // The GPU GEMM pads N = k to a multiple of 4 (the repacked filter's rows), also an int32.
  if (pb.k > kInt32Max - 3) {
    return Status(StatusCode::kIndexOverflow,
                  cat("k (output channels) = ", pb.k, " exceeds 2^31-4 (the GPU path pads it to a multiple of 4)"));
  }
  // Whole tensors use 64-bit offsets but must still fit int64 in bytes.
  const Extent totals[] = {
      {"x", {pb.n, pb.c, pb.h, pb.w, 4}},
      {"y", {pb.n, pb.k, p, q, 4}},
      {"the window tensor", {pb.n, pb.c, p, wp, pb.r, 4}},
  };
  for (const Extent& e : totals) {
    int64_t count = 0;
    if (!checked_product(e.factors, &count)) {
      return Status(StatusCode::kIndexOverflow, cat("the byte size of ", e.what, " overflows 64 bits"));
    }
  }
  return Status::Ok();
}

Status conv2d_check_pointer(const char* name, const void* ptr, size_t alignment) {
  if (ptr == nullptr) return Status(StatusCode::kNullPointer, cat(name, " is null"));
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  if (addr % alignment != 0) {
    return Status(StatusCode::kMisalignedPointer,
                  cat(name, " must be aligned to ", alignment, " bytes, got address 0x", std::hex,
                      addr, " (", std::dec, addr % alignment, " bytes past a boundary)"));
  }
  return Status::Ok();
}

Status conv2d_check_call(const Conv2dConfig& config, const void* x, const void* w, const void* y) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  const std::pair<const char*, const void*> pointers[] = {{"x", x}, {"w", w}, {"y", y}};
  for (const auto& [name, ptr] : pointers) {
    st = conv2d_check_pointer(name, ptr, kConv2dPointerAlignment);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Conv2dAlgo conv2d_resolve_algo(const Conv2dConfig& config) {
  // Forming windows on chip never lost to writing and re-reading them through HBM on the layers
  // measured (docs/perf-notes.md), so it is the default.
  return config.algo == Conv2dAlgo::kAuto ? Conv2dAlgo::kOnChip : config.algo;
}

Status conv2d_select_algo(const Conv2dConfig& config, Conv2dAlgo* algo) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  if (!algo) return Status(StatusCode::kNullPointer, "algo is null");
  *algo = conv2d_resolve_algo(config);
  return Status::Ok();
}

}  // namespace winconv
