/* winconv C surface for bindings (ctypes): WTConv2d forward/backward and workspace queries.
 * Every function returns a winconv::StatusCode value (0 = ok); on failure the message is
 * available from winconv_wtconv_last_error() on the same thread.
 * dtype: 0 = fp32, 1 = fp16, 2 = bf16 (activations; parameters are always fp32).
 * level_weights / level_scales (and their gradients): host arrays of `levels` device pointers.
 * stream: a cudaStream_t (NULL = the legacy default stream). */
#ifndef WINCONV_WINCONV_C_H_
#define WINCONV_WINCONV_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int winconv_wtconv_forward_workspace_size(int64_t batch, int64_t channels, int64_t height, int64_t width,
                                          int64_t kernel_size, int64_t levels, int64_t stride, int dtype,
                                          size_t* bytes);
int winconv_wtconv_backward_workspace_size(int64_t batch, int64_t channels, int64_t height, int64_t width,
                                           int64_t kernel_size, int64_t levels, int64_t stride, int dtype,
                                           size_t* bytes);

/* HBM bytes one forward / one backward moves (the I/O model of docs/wtconv.md). */
int winconv_wtconv_io_bytes(int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t kernel_size,
                            int64_t levels, int64_t stride, int dtype, uint64_t* forward_bytes,
                            uint64_t* backward_bytes);

int winconv_wtconv_forward(int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t kernel_size,
                           int64_t levels, int64_t stride, int dtype, const void* x, const float* base_weight,
                           const float* base_bias, const float* base_scale, const float* const* level_weights,
                           const float* const* level_scales, void* y, void* workspace, size_t workspace_bytes,
                           void* stream);

int winconv_wtconv_backward(int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t kernel_size,
                            int64_t levels, int64_t stride, int dtype, const void* dy, const void* x,
                            const float* base_weight, const float* base_bias, const float* base_scale,
                            const float* const* level_weights, const float* const* level_scales, void* dx,
                            float* grad_base_weight, float* grad_base_bias, float* grad_base_scale,
                            float* const* grad_level_weights, float* const* grad_level_scales, void* workspace,
                            size_t workspace_bytes, void* stream);

/* Message of the last failed winconv_wtconv_* call on this thread ("" when none). */
const char* winconv_wtconv_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* WINCONV_WINCONV_C_H_ */
