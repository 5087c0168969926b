// Which NCHW layers skip the im2win GEMM for the direct shallow-reduction kernel
// (conv_shallow_nchw.cu; docs/conv2d.md, v15). Host-only and free of CUDA headers, so the rule is
// tested on a machine without CUDA.
//
// The kernel keeps its block's filter slice in shared memory, gathers each output pixel's window
// straight into registers (the window row of im2win, never staged) and stores every output
// channel's pixels from the registers, a warp's 128 consecutive pixels per channel. It computes
// no padded channels beyond a group of 8 or 16, where the GEMM's narrowest tile is 32 channels
// wide and its reduction runs in 16-deep steps. Measured against the GEMM's best tile (tile
// sweep, batch 128, H100). v15: 1.09-3.9x faster with at most 32 filters (3x3 stems of 8, 16 and
// 32 filters, 1-channel 5x5 and 8x8 layers, C*R*S from 25 to 64); 0.90-1.08x at 64 filters
// (conv7 0.95x), 0.82x at 96 and 0.91x at 256, where the GEMM reuses each gathered window
// across a tile of filters. v17 (window rows at compile-time filter widths, rows prefetched)
// made the kernel 0.82-0.92x of v15's time on the layers measured and put it ahead of the best
// GEMM tile on every 64-filter layer timed: 1.08-1.28x on reductions of 9 to 36 (conv7, 3x3 and
// 4x4 layers of 1 to 4 channels). So it takes 64 filters where that holds: filter widths of 2
// or more (width 1 has no row to walk; its loop is v15's) and reductions of at most three of the
// GEMM's 16-deep steps, beyond which the GEMM's rate rises with its steps (unmeasured there at 64
// filters). Elsewhere 32 (docs/conv2d.md, v17).
#pragma once

#include <cstdint>

namespace winconv::im2win {

// The largest reduction C*R*S the kernel holds (its shared filter slice and tap table).
constexpr int64_t kShallowMaxDepth = 64;
// The most output channels the rule gives it: kShallowMaxFilters for filter widths of 2 or more and
// reductions of at most kShallowWideMaxDepth, kShallowNarrowMaxFilters for the others.
constexpr int64_t kShallowMaxFilters = 64;
constexpr int64_t kShallowWideMaxDepth = 48;
constexpr int64_t kShallowNarrowMaxFilters = 32;

// The most output channels for which the rule takes a C x R x S filter (0: too deep to hold).
inline int64_t shallow_max_filters(int64_t c, int64_t r, int64_t s) {
  const int64_t depth = c * r * s;
  if (depth > kShallowMaxDepth) return 0;
  return s >= 2 && depth <= kShallowWideMaxDepth ? kShallowMaxFilters : kShallowNarrowMaxFilters;
}

// Whether conv2d_forward takes the direct kernel: NCHW, windows on chip (the default), a
// reduction C*R*S the kernel holds and at most shallow_max_filters output channels.
inline bool shallow_direct_selected(bool nchw, bool onchip, int64_t c, int64_t r, int64_t s, int64_t k) {
  return nchw && onchip && k <= shallow_max_filters(c, r, s);
}

}  // namespace winconv::im2win
