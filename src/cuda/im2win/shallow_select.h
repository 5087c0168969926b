// Which NCHW layers skip the im2win GEMM for the direct shallow-reduction kernel
// (conv_shallow_nchw.cu; docs/conv2d.md, v15, v17 and "The direct kernel's rule by window
// overlap"). Host-only and free of CUDA headers, so the rule is tested on a machine without CUDA.
//
// The kernel keeps its block's filter slice in shared memory, gathers each output pixel's window
// straight into registers (the window row of im2win, never staged) and stores every output
// channel's pixels from the registers, a warp's 128 consecutive pixels per channel. It computes
// no padded channels beyond a group of 8 or 16, where the GEMM's narrowest tile is 32 channels
// wide and its reduction runs in 16-deep steps; the GEMM in turn reuses each gathered window
// across a register tile of filters. v17 walks a window row at a compile-time filter width, so
// neighbouring outputs whose windows overlap along the row (S > stride) share its loads.
// Measured against the GEMM's best tile (tile sweep, batch 128, H100), GEMM time / direct time:
//   - overlapping rows at stride 1, 64 filters: 1.08-1.38 on reductions of 9 to 64 (conv7,
//     padded stems, 3x3 layers of 1 to 7 channels, 2-channel 5x5, 1-channel 7x7, 4-channel 4x4);
//   - overlapping rows at stride 2, 64 filters: 1.10-1.11 on reductions of 27 and 32; at stride
//     4, 64 filters 0.94 (1-channel 8x8, 64 deep) and 32 filters 1.01;
//   - windows side by side (S <= stride: 1 x 1 layers, patchify layers): 1.09 for 32 filters on
//     8 channels of 1 x 1 and 1.13 for 16 filters of a 3-channel 4x4 stride-4 layer; the GEMM
//     ahead everywhere else measured: 0.64-0.98 at 64 filters (2x2 stride 2, 3x3 stride 3, 4x4
//     stride 4), 0.68-0.95 at 32 (1 x 1 of 16 and 32 channels, 4x4 stride 4), 0.79 for 16
//     filters of a 64-channel 1 x 1.
//   - wider layers (dev/cuda/sweep_wide_shallow_layers.csv, batches 32 and 128): 80 and 96
//     filters 1.09-1.39 at stride 1 (3-channel 3x3, 1-channel 7x7, 49 deep), 1.02 at stride 2
//     (3-channel 3x3); at 128 filters and more the GEMM is level or ahead (0.94-1.04 on 3x3 layers
//     of 1 and 3 channels and at 192-384 filters, 0.79-0.89 at 45-64 deep), except 1.09-1.12
//     for a 1-channel 5x5 and 1.23-1.33 for 160 filters (the GEMM's tiles pad 160 to 192), not
//     taken on one layer each.
// The rule takes the kernel where those measurements put it ahead, and nowhere untimed beyond
// them: strides of 3 or more, and reductions of 49-64 at stride 2, keep v15's 32 filters;
// 65-96 filters only where the wider layers were timed (stride 1 to 49 deep, stride 2 to 48).
#pragma once

#include <cstdint>

namespace winconv::im2win {

// The largest reduction C*R*S the kernel holds (its shared filter slice and tap table).
constexpr int64_t kShallowMaxDepth = 64;
// Windows that overlap along the row: kShallowWideMaxFilters at stride 1 on reductions of at most
// kShallowWideMaxDepth and at stride 2 on reductions of at most kShallowStrideTwoMaxDepth;
// kShallowMaxFilters on the deeper ones at stride 1; kShallowNarrowMaxFilters otherwise.
constexpr int64_t kShallowWideMaxFilters = 96;
constexpr int64_t kShallowWideMaxDepth = 49;
constexpr int64_t kShallowMaxFilters = 64;
constexpr int64_t kShallowStrideTwoMaxDepth = 48;
constexpr int64_t kShallowNarrowMaxFilters = 32;
// Windows side by side: kShallowNarrowMaxFilters on reductions of at most kShallowSideBySideDeep32,
// kShallowSideBySideMaxFilters up to kShallowSideBySideMaxDepth, none deeper.
constexpr int64_t kShallowSideBySideDeep32 = 8;
constexpr int64_t kShallowSideBySideMaxFilters = 16;
constexpr int64_t kShallowSideBySideMaxDepth = 48;

// The most output channels for which the rule takes a C x R x S filter at horizontal stride
// stride_w (0: too deep to hold, or a layer the GEMM runs at every filter count).
inline int64_t shallow_max_filters(int64_t c, int64_t r, int64_t s, int64_t stride_w) {
  const int64_t depth = c * r * s;
  if (depth > kShallowMaxDepth) return 0;
  if (s > stride_w) {
    if (stride_w == 1) return depth <= kShallowWideMaxDepth ? kShallowWideMaxFilters : kShallowMaxFilters;
    if (stride_w == 2 && depth <= kShallowStrideTwoMaxDepth) return kShallowWideMaxFilters;
    return kShallowNarrowMaxFilters;
  }
  if (depth <= kShallowSideBySideDeep32) return kShallowNarrowMaxFilters;
  return depth <= kShallowSideBySideMaxDepth ? kShallowSideBySideMaxFilters : 0;
}

// The kernel's channel group KT (filters per thread: 16, 8 or 4). A warp job walks the whole
// reduction for its KT channels of 128 pixels, one tap after another, so a grid of few jobs runs
// for as long as one job's chain of loads and multiply-adds, however idle the SMs are. Measured
// with KT forced to each (H100, dev/cuda/sweep_small_shallow_layers.csv and
// sweep_shallow_layers.csv at batches 1-32, 336 layer-batches): the best KT was 4 on grids of a few
// hundred warps (a 7-channel 3 x 3 of 64 filters at 56^2, batch 1: 13.3 us at 16, 9.3 at 4) and 16
// once every SM holds several (conv7 at batch 32: 0.216 ms at 16, 0.380 at 4, the narrower groups
// reading x once per 4 or 8 channels instead of 16). The rule: the widest group whose warps
// (jobs x groups) give every SM kShallowMinWarpsPerSm, else 4; and no group wider than twice the
// filters. Its picks were 1.005x the best KT's time in geometric mean (16 for filters > 8: 1.161x).
constexpr int64_t kShallowMinWarpsPerSm = 4;

inline int shallow_filters_per_thread(int64_t jobs, int64_t k, int num_sms) {
  const int64_t enough = kShallowMinWarpsPerSm * (num_sms > 0 ? num_sms : 1);
  if (k > 8 && jobs * ((k + 15) / 16) >= enough) return 16;
  if (k > 4 && jobs * ((k + 7) / 8) >= enough) return 8;
  return 4;
}

// Whether conv2d_forward takes the direct kernel: NCHW, windows on chip (the default), a
// reduction C*R*S the kernel holds and at most shallow_max_filters output channels.
inline bool shallow_direct_selected(bool nchw, bool onchip, int64_t c, int64_t r, int64_t s, int64_t stride_w,
                                    int64_t k) {
  return nchw && onchip && k <= shallow_max_filters(c, r, s, stride_w);
}

}  // namespace winconv::im2win
