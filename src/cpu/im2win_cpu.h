// CPU im2win building blocks, shared by the CPU convolution and the tests of the GPU transform.
#pragma once

#include <cstdint>

#include "cpu/window_gemm_cpu.h"
#include "winconv/conv2d.h"

namespace winconv {

// Elements of the window tensor I_hat for this problem (N*C*P*W'*R, either layout).
int64_t im2win_window_elements(const Conv2dProblem& pb);

// The im2win transform, straight from its definition (DESIGN.md):
//   NCHW: I_hat[n, c, p, w*R + u] = X'[n, c, p*s_h + u, w]
//   NHWC: I_hat[n, p, w, u, c]    = X'[n, p*s_h + u, w, c]
// X' is x zero-padded by pad_h/pad_w; w runs over the padded width W'.
void im2win_transform_cpu(const Conv2dConfig& config, const float* x, float* window);
// The transform in rows that can run in parallel: (n, c, p) for NCHW, (n, p) for NHWC.
int64_t im2win_transform_rows(const Conv2dConfig& config);
void im2win_transform_row_cpu(const Conv2dConfig& config, const float* x, float* window, int64_t row);

// conv2d_forward_cpu with the row GEMM's instruction set chosen (kAuto: the widest the CPU runs);
// kUnsupported for one this CPU does not run. The tests run every one the CPU has.
Status conv2d_forward_cpu_isa(const Conv2dConfig& config, const float* x, const float* w, float* y, int threads,
                              CpuVectorIsa isa);

}  // namespace winconv
