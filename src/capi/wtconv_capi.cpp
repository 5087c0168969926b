// extern "C" wrappers over the WTConv C++ API (winconv/winconv_c.h), for ctypes bindings.
#include <string>

#include "winconv/winconv_c.h"
#include "winconv/wtconv.h"

namespace {

thread_local std::string g_last_error;

int report(const winconv::Status& st) {
  g_last_error = st.ok() ? std::string() : st.to_string();
  return static_cast<int>(st.code());
}

// Builds the problem; dtype codes outside 0..2 and level arrays are checked here.
winconv::Status make_problem(int64_t b, int64_t c, int64_t h, int64_t w, int64_t k, int64_t levels, int64_t stride,
                             int dtype, winconv::WtconvProblem* p) {
  if (dtype < 0 || dtype > 2)
    return winconv::Status(winconv::StatusCode::kInvalidArgument,
                           "wtconv: dtype must be 0 (fp32), 1 (fp16) or 2 (bf16), got " + std::to_string(dtype));
  p->batch = b; p->channels = c; p->height = h; p->width = w;
  p->kernel_size = k; p->levels = levels; p->stride = stride;
  p->precision = dtype == 0 ? winconv::Precision::kFP32 : dtype == 1 ? winconv::Precision::kFP16 : winconv::Precision::kBF16;
  return winconv::wtconv_validate(*p);
}

winconv::Status null_array(const char* name) {
  return winconv::Status(winconv::StatusCode::kNullPointer, std::string("wtconv: ") + name + " must not be null");
}

}  // namespace

extern "C" {

int winconv_wtconv_forward_workspace_size(int64_t batch, int64_t channels, int64_t height, int64_t width,
                                          int64_t kernel_size, int64_t levels, int64_t stride, int dtype,
                                          size_t* bytes) {
  winconv::WtconvProblem p;
  winconv::Status st = make_problem(batch, channels, height, width, kernel_size, levels, stride, dtype, &p);
  if (st.ok()) st = winconv::wtconv_forward_workspace_size(p, bytes);
  return report(st);
}

int winconv_wtconv_backward_workspace_size(int64_t batch, int64_t channels, int64_t height, int64_t width,
                                           int64_t kernel_size, int64_t levels, int64_t stride, int dtype,
                                           size_t* bytes) {
  winconv::WtconvProblem p;
  winconv::Status st = make_problem(batch, channels, height, width, kernel_size, levels, stride, dtype, &p);
  if (st.ok()) st = winconv::wtconv_backward_workspace_size(p, bytes);
  return report(st);
}

int winconv_wtconv_io_bytes(int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t kernel_size,
                            int64_t levels, int64_t stride, int dtype, uint64_t* forward_bytes,
                            uint64_t* backward_bytes) {
  winconv::WtconvProblem p;
  winconv::Status st = make_problem(batch, channels, height, width, kernel_size, levels, stride, dtype, &p);
  if (st.ok()) st = winconv::wtconv_io_bytes(p, forward_bytes, backward_bytes);
  return report(st);
}

int winconv_wtconv_forward(int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t kernel_size,
                           int64_t levels, int64_t stride, int dtype, const void* x, const float* base_weight,
                           const float* base_bias, const float* base_scale, const float* const* level_weights,
                           const float* const* level_scales, void* y, void* workspace, size_t workspace_bytes,
                           void* stream) {
  winconv::WtconvProblem p;
  winconv::Status st = make_problem(batch, channels, height, width, kernel_size, levels, stride, dtype, &p);
  if (!st.ok()) return report(st);
  if (level_weights == nullptr) return report(null_array("level_weights"));
  if (level_scales == nullptr) return report(null_array("level_scales"));
  winconv::WtconvParams prm;
  prm.base_weight = base_weight; prm.base_bias = base_bias; prm.base_scale = base_scale;
  for (int64_t l = 0; l < levels; ++l) { prm.level_weight[l] = level_weights[l]; prm.level_scale[l] = level_scales[l]; }
  return report(winconv::wtconv_forward(p, x, prm, y, workspace, workspace_bytes, static_cast<cudaStream_t>(stream)));
}

int winconv_wtconv_backward(int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t kernel_size,
                            int64_t levels, int64_t stride, int dtype, const void* dy, const void* x,
                            const float* base_weight, const float* base_bias, const float* base_scale,
                            const float* const* level_weights, const float* const* level_scales, void* dx,
                            float* grad_base_weight, float* grad_base_bias, float* grad_base_scale,
                            float* const* grad_level_weights, float* const* grad_level_scales, void* workspace,
                            size_t workspace_bytes, void* stream) {
  winconv::WtconvProblem p;
  winconv::Status st = make_problem(batch, channels, height, width, kernel_size, levels, stride, dtype, &p);
  if (!st.ok()) return report(st);
  if (level_weights == nullptr) return report(null_array("level_weights"));
  if (level_scales == nullptr) return report(null_array("level_scales"));
  if (grad_level_weights == nullptr) return report(null_array("grad_level_weights"));
  if (grad_level_scales == nullptr) return report(null_array("grad_level_scales"));
  winconv::WtconvParams prm;
  prm.base_weight = base_weight; prm.base_bias = base_bias; prm.base_scale = base_scale;
  winconv::WtconvParamGrads g;
  g.base_weight = grad_base_weight; g.base_bias = grad_base_bias; g.base_scale = grad_base_scale;
  for (int64_t l = 0; l < levels; ++l) {
    prm.level_weight[l] = level_weights[l]; prm.level_scale[l] = level_scales[l];
    g.level_weight[l] = grad_level_weights[l]; g.level_scale[l] = grad_level_scales[l];
  }
  return report(winconv::wtconv_backward(p, dy, x, prm, dx, g, workspace, workspace_bytes,
                                         static_cast<cudaStream_t>(stream)));
}

const char* winconv_wtconv_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
