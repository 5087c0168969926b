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
// One such row written at dst instead of its place in the whole tensor; it holds
// im2win_row_elements floats (W'*R for NCHW, W'*R*C for NHWC).
int64_t im2win_row_elements(const Conv2dConfig& config);
void im2win_transform_row_to_cpu(const Conv2dConfig& config, const float* x, int64_t row, float* dst);

// The row GEMM's tasks are (filter block, output row) pairs, and a thread runs a contiguous range
// of them, so the outer of the two decides what each thread re-reads:
//  - rows outermost: a thread reads only its own window rows (those it wrote in the transform) and
//    every packed block for each row, the whole filter packed first;
//  - filter blocks outermost: a thread reads the whole window once per block it has, and packs the
//    blocks it meets into a buffer of one block that stays in its cache.
// kAuto takes rows outermost when the whole packed filter fits filter_budget_bytes (it then stays
// in each core's L2), and otherwise filter blocks outermost when W' < 32 S, where the window re-read
// per block is smaller than the filter re-read per row. Measured (docs/conv2d-cpu.md):
// blocks for conv6 and conv12 (4.7-9.4 MB of filter), -18% at conv6; rows for conv4 and conv8
// (10-45 MB of window), -5 to -10%, and for conv1, 2, 9 and 10 (filters of 0.14-0.6 MB),
// -4 to -25% on two threads.
// kRowsOuterWorkerWindows is rows outermost without the window tensor: each worker builds the
// window rows of its task's output rows in a buffer of its own just before their GEMM, so the
// window never goes to memory and the extra memory is one buffer per worker. kAuto takes it
// where it would take rows outermost and the whole window tensor would exceed
// kCpuWorkerWindowsAboveBytes: conv4's 45 MB window was written and read back through memory
// (docs/conv2d-cpu.md, twelfth version); on the stems, whose windows are 1-2 MB, the
// whole tensor first was faster.
enum class CpuTaskOrder { kAuto, kFilterBlocksOuter, kRowsOuter, kRowsOuterWorkerWindows };
constexpr int64_t kCpuWorkerWindowsAboveBytes = int64_t(16) << 20;
CpuTaskOrder cpu_task_order(const Conv2dProblem& pb, int64_t filter_budget_bytes);
// The budget kAuto uses: half the L2 cache this CPU reports, 1 MiB where it reports none.
int64_t cpu_filter_cache_budget();

// The row GEMM runs each image's output rows in G groups of consecutive rows, a group's pixels
// taken as one row: G = P (a group per row) when rows have kCpuGroupedRowColumns columns or more,
// else about kCpuGroupPixels pixels per group, but at least two tasks per thread where the rows
// allow (conv12's rows of 5 would otherwise run in register blocks of 5 pixels, 10 multiply-adds
// per 128 bytes of packed filter from L2, against 24 in a block of 12).
constexpr int64_t kCpuGroupedRowColumns = 8, kCpuGroupPixels = 24;
int64_t cpu_row_groups(const Conv2dProblem& pb, int threads);

// The CPU workspace's alignment (conv2d_forward_cpu with a caller's workspace), and that of the
// packed filter within it.
constexpr size_t kCpuWorkspaceAlignment = 64;

// conv2d_forward_cpu with the row GEMM's instruction set chosen (kAuto: the widest the CPU runs)
// and the task order (kAuto: cpu_task_order with cpu_filter_cache_budget); kUnsupported for an
// instruction set this CPU does not run. The tests run every one the CPU has, and both orders.
Status conv2d_forward_cpu_isa(const Conv2dConfig& config, const float* x, const float* w, float* y, int threads,
                              CpuVectorIsa isa, CpuTaskOrder order = CpuTaskOrder::kAuto);
// conv2d_forward_cpu_extra_bytes for a task order.
Status conv2d_forward_cpu_extra_bytes_order(const Conv2dConfig& config, size_t* bytes, int threads,
                                            CpuTaskOrder order);

}  // namespace winconv
