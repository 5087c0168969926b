// CPU im2win building blocks, shared by the CPU convolution and the tests of the GPU transform.
#pragma once

#include <cstdint>

#include "winconv/conv2d.h"

namespace winconv {

// Elements of the window tensor I_hat for this problem (N*C*P*W'*R, either layout).
int64_t im2win_window_elements(const Conv2dProblem& pb);

// The im2win transform, straight from its definition (DESIGN.md):
//   NCHW: I_hat[n, c, p, w*R + u] = X'[n, c, p*s_h + u, w]
//   NHWC: I_hat[n, p, w, u, c]    = X'[n, p*s_h + u, w, c]
// X' is x zero-padded by pad_h/pad_w; w runs over the padded width W'.
void im2win_transform_cpu(const Conv2dConfig& config, const float* x, float* window);

// The filter in the order the window is read: NCHW [K][C][S][R], NHWC [K][S][R][C].
void im2win_filter_transpose_cpu(const Conv2dConfig& config, const float* w, float* wt);

}  // namespace winconv
