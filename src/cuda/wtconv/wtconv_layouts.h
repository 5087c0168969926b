// The WTConv kernels' shared-memory layouts and launch bounds, and what the kernels and the
// planner (wtconv_plan.h) both derive from them: filter and tile pitches, the TMA and fused
// layouts and the problems that may take them, resident blocks (host and device, plain C++).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "winconv/wtconv.h"

namespace winconv {
namespace wtconv_detail {

constexpr int kBlockThreads = 256;
constexpr size_t kSmemBudget = 96 * 1024;   // dynamic shared memory a block may ask for

// Shared memory of one SM and the share the runtime reserves per block on sm_90 (H100/H200):
// used only to keep a layout choice from costing a resident block.
constexpr size_t kSmemPerSm = 228 * 1024, kSmemReservedPerBlock = 1024;
// Blocks of `smem` dynamic shared-memory bytes that one SM holds, capped at the kernel's launch
// bound.
inline size_t resident_blocks(size_t smem, int bound) {
  const size_t n = kSmemPerSm / (smem + kSmemReservedPerBlock);
  return n < size_t(bound) ? n : size_t(bound);
}
// Whether a layout of `smem` bytes may replace the plain one of `plain_smem`: within the budget and
// no resident block lost (padding, TMA boxes).
inline bool layout_keeps_blocks(size_t smem, size_t plain_smem, int bound) {
  return smem <= kSmemBudget && resident_blocks(smem, bound) >= resident_blocks(plain_smem, bound);
}
constexpr int kLevelCorrWarpsPerSubband = kBlockThreads / 32 / 4;  // backward level kernels

struct WtconvTile {
  int th = 1, tw = 1;  // tile rows/cols (coefficients of the level grid, or outputs for the forward base)
  int np = 1;          // planes (b values) per item
  int tiles_y = 1, tiles_x = 1, bgroups = 1;
  int64_t items = 1;   // items per channel
  int splits = 1;      // blocks per channel
  size_t smem = 0;     // dynamic shared memory bytes
  int pixel_pitch = 0; // backward base: row pitch (floats) of its x and dy pixel tiles
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int pow2_at_least(int64_t v, int cap) {
  int p = 1;
  while (p < v && p < cap) p *= 2;
  return p;
}
inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

#ifdef __CUDACC__
#define WTCONV_HOST_DEVICE __host__ __device__
#else
#define WTCONV_HOST_DEVICE
#endif

// Weight-gradient correlation threads per warp: lane = ci + k * part (kernel row ci, part = a share
// of the tile rows); a warp takes one subband (level kernels, first half of the backward base
// block), so a half-warp reads a few consecutive rows of one plane: distinct bank pairs for the
// 8-byte row loads, one broadcast G row per part.
WTCONV_HOST_DEVICE constexpr int corr_parts_per_warp(int k) { return 32 / k; }

// The kernel sizes compiled as template specialisations (dispatch_kernel_size); only they have
// TMA-staged kernel instances, so the plan grants TMA layouts to them alone.
WTCONV_HOST_DEVICE constexpr bool specialised_kernel_size(int k) { return k == 3 || k == 5 || k == 7; }

// Launch bound of the backward base kernel, and the blocks per SM its tiles are fitted to. 4 blocks
// per SM (64 registers) for k = 3: a 3 x 3 training step ran 2.6% (fp32) and 4.8% (fp16) faster.
// k = 5 at 64 registers spills ~130 bytes (fp32 steps 2-3% slower, fp16 1-2% faster); k = 7
// spilled 300-530 bytes there (docs/wtconv.md, perf note 24). 2 (128 registers) for the runtime-k
// instance (k = 1, 9..15: one kernel holds the correlation rings of every size): at 3 (80
// registers) it spilled 2.4 KB, and at k = 9 its local-memory traffic was 3x its global loads
// (note 82). Its tiles are fitted to 2 as well: at k = 13 and 15 a 16 x 32 tile then fits where
// three blocks' shared memory held 16 x 16, whose paired dx jobs left half the block idle (note 97).
// k = 1 runs the runtime-k code in an instance of its own that compiles k = 1's loops alone
// (with_compiled_kernel_size's kOnly), 4 blocks like k = 3: at 2 its latency-bound passes ran
// 1.5x the 3 x 3 kernel's time on the same plane (docs/wtconv.md, perf note 107).
WTCONV_HOST_DEVICE constexpr int bwd_base_blocks_per_sm(int k) {
  return k == 3 || k == 1 ? 4 : specialised_kernel_size(k) ? 3 : 2;
}
// Launch bound of the forward base kernel: 4 blocks (64 registers, no spill) for k = 3 and 5; 2 for
// k = 7, which spills at 3 (docs/wtconv.md, perf note 17); 3 (80 registers) for the runtime-k
// instance, whose vector-read windows spill at 64 (perf note 53); 4 for its k = 1 instance, which
// compiles k = 1's windows alone (bwd_base_blocks_per_sm, perf note 107).
WTCONV_HOST_DEVICE constexpr int fwd_base_blocks_per_sm(int k) {
  return k == 7 ? 2 : k == 3 || k == 5 || k == 1 ? 4 : 3;
}
// Blocks per SM of the quad-staged forward base instance (odd widths, and planes without a TMA box)
// for a plan of `smem` bytes: at k = 3, 5 blocks (48 registers, no spill) where 5 of them fit the
// SM's shared memory. At 4 its items' staging loads waited at the barrier after the staging with
// little else to issue (docs/wtconv.md, notes 76 and 80). Larger tiles (the strided schedule of
// strides >= 3, flat planes) keep the 4-block instance and its 64 registers.
constexpr int kFwdQuadBlocksK3 = 5;
inline int fwd_base_quad_blocks(int k, size_t smem) {
  return k == 3 && resident_blocks(smem, kFwdQuadBlocksK3) == kFwdQuadBlocksK3 ? kFwdQuadBlocksK3
                                                                                 : fwd_base_blocks_per_sm(k);
}

// Whether the runtime-k backward base runs its dx jobs (two level-1 coefficients each) in halves
// on lane pairs: items of at most half a block's worth of jobs (a th x tw tile, np planes). Whole
// jobs left them all on warps 0-3, which also run the level-1 correlations, while warps 4-7 ran
// the base correlations alone (z11 of bench/wtconv_shapes_unseen6.csv, 64 x 384 x 14^2 at k = 11:
// 112 jobs of 16 k^2 multiply-adds an item; docs/wtconv.md, notes 111 and 113). With more jobs
// every thread has a whole one already, and the halves only add their shuffles (1.05-1.12x the
// time on multi-tile planes). A run-time choice inside one kernel spilled 2.9 KB, so the halves
// are an instance of their own (backward_base_kernel's kHalves).
WTCONV_HOST_DEVICE constexpr bool bwd_dx_half_jobs(int k, int th, int tw, int np) {
  return k != 1 && !specialised_kernel_size(k) && np * th * ((tw + 1) / 2) <= kBlockThreads / 2;
}

// Row pitch (floats) of the backward base kernel's subband tiles (Y_1 and G_1, ew = tw + 2 r
// coefficients a row). The runtime-k instance's correlation lanes read k consecutive rows of them
// at one column with 8-byte loads, so a half-warp meets 16 / gcd(pitch / 2, 16) distinct bank
// pairs: 4 at k = 9 (40 floats at the 16 x 32 tile: 3-way conflicts), 8 at k = 13 (44: 2-way).
// An odd number of pairs a row gives 16. The specialised sizes keep ew: their quad-read
// correlations need rows of whole 16 bytes (docs/wtconv.md, perf note 102).
WTCONV_HOST_DEVICE constexpr int bwd_level_pitch(int k, int ew) {
  return specialised_kernel_size(k) || (ew / 2) % 2 == 1 ? ew : ew + 2;
}

// Padded pixel-tile pitch (floats) of the backward base kernel for a halo width of ew coefficients:
// the smallest value >= 2 ew that is 4 mod 8. A multiple of 4 keeps the staging's 16-byte row
// stores; an odd multiple of 4 puts 8 consecutive rows on 8 different bank pairs, so the base
// correlation's 8-byte loads from neighbouring rows are conflict-free (a pitch that is a multiple
// of 8 put rows 4 apart on one bank pair).
WTCONV_HOST_DEVICE constexpr int bwd_pixel_pitch(int ew) { return (2 * ew + 3) / 8 * 8 + 4; }

// Row pitch (floats) of a k x k filter in the base kernels' shared memory: k for the specialised
// sizes, whose strips read a filter as one run of k * k floats; k rounded up to 4 for the runtime-k
// instance, so that every filter row starts 16-byte aligned and its weights load as quads
// (conv_adjacent_windows, conv_window's wpitch).
WTCONV_HOST_DEVICE constexpr int filter_row_pitch(int k) { return specialised_kernel_size(k) ? k : (k + 3) / 4 * 4; }
// Shared-memory stride of one k x k filter in the base kernels: k rows of filter_row_pitch(k)
// floats rounded up to 4, so every filter (and the tiles behind the filters) starts 16-byte aligned
// for vector loads.
WTCONV_HOST_DEVICE constexpr int filter_stride(int k) { return (k * filter_row_pitch(k) + 3) / 4 * 4; }
// Floats of quiet shared memory the runtime-k base kernels keep behind the tiles their window
// passes read as vectors (conv_adjacent_windows_vec reads up to 6 floats past a row's windows):
// between the forward's Y_1 tile and the subband results written beside its reads, and behind the
// backward's G_1 tile, the last of its tiles.
constexpr int kWindowSlack = 8;
// The slot of weight ij (row ij / k, column ij % k) of a filter laid out with filter_row_pitch(k).
WTCONV_HOST_DEVICE constexpr int filter_slot(int ij, int k) {
  return specialised_kernel_size(k) ? ij : ij / k * filter_row_pitch(k) + ij % k;
}
// Shared-memory stride of one of the level kernels' four filters: k x k floats for the specialised
// sizes (their strips read a filter as one run); the runtime-k instance lays them out as the base
// kernels do (filter_stride), so that its window passes load the weights as quads.
WTCONV_HOST_DEVICE constexpr int level_filter_stride(int k) { return specialised_kernel_size(k) ? k * k : filter_stride(k); }

// Shared memory (floats) of the level kernels (l >= 2) for a coefficient tile th x tw x np: the
// filters, the subband tiles (Y_l, and G_l in the backward), the subband conv results between the
// two phases (behind kWindowSlack quiet floats at runtime k, whose window passes read the tiles as
// vectors) and the backward's correlation partials.
inline size_t level_smem_floats(bool backward, int k, int th, int tw, int np) {
  const int r = k / 2;
  const size_t plane = size_t(th + 2 * r) * (tw + 2 * r) * 4;
  const size_t conv = size_t(np) * 4 * th * tw + (specialised_kernel_size(k) ? 0 : kWindowSlack);
  const size_t filters = 4 * size_t(level_filter_stride(k));
  if (!backward) return filters + np * plane + conv;
  const int parts = kLevelCorrWarpsPerSubband * corr_parts_per_warp(k);
  return filters + 2 * np * plane + conv + size_t(parts) * 4 * k * k;
}

// The quad-read correlation rows (corr_row_quads): the floats a row's ring reads ahead of a phase,
// and the chunk, positions per fully unrolled group of steps (a period of both rings).
WTCONV_HOST_DEVICE constexpr int corr_quad_lead(int k, int phase) { return (phase + k - 1 + 3) / 4 * 4; }
WTCONV_HOST_DEVICE constexpr int ring_gcd(int a, int b) { return b == 0 ? a : ring_gcd(b, a % b); }
WTCONV_HOST_DEVICE constexpr int corr_quad_chunk(int k, int oy, int og) {
  return (corr_quad_lead(k, oy) + 4) * (corr_quad_lead(1, og) + 4) /
         ring_gcd(corr_quad_lead(k, oy) + 4, corr_quad_lead(1, og) + 4);
}
// corr_row_quads' alignment for rows of n positions whose phase-0 floats (y - oy, g - og) sit at
// byte addresses ya + i * 4 ypitch and ga + i * 4 gpitch: n a multiple of 4, every row 16-byte
// aligned. The kernels test shared-memory pointers with it (quad_corr_ok), the plan a layout's
// offsets from its 128-byte aligned base (bwd_fused_quads_ok).
WTCONV_HOST_DEVICE inline bool quad_rows_aligned(uintptr_t ya, int ypitch, uintptr_t ga, int gpitch, int n) {
  return n % 4 == 0 && ((ya | ga) & 15) == 0 && ypitch % 4 == 0 && gpitch % 4 == 0;
}

// Quad staging of the base kernels (W % 4 == 0): a tile row is read as 4-aligned quads from
// origin & ~3, where origin is the tile's first x (even, possibly negative: the halo), so the
// lead-in origin - (origin & ~3) is 0 or 2. The x origins of tile column tx (tile width tw):
WTCONV_HOST_DEVICE constexpr int bwd_base_x_origin(int tx, int tw, int r) { return 2 * (tx * tw - r); }
WTCONV_HOST_DEVICE constexpr int fwd_base_x_origin(int tx, int tw, int r, int s) {
  return 2 * (((s * tx * tw) >> 1) - r);
}
// The lead-in of every tile when it is the same for all of them, else 2 (the largest), and the
// quads per row that cover a row of `cols` elements after that lead-in.
WTCONV_HOST_DEVICE constexpr int bwd_quad_lead(int tw, int r) { return tw % 2 == 0 ? (2 * r) % 4 : 2; }
WTCONV_HOST_DEVICE constexpr int fwd_quad_lead(int tw, int r, int s) { return (s * tw) % 4 == 0 ? (2 * r) % 4 : 2; }
WTCONV_HOST_DEVICE constexpr int quads_per_row(int cols, int lead) { return (cols + lead + 3) / 4; }

// At stride 2 the outputs are the first children of the level-1 coefficients, and both directions
// fold the base conv into the level-1 filters (wtconv_fold.h; docs/wtconv.md, notes 124 and 125):
// the forward runs level 1's convs alone on its own schedule, the backward base kernel on the
// spread dy runs no base conv and no base correlation. Every place that treats stride 2 apart asks
// this.
WTCONV_HOST_DEVICE constexpr bool stride_folds_base(int64_t s) { return s == 2; }

// Level-1 coefficients per axis that a forward base tile of t outputs at stride s touches. Exact
// for stride 1 (tile origins are multiples of t, hence even unless t = 1) and stride 2 (output i is
// the first child of coefficient i); a bound otherwise (the first output's coefficient may sit at
// an odd position).
WTCONV_HOST_DEVICE inline int fwd_base_coef_extent(int s, int t) {
  return s == 1 ? (t + 1) / 2 : stride_folds_base(s) ? t : (s * (t - 1)) / 2 + 2;
}

// Forward base + level 1 kernel: output tile th x tw, stride s.
inline size_t fwd_base_smem_floats(int k, int s, int th, int tw, int np) {
  const int r = k / 2;
  const int qih = fwd_base_coef_extent(s, th), qiw = fwd_base_coef_extent(s, tw);
  const int qh = qih + 2 * r, qw = qiw + 2 * r;
  const size_t slack = specialised_kernel_size(k) ? 0 : kWindowSlack;
  return 5 * size_t(filter_stride(k)) + size_t(np) * (4 * qh * qw + 4 * qh * qw + 4 * qih * qiw) + slack;
}

// TMA boxes start 16-byte aligned in x (a box at an unaligned column is an illegal instruction),
// so a tile whose first column is not aligned lands `off` elements (even, < 16 bytes) into its box:
// off = origin & (per16 - 1), per16 = 16 / esize.
WTCONV_HOST_DEVICE constexpr int tma_box_offset(int origin, int esize) { return origin & (16 / esize - 1); }

// Box pitch (elements) of a forward box over tile rows of xw elements: xw itself in place, else
// room for the largest 16-byte lead-in.
WTCONV_HOST_DEVICE constexpr int fwd_box_pitch(int xw, int esize, bool inplace) {
  return inplace ? xw : (xw + 16 / esize - 2 + 16 / esize - 1) / (16 / esize) * (16 / esize);
}
// Forward base with TMA staging (fwd_base_tma_smem): the x tile (np x xh x xw) arrives in two
// alternating boxes (np x xh x xp elements of esize bytes), 128-byte aligned after the filters;
// two mbarriers, Y_1 and the subband results follow. In place (fp32, stride 1, every tile origin
// 16-byte aligned: even r and tw % 4 == 0) the convolutions read the box itself (xp = xw);
// otherwise the Haar pass copies it into a float tile behind the rest (xp covers xw plus the
// largest offset).
struct FwdBaseTmaLayout {
  bool inplace = false;
  int xh = 0, xw = 0, xp = 0;  // x tile rows and columns, box columns (pitch of the boxes)
  size_t filter_bytes = 0;     // the five filters, rounded up to 128
  size_t floats = 0;           // Y_1, subband results (+ the float tile unless in place)
  size_t buffer_bytes = 0;     // one box, a multiple of 128
  size_t bytes() const { return filter_bytes + 2 * buffer_bytes + 16 + floats * 4; }
};
inline FwdBaseTmaLayout fwd_base_tma_layout(int k, int s, int th, int tw, int np, int esize) {
  const int r = k / 2;
  const int qih = fwd_base_coef_extent(s, th), qiw = fwd_base_coef_extent(s, tw);
  const int qh = qih + 2 * r, qw = qiw + 2 * r;
  FwdBaseTmaLayout t;
  t.xh = 2 * qh;
  t.xw = 2 * qw;
  t.inplace = esize == 4 && s == 1 && tw % 4 == 0 && r % 2 == 0;  // origins x0 - 2 r, x0 = tx tw
  t.xp = fwd_box_pitch(t.xw, esize, t.inplace);
  t.filter_bytes = align_up(5 * size_t(filter_stride(k)) * 4, 128);
  t.floats = size_t(np) * (4 * qh * qw + 4 * qih * qiw) + (t.inplace ? 0 : size_t(np) * t.xh * t.xw);
  t.buffer_bytes = align_up(size_t(np) * t.xh * t.xp * esize, 128);
  return t;
}

// The level-2 tile of a fused layout: th2 x tw2 coefficients, eh2 x ew2 with level 2's halo.
template <typename Layout>
WTCONV_HOST_DEVICE inline void set_level2_tile(Layout& t, int th2, int tw2, int r) {
  t.th2 = th2;
  t.tw2 = tw2;
  t.eh2 = th2 + 2 * r;
  t.ew2 = tw2 + 2 * r;
}

// Forward base with level 2 fused (L = 2, fwd_fused_smem): the x box also covers level 2's halo
// (2 r more pixels on every side; one box, the next item's box prefetched into L2), the Haar pass
// forms Y_2 = Haar(LL(Y_1)) from its 4 x 4 pixel blocks, and Y_1 and a float copy of the pixels
// over the inner region (level 1's tile and halo, every block from block r / 2 on), which are all
// the level-1 and base convs read. The box is then free once the Haar pass is done, and the next
// item's box streams in during the convolutions. Layout: nine filters (base, level 1, level 2)
// rounded up to 128 bytes, the box, the mbarrier, Y_1 (np x 4 x yh x yw), Z_1, Y_2 (np x 4 x eh2 x
// ew2), Z_2, and the float tile (np x 2 yh x 2 yw). Every box origin x0 - 4 r is 16-byte aligned
// (the plan fuses tw % 8 == 0 with even r only), so the box rows are the tile rows (xp = xw).
struct FwdFusedLayout {
  int xh = 0, xw = 0, xp = 0, qh = 0, qw = 0, yh = 0, yw = 0, th2 = 0, tw2 = 0, eh2 = 0, ew2 = 0;
  size_t filter_bytes = 0, box_bytes = 0, floats = 0;
  size_t bytes() const { return filter_bytes + box_bytes + 16 + floats * 4; }
};
// The tile the large planes take (pick_fwd_base_tile: 32 x 64 outputs, one plane per item), which
// the fused forward also has as a compile-time instance (fwd_fused_fixed_tile).
constexpr int kFusedFwdTileH = 32, kFusedFwdTileW = 64;
inline FwdFusedLayout fwd_fused_layout(int k, int th, int tw, int np, int esize) {
  const int r = k / 2;
  FwdFusedLayout t;
  set_level2_tile(t, th / 4, tw / 4, r);  // a quarter of the outputs on each side
  t.qh = 2 * t.eh2;
  t.qw = 2 * t.ew2;
  t.xh = 2 * t.qh;
  t.xw = 2 * t.qw;
  t.yh = th / 2 + 2 * r;
  t.yw = tw / 2 + 2 * r;
  t.xp = t.xw;
  t.filter_bytes = align_up(9 * size_t(filter_stride(k)) * 4, 128);
  t.box_bytes = align_up(size_t(np) * t.xh * t.xp * esize, 128);
  t.floats = size_t(np) * (4 * size_t(t.yh) * t.yw + 4 * size_t(th / 2) * (tw / 2) + 4 * size_t(t.eh2) * t.ew2 +
                           4 * size_t(t.th2) * t.tw2 + 4 * size_t(t.yh) * t.yw);
  return t;
}
// Whether the forward of an L = 2 problem fuses level 2 into the base kernel (its level kernel and
// the R_1 round trip then disappear): stride 1, k = 5 (a specialised size with even r, so the
// fused tile's rows stay 8-byte aligned for the paired convs), tiles of 4k x 8k outputs (level 2's
// tile is a quarter of them, in column pairs),
// rows of whole 16 bytes, box sides <= 256, and the layout keeping the resident blocks of the
// unfused kernel. Returns the shared memory, or 0.
inline size_t fwd_fused_smem(const WtconvTile& t, int L, int64_t W, int k, int s, int esize, int blocks_per_sm) {
  if (L != 2 || s != 1 || k != 5 || t.th % 4 != 0 || t.tw % 8 != 0 || (W * esize) % 16 != 0) return 0;
  const FwdFusedLayout l = fwd_fused_layout(k, t.th, t.tw, t.np, esize);
  if (l.xh > 256 || l.xp > 256 || t.np > 256) return 0;
  if (!layout_keeps_blocks(l.bytes(), t.smem, blocks_per_sm)) return 0;
  return l.bytes();
}

// Whether the forward base stages with TMA, from the problem: a specialised k, x rows a multiple
// of 16 bytes (the map's row stride), an even Y_1 halo width (the Haar pass takes 2 x 4 pixel
// quads), every box side <= 256, and the boxes costing no resident block. Returns the shared
// memory, or 0.
inline size_t fwd_base_tma_smem(const WtconvTile& t, int64_t W, int k, int s, int esize, int blocks_per_sm) {
  const FwdBaseTmaLayout l = fwd_base_tma_layout(k, s, t.th, t.tw, t.np, esize);
  if (!specialised_kernel_size(k) || (W * esize) % 16 != 0 || (l.xw / 2) % 2 != 0 || l.xh > 256 || l.xp > 256 ||
      t.np > 256)
    return 0;
  const size_t bytes = l.bytes();
  if (!layout_keeps_blocks(bytes, t.smem, blocks_per_sm)) return 0;
  return bytes;
}

// Backward base + level 1 kernel: coefficient tile th x tw (pixel tile 2th x 2tw, rows `pitch`
// floats apart). The runtime-k instance has no subband-result tile (its dx convolves per job) and
// writes the correlation partials over its tiles once its items are done, so it asks for the larger
// of the two: at k = 9 (16 x 32 tile) 72.8 KB instead of 80.7, three resident blocks instead of two
// (docs/wtconv.md, perf note 46).
inline size_t bwd_base_smem_floats(int k, int th, int tw, int np, int pitch) {
  const int r = k / 2;
  const size_t eh = th + 2 * r, lp = bwd_level_pitch(k, tw + 2 * r), pixels = 2 * eh * size_t(pitch);
  const size_t tiles = size_t(np) * (2 * pixels + 2 * 4 * eh * lp);
  const size_t partials = size_t(corr_parts_per_warp(k)) * (8 * k * k + 4);
  if (!specialised_kernel_size(k)) return 5 * size_t(filter_stride(k)) + std::max(tiles + kWindowSlack, partials);
  return 5 * size_t(filter_stride(k)) + tiles + size_t(np) * 4 * th * tw + partials;
}

// Backward base with TMA staging (bwd_base_tma_smem): one x box and one dy box per item on one
// mbarrier, single-buffered (the pixel tiles are read until the item's last phase), landing in
// the pixel tiles themselves (rows `pitch` floats apart), which move to 128-byte boundaries; the
// mbarrier follows everything else. Byte offsets from the (128-byte aligned) base; the kernel
// derives its pointers from the same function.
struct BwdBaseTmaLayout {
  int ph = 0;  // box rows (the pixel tile's); its columns are the pitch
  size_t xs = 0, ds = 0, bar = 0, bytes = 0;
};
WTCONV_HOST_DEVICE inline BwdBaseTmaLayout bwd_base_tma_layout(int k, int th, int tw, int np, int pitch) {
  const int r = k / 2, eh = th + 2 * r, ew = tw + 2 * r, parts = corr_parts_per_warp(k);
  const size_t pixels = size_t(np) * 2 * eh * pitch * 4;
  BwdBaseTmaLayout t;
  t.ph = 2 * eh;
  t.xs = (5 * size_t(filter_stride(k)) * 4 + 127) / 128 * 128;
  t.ds = (t.xs + pixels + 127) / 128 * 128;
  const size_t rest = (size_t(np) * (2 * 4 * eh * ew + 4 * th * tw) + size_t(parts) * (8 * k * k + 4)) * 4;
  t.bar = (t.ds + pixels + rest + 7) / 8 * 8;
  t.bytes = t.bar + 8;
  return t;
}

// Whether the backward base stages with TMA, from the problem: a specialised k, fp32, rows a
// multiple of 16 bytes and every tile origin 2 (x0 - r) 16-byte aligned (tw even, r even), so the
// boxes can be the pixel tiles (pitch a multiple of 4 floats, <= 256); an even halo width (2 x 4
// pixel quads); no resident block lost to the alignment. Returns the shared memory, or 0.
inline size_t bwd_base_tma_smem(const WtconvTile& t, int64_t W, int k, int esize) {
  const int r = k / 2, ew = t.tw + 2 * r;
  const BwdBaseTmaLayout l = bwd_base_tma_layout(k, t.th, t.tw, t.np, t.pixel_pitch);
  if (!specialised_kernel_size(k) || esize != 4 || W % 4 != 0 || t.tw % 2 != 0 || r % 2 != 0 ||
      ew % 2 != 0 || t.pixel_pitch % 4 != 0 || t.pixel_pitch > 256 || l.ph > 256 || t.np > 256)
    return 0;
  if (!layout_keeps_blocks(l.bytes, t.smem, bwd_base_blocks_per_sm(k))) return 0;
  return l.bytes;
}

// Backward base with level 2 fused (L = 2, bwd_fused_smem): the x and dy boxes also cover level
// 2's halo (2 r more pixels on every side), the Haar passes form Y_1 and G_1 over the inner
// (th + 2r) x (tw + 2r) coefficients and Y_2, G_2 (np x 4 x eh2 x ew2) from the same 4 x 4 pixel
// blocks, the level-2 convs (th/2 x tw/2 per plane) run beside the level-1 ones, and the dx conv
// adds dX_1, synthesised from them, where it reads a coefficient's dY_1.
// fp32: the boxes are the pixel tiles (ph x pitch floats, the inner tile 2 r pixels in).
// 16-bit (copy): the boxes hold raw elements (box_rows x box_pitch) and land in the G_1 and
// dY_2-dY_1 regions, free until the Haar passes; the x pass converts the inner pixels into the
// float tile xs (ph = 2 (th + 2r) rows) before the dy box's region is written, then the dy pass.
// Layout (byte offsets from the 128-byte aligned base, every region 128-byte aligned): nine
// filters, the x and dy pixel tiles, Y_1, G_1, Y_2, G_2, dY_1, dY_2, the two mbarriers. The
// correlation partials of the block's last step (parts x 12k x k, + parts x 4 sums) reuse the pixel
// tiles.
struct BwdFusedLayout {
  bool copy = false;
  int ph = 0, pitch = 0;              // pixel tile rows and pitch (floats)
  int box_rows = 0, box_pitch = 0;    // box rows and columns (elements)
  int th2 = 0, tw2 = 0, eh2 = 0, ew2 = 0;
  size_t xs = 0, ds = 0, ys = 0, gs = 0, y2s = 0, g2s = 0, dz = 0, dz2 = 0, end = 0;
  size_t xbox = 0, dbox = 0, box_bytes = 0, bar = 0, bytes = 0;
};
// The tile the large planes take (pick_bwd_base_tile: 16 x 32 coefficients, one plane per item),
// which the fused backward also has as a compile-time instance (bwd_fused_fixed_tile).
constexpr int kFusedBwdTileH = 16, kFusedBwdTileW = 32;
WTCONV_HOST_DEVICE inline BwdFusedLayout bwd_fused_layout(int k, int th, int tw, int np, int esize) {
  const int r = k / 2, eh = th + 2 * r, ew = tw + 2 * r;
  BwdFusedLayout t;
  set_level2_tile(t, th / 2, tw / 2, r);  // half the level-1 coefficients on each side
  t.copy = esize != 4;
  t.box_rows = 4 * t.eh2;
  t.ph = t.copy ? 2 * eh : t.box_rows;
  t.pitch = bwd_pixel_pitch(t.copy ? ew : 2 * t.ew2);
  const int per16 = 16 / esize;
  t.box_pitch = t.copy ? (4 * t.ew2 + per16 - 1) / per16 * per16 : t.pitch;
  size_t off = 9 * size_t(filter_stride(k)) * 4;
  const auto region = [&off](size_t bytes) {
    const size_t at = (off + 127) / 128 * 128;
    off = at + bytes;
    return at;
  };
  const size_t tile = size_t(np) * t.ph * t.pitch * 4, sub = size_t(np) * 4 * 4;
  t.xs = region(tile);
  t.ds = region(tile);
  t.ys = region(sub * eh * ew);
  t.gs = region(sub * eh * ew);
  t.y2s = region(sub * t.eh2 * t.ew2);
  t.g2s = region(sub * t.eh2 * t.ew2);
  t.dz = region(sub * th * tw);
  t.dz2 = region(sub * t.th2 * t.tw2);
  t.end = off;
  t.box_bytes = size_t(np) * t.box_rows * t.box_pitch * esize;
  t.xbox = t.copy ? t.gs : t.xs;
  t.dbox = t.copy ? t.dz : t.ds;
  t.bar = (off + 7) / 8 * 8;
  t.bytes = t.bar + 16;  // two mbarriers: the x box's and the dy box's
  return t;
}
// Whether every correlation row of a fused backward layout (th x tw coefficients, one plane) takes
// the quad path in whole chunks, as the compile-time tile's instance assumes (backward_base_kernel:
// the quad alignment of quad_corr_ok from the 128-byte aligned regions and the pitches, and level
// rows of tw and tw / 2 positions a multiple of the chunk).
inline bool bwd_fused_quads_ok(const BwdFusedLayout& l, int k, int th, int tw) {
  const int r = k / 2, eh = th + 2 * r, ew = tw + 2 * r, gp = l.copy ? 0 : 2 * r, pw = l.pitch;
  // The byte address, from the base, of float f of a region (the rows' phase-0 floats, as the
  // kernel passes them to quad_corr_ok).
  const auto at = [](size_t region, int f) { return uintptr_t(region + 4 * size_t(f)); };
  const int level_chunk = corr_quad_chunk(k, 0, r % 4);
  const bool level = (eh * ew) % 4 == 0 && quad_rows_aligned(at(l.ys, 0), ew, at(l.gs, r - r % 4), ew, tw) &&
                     tw % level_chunk == 0;
  const bool base = (l.ph * pw) % 4 == 0 && quad_rows_aligned(at(l.xs, gp * pw + gp + r - r % 4), pw,
                                                             at(l.ds, gp * pw + gp + 2 * r - (2 * r) % 4), pw, 2 * tw);
  const bool level2 = (l.eh2 * l.ew2) % 4 == 0 &&
                      quad_rows_aligned(at(l.y2s, 0), l.ew2, at(l.g2s, r - r % 4), l.ew2, l.tw2) &&
                      l.tw2 % level_chunk == 0;
  return level && base && level2;
}
// Floats of the correlation partials of the fused backward (level 1, base, level 2: 12k jobs).
WTCONV_HOST_DEVICE constexpr int bwd_fused_red_floats(int k) { return corr_parts_per_warp(k) * (12 * k * k + 4); }
// Whether the backward of an L = 2 problem fuses level 2 into the base kernel (its level kernel,
// the dX_1 round trip and its second read of x and dy disappear): k = 5 (the specialised size
// with even r, whose box origins stay 16-byte aligned), tw % 4 == 0 (level 2's tile in column
// pairs), th even, rows of whole 16 bytes, box sides <= 256, 16-bit boxes fitting the regions they
// borrow (G_1 for x; dY_1 and dY_2 for dy), the partials fitting in the pixel tiles, and the layout
// keeping the resident blocks of the unfused kernel. Returns the shared memory, or 0.
inline size_t bwd_fused_smem(const WtconvTile& t, int L, int64_t W, int k, int esize) {
  if (L != 2 || k != 5 || t.th % 2 != 0 || t.tw % 4 != 0 || (W * esize) % 16 != 0) return 0;
  const BwdFusedLayout l = bwd_fused_layout(k, t.th, t.tw, t.np, esize);
  if (l.box_rows > 256 || l.box_pitch > 256 || t.np > 256) return 0;
  if (l.copy && (l.box_bytes > l.y2s - l.gs || l.box_bytes > l.end - l.dz)) return 0;
  if (size_t(bwd_fused_red_floats(k)) * 4 > l.ys - l.xs) return 0;
  if (!layout_keeps_blocks(l.bytes, t.smem, bwd_base_blocks_per_sm(k))) return 0;
  return l.bytes;
}

}  // namespace wtconv_detail
}  // namespace winconv
