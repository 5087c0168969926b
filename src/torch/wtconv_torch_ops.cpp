// PyTorch operator winconv::wtconv2d_eager: the fused WTConv kernels with their autograd formula,
// allocations and launches all in C++.
//
// Why it exists: at the WTConvNeXt shapes a whole training step takes the GPU about half a
// millisecond, and a Python-side binding (argument checks, ctypes marshalling, eleven tensor
// allocations, a Python autograd node) spent as long on the host, with the GPU idle between the
// forward and the backward. Here one dispatcher call validates, allocates and launches; the
// backward runs inside the autograd engine without touching Python.
//
// Built per PyTorch version by scripts/build-torch-ops (torch's C++ ABI is not stable across
// versions); python/winconv/_torch_ops.py loads it, and falls back to the ctypes binding when it
// is missing. It calls the library through its C surface (winconv/winconv_c.h).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <array>
#include <cstdint>
#include <vector>

#include "winconv/winconv_c.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kMaxKernelSize = 15;
constexpr int64_t kMaxLevels = 8;

int dtype_code(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return 0;
    case at::kHalf: return 1;
    case at::kBFloat16: return 2;
    default: return -1;
  }
}

// The sizes every call passes to the C surface.
struct Dims {
  int64_t b, c, h, w, k, levels, stride;
  int dtype;

  // Round trip through the autograd context, so the backward reuses the forward's validation.
  std::vector<int64_t> to_list() const { return {b, c, h, w, k, levels, stride, dtype}; }
  static Dims from_list(const std::vector<int64_t>& v) {
    return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], static_cast<int>(v[7])};
  }
};

void check_param(const char* name, int64_t index, const at::Tensor& t, at::IntArrayRef shape, const at::Tensor& x) {
  TORCH_CHECK(t.defined(), "wtconv2d: ", name, index >= 0 ? "[" + std::to_string(index) + "]" : "",
              " is undefined");
  TORCH_CHECK(t.sizes() == shape, "wtconv2d: ", name, index >= 0 ? "[" + std::to_string(index) + "]" : "",
              " must have shape ", shape, ", got ", t.sizes());
  TORCH_CHECK(t.scalar_type() == at::kFloat, "wtconv2d: ", name, " must be float32 on this path, got ",
              t.scalar_type());
  TORCH_CHECK(t.device() == x.device(), "wtconv2d: ", name, " is on ", t.device(), " but the input is on ",
              x.device());
  TORCH_CHECK(t.is_contiguous(), "wtconv2d: ", name, " must be contiguous");
}

// Every argument, checked before anything is allocated or launched. The C surface checks the sizes
// again (and their 64-bit products); these checks name the tensor at fault.
Dims validate(const at::Tensor& x, const at::Tensor& w0, const std::optional<at::Tensor>& b0, const at::Tensor& s0,
              at::TensorList wl, at::TensorList sl, int64_t stride) {
  TORCH_CHECK(x.defined() && x.is_cuda(), "wtconv2d: input must be a CUDA tensor");
  const int code = dtype_code(x.scalar_type());
  TORCH_CHECK(code >= 0, "wtconv2d: input dtype must be float32, float16 or bfloat16, got ", x.scalar_type());
  TORCH_CHECK(x.dim() == 4, "wtconv2d: input must be 4-D (B, C, H, W), got shape ", x.sizes());
  TORCH_CHECK(x.is_contiguous(), "wtconv2d: input must be contiguous NCHW");
  TORCH_CHECK(x.size(0) >= 1 && x.size(1) >= 1 && x.size(2) >= 1 && x.size(3) >= 1,
              "wtconv2d: every input dimension must be >= 1, got shape ", x.sizes());
  TORCH_CHECK(w0.defined() && w0.dim() == 4, "wtconv2d: base_weight must be a (C, 1, k, k) tensor");
  const int64_t c = x.size(1), k = w0.size(3);
  TORCH_CHECK(k >= 1 && k <= kMaxKernelSize && k % 2 == 1, "wtconv2d: kernel size must be odd and in [1, ",
              kMaxKernelSize, "], got ", k);
  TORCH_CHECK(stride >= 1, "wtconv2d: stride must be >= 1, got ", stride);
  const int64_t levels = static_cast<int64_t>(wl.size());
  TORCH_CHECK(levels >= 1 && levels <= kMaxLevels, "wtconv2d: number of levels must be in [1, ", kMaxLevels,
              "], got ", levels);
  TORCH_CHECK(sl.size() == wl.size(), "wtconv2d: got ", wl.size(), " level weights but ", sl.size(),
              " level scales");
  check_param("base_weight", -1, w0, {c, 1, k, k}, x);
  if (b0.has_value() && b0->defined()) check_param("base_bias", -1, *b0, {c}, x);
  check_param("base_scale", -1, s0, {1, c, 1, 1}, x);
  for (int64_t l = 0; l < levels; ++l) {
    check_param("level_weights", l, wl[l], {4 * c, 1, k, k}, x);
    check_param("level_scales", l, sl[l], {1, 4 * c, 1, 1}, x);
  }
  return {x.size(0), c, x.size(2), x.size(3), k, levels, stride, code};
}

void check_rc(int rc, const char* what) {
  TORCH_CHECK(rc == 0, "winconv ", what, " failed: ", winconv_wtconv_last_error());
}

template <typename T>
std::array<T, kMaxLevels> pointers(at::TensorList list) {
  std::array<T, kMaxLevels> out{};
  for (size_t i = 0; i < list.size(); ++i) out[i] = static_cast<T>(list[i].data_ptr());
  return out;
}

// Output extent of a strided WTConv2d along one axis (the stride subsamples from index 0).
// ceil(n / stride), written so that no stride overflows it.
int64_t strided_extent(int64_t n, int64_t stride) { return n < 1 ? 0 : (n - 1) / stride + 1; }

// Undefined when no workspace is needed (the fused L = 2 forward): an allocation costs host time.
at::Tensor workspace(size_t bytes, const at::Tensor& like) {
  return bytes > 0 ? at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte)) : at::Tensor();
}

void* data_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

const float* ptr_or_null(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? t->data_ptr<float>() : nullptr;
}

// The forward on arguments that passed validate() (d is its result).
at::Tensor forward_checked(const Dims& d, const at::Tensor& x, const at::Tensor& w0,
                           const std::optional<at::Tensor>& b0, const at::Tensor& s0, at::TensorList wl,
                           at::TensorList sl) {
  const c10::cuda::CUDAGuard guard(x.device());
  size_t ws_bytes = 0;
  check_rc(winconv_wtconv_forward_workspace_size(d.b, d.c, d.h, d.w, d.k, d.levels, d.stride, d.dtype, &ws_bytes),
           "wtconv2d forward workspace query");
  at::Tensor y = at::empty({d.b, d.c, strided_extent(d.h, d.stride), strided_extent(d.w, d.stride)}, x.options());
  at::Tensor ws = workspace(ws_bytes, x);
  const auto wptr = pointers<const float*>(wl);
  const auto sptr = pointers<const float*>(sl);
  check_rc(winconv_wtconv_forward(d.b, d.c, d.h, d.w, d.k, d.levels, d.stride, d.dtype, x.data_ptr(),
                                  w0.data_ptr<float>(), ptr_or_null(b0), s0.data_ptr<float>(), wptr.data(),
                                  sptr.data(), y.data_ptr(), data_or_null(ws), ws_bytes,
                                  c10::cuda::getCurrentCUDAStream(x.device().index()).stream()),
           "wtconv2d forward");
  return y;
}

at::Tensor forward_cuda(const at::Tensor& x, const at::Tensor& w0, const std::optional<at::Tensor>& b0,
                        const at::Tensor& s0, at::TensorList wl, at::TensorList sl, int64_t stride) {
  return forward_checked(validate(x, w0, b0, s0, wl, sl, stride), x, w0, b0, s0, wl, sl);
}

// Shape-only kernel, so that meta tensors (and tracing tools built on them) see the output size.
at::Tensor forward_meta(const at::Tensor& x, const at::Tensor&, const std::optional<at::Tensor>&, const at::Tensor&,
                        at::TensorList, at::TensorList, int64_t stride) {
  TORCH_CHECK(x.dim() == 4, "wtconv2d: input must be 4-D (B, C, H, W), got shape ", x.sizes());
  TORCH_CHECK(stride >= 1, "wtconv2d: stride must be >= 1, got ", stride);
  return at::empty({x.size(0), x.size(1), strided_extent(x.size(2), stride), strided_extent(x.size(3), stride)},
                   x.options());
}

// The gradients of the parameters saved[1..] (undefined ones skipped) as views of one float32
// buffer, each 16-byte aligned with its parameter's sizes and strides: one allocation instead of
// 2 L + 3, which at the small shapes, where the host decides the step's time, cost more than the
// kernels (docs/wtconv.md, note 49). Each .grad then shares that buffer with the others (a saved
// .grad alone carries the whole buffer, a few KiB per channel); the parameters are contiguous
// (validate), so the views meet AccumulateGrad's layout rule and are taken over as the .grad.
void parameter_gradients(const variable_list& saved, variable_list& grads) {
  constexpr int64_t kAlign = 4;  // floats
  int64_t total = 0;
  for (size_t i = 1; i < saved.size(); ++i)
    if (saved[i].defined()) total += (saved[i].numel() + kAlign - 1) / kAlign * kAlign;
  const at::Tensor buffer = at::empty({total}, saved[1].options());
  int64_t offset = 0;
  for (size_t i = 1; i < saved.size(); ++i) {
    if (!saved[i].defined()) continue;
    grads[i] = buffer.as_strided(saved[i].sizes(), saved[i].strides(), offset);
    offset += (saved[i].numel() + kAlign - 1) / kAlign * kAlign;
  }
}

// backward(create_graph=True): the backward through the Python package's winconv::wtconv2d_bwd op
// (python/winconv/ops.py), which runs the same kernels and whose derivative autograd records, so
// second-order gradients come out right instead of as constants. That op is registered whenever
// this operator is in use: the package loads this library.
variable_list recorded_backward(const at::Tensor& dy, const variable_list& saved, size_t levels, int64_t stride) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("winconv::wtconv2d_bwd", "");
  const at::Tensor &x = saved[0], &w0 = saved[1], &b0 = saved[2], &s0 = saved[3];
  const std::vector<at::Tensor> wl(saved.begin() + 4, saved.begin() + 4 + levels);
  const std::vector<at::Tensor> sl(saved.begin() + 4 + levels, saved.begin() + 4 + 2 * levels);
  torch::jit::Stack stack{dy, x, w0, b0.defined() ? c10::IValue(b0) : c10::IValue(), s0, wl, sl, stride};
  op.callBoxed(stack);
  // Returned: grad x, grad base weight, grad bias (0 elements without a bias), grad base scale,
  // the level weights' gradients, the level scales' gradients.
  variable_list grads(4 + 2 * levels + 1);
  for (int i = 0; i < 4; ++i) grads[i] = stack[i].toTensor();
  if (!b0.defined()) grads[2] = at::Tensor();
  const std::vector<at::Tensor> gw = stack[4].toTensorVector(), gs = stack[5].toTensorVector();
  for (size_t l = 0; l < levels; ++l) {
    grads[4 + l] = gw[l];
    grads[4 + levels + l] = gs[l];
  }
  return grads;
}

// Saved: x, base weight, bias (possibly undefined), base scale, then the level weights and scales,
// and the validated sizes. Autograd refuses saved tensors modified in place, so the backward does not
// validate them again (about a microsecond per call at the small shapes, where the host decides).
class WtconvFunction : public torch::autograd::Function<WtconvFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w0,
                            const std::optional<at::Tensor>& b0, const at::Tensor& s0, at::TensorList wl,
                            at::TensorList sl, int64_t stride) {
    const Dims d = validate(x, w0, b0, s0, wl, sl, stride);
    at::Tensor y = forward_checked(d, x, w0, b0, s0, wl, sl);
    variable_list saved{x, w0, b0.has_value() ? *b0 : at::Tensor(), s0};
    saved.insert(saved.end(), wl.begin(), wl.end());
    saved.insert(saved.end(), sl.begin(), sl.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["dims"] = d.to_list();
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const Dims d = Dims::from_list(ctx->saved_data["dims"].toIntVector());
    const at::Tensor &x = saved[0], &w0 = saved[1], &b0 = saved[2], &s0 = saved[3];
    const size_t levels = (saved.size() - 4) / 2;
    const at::TensorList wl(saved.data() + 4, levels), sl(saved.data() + 4 + levels, levels);
    // One gradient per forward input: x, w0, b0, s0, each level weight, each level scale, stride.
    variable_list grads(4 + 2 * levels + 1);
    if (!grad_outputs[0].defined()) return grads;  // y did not reach the loss
    const at::Tensor dy = grad_outputs[0].contiguous();
    TORCH_CHECK(dy.scalar_type() == x.scalar_type() && dy.device() == x.device(),
                "wtconv2d: the output gradient must have the input's dtype and device, got ", dy.scalar_type(),
                " on ", dy.device());
    TORCH_CHECK(dy.dim() == 4 && dy.size(0) == d.b && dy.size(1) == d.c && dy.size(2) == strided_extent(d.h, d.stride) &&
                    dy.size(3) == strided_extent(d.w, d.stride),
                "wtconv2d: the output gradient has shape ", dy.sizes(), ", which is not the output's");
    if (at::GradMode::is_enabled()) return recorded_backward(dy, saved, levels, d.stride);
    const c10::cuda::CUDAGuard guard(x.device());
    size_t ws_bytes = 0;
    check_rc(winconv_wtconv_backward_workspace_size(d.b, d.c, d.h, d.w, d.k, d.levels, d.stride, d.dtype, &ws_bytes),
             "wtconv2d backward workspace query");
    grads[0] = at::empty_like(x);
    parameter_gradients(saved, grads);
    at::Tensor ws = workspace(ws_bytes, x);
    const auto wptr = pointers<const float*>(wl);
    const auto sptr = pointers<const float*>(sl);
    const auto gwptr = pointers<float*>(at::TensorList(grads.data() + 4, levels));
    const auto gsptr = pointers<float*>(at::TensorList(grads.data() + 4 + levels, levels));
    check_rc(winconv_wtconv_backward(d.b, d.c, d.h, d.w, d.k, d.levels, d.stride, d.dtype, dy.data_ptr(),
                                     x.data_ptr(), w0.data_ptr<float>(), b0.defined() ? b0.data_ptr<float>() : nullptr,
                                     s0.data_ptr<float>(), wptr.data(), sptr.data(), grads[0].data_ptr(),
                                     grads[1].data_ptr<float>(), b0.defined() ? grads[2].data_ptr<float>() : nullptr,
                                     grads[3].data_ptr<float>(), gwptr.data(), gsptr.data(), data_or_null(ws), ws_bytes,
                                     c10::cuda::getCurrentCUDAStream(x.device().index()).stream()),
             "wtconv2d backward");
    return grads;
  }
};

at::Tensor forward_autograd(const at::Tensor& x, const at::Tensor& w0, const std::optional<at::Tensor>& b0,
                            const at::Tensor& s0, at::TensorList wl, at::TensorList sl, int64_t stride) {
  return WtconvFunction::apply(x, w0, b0, s0, wl, sl, stride);
}

}  // namespace

// A fragment: the Python package defines other winconv:: ops (torch.library.custom_op).
TORCH_LIBRARY_FRAGMENT(winconv, m) {
  m.def("wtconv2d_eager(Tensor x, Tensor base_weight, Tensor? base_bias, Tensor base_scale, "
        "Tensor[] level_weights, Tensor[] level_scales, int stride) -> Tensor");
}

TORCH_LIBRARY_IMPL(winconv, CUDA, m) { m.impl("wtconv2d_eager", &forward_cuda); }
TORCH_LIBRARY_IMPL(winconv, AutogradCUDA, m) { m.impl("wtconv2d_eager", &forward_autograd); }
TORCH_LIBRARY_IMPL(winconv, Meta, m) { m.impl("wtconv2d_eager", &forward_meta); }
