// Which work a WTConv block and thread take: a block's items, an item's place in the tile
// grid, and the decomposition of a thread's job index.
#pragma once

#include <cstdint>

#include "cuda/common/fast_divmod.cuh"

namespace winconv {
namespace wtconv_detail {

// Range of items [begin, end) of the block with split index `split` out of `splits`.
__device__ __forceinline__ void item_range(int64_t items, int splits, int split, int64_t* begin, int64_t* end) {
  *begin = items * split / splits;
  *end = items * (split + 1) / splits;
}

// The items of a block, as a first item and a step: a contiguous range (step 1), or with kStrided
// the items split, split + splits, ... Strided, the blocks of one channel work on neighbouring
// tiles at the same time, so a tile's halo is read from L2 while its neighbour's staging has it
// there; a contiguous range re-reads it an item later, after more than the L2 has streamed
// through on large shapes (docs/wtconv.md, perf note 21: the base kernels and the level-2 kernels
// that read x and dy use it; the level kernels reading a stored chain keep ranges).
template <bool kStrided>
__device__ __forceinline__ void block_items(int64_t items, int splits, int split, int64_t* first, int64_t* end,
                                            int64_t* step) {
  if constexpr (kStrided) {
    *first = split;
    *end = items;
    *step = splits;
  } else {
    item_range(items, splits, split, first, end);
    *step = 1;
  }
}

// f(p, y) for the rows first, first + step, ... of np planes of `rows` rows each (row index
// p * rows + y), stepped without a division per row (a runtime divide is ~20 instructions).
// kOnePlane: the caller's np is 1 (a fixed-tile instance), so the plane carry disappears.
template <bool kOnePlane = false, typename F>
__host__ __device__ __forceinline__ void for_strided_rows(int first, int step, int rows, int np, F f) {
  if constexpr (kOnePlane) {
    for (int y = first; y < rows; y += step) f(0, y);
  } else {
    for (int p = 0, y = first;; y += step) {
      while (y >= rows) {
        y -= rows;
        ++p;
      }
      if (p >= np) return;
      f(p, y);
    }
  }
}

// threadIdx.x, read where it is called: the compiler cannot hoist the read (or values derived
// from it) out of a loop and keep them live across it.
__device__ __forceinline__ int opaque_thread_index() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// f(e) for the jobs e < jobs of this thread: e = threadIdx.x, then strided by blockDim.x.
// kOnePass: the caller guarantees jobs <= blockDim.x (a fixed tile, at most one job per thread),
// so there is no loop for the compiler to keep.
// kFirst (with kOnePass): the jobs go to threads kFirst .. kFirst + jobs - 1, so that two phases
// without a barrier between them can run on disjoint threads.
template <bool kOnePass = false, int kFirst = 0, typename F>
__device__ __forceinline__ void for_thread_jobs(int jobs, F&& f) {
  static_assert(kOnePass || kFirst == 0, "a thread offset needs one job per thread");
  if constexpr (kOnePass) {
    const int e = int(threadIdx.x) - kFirst;
    if (uint32_t(e) < uint32_t(jobs)) f(e);
  } else {
    for (int e = threadIdx.x; e < jobs; e += blockDim.x) f(e);
  }
}

// The launcher's divisor d, or with kFixed a TileDivmod by n, which the kernels' fixed-tile
// instances compute from compile-time extents (constant operands, no parameter loads).
template <bool kFixed, typename D>
__device__ __forceinline__ decltype(auto) fixed_or(const D& d, int n) {
  if constexpr (kFixed) return TileDivmod(uint32_t(n));
  else return (d);
}

// Decomposition of a strip job index: column fastest (conflict-free loads), then strip, then
// subband/plane slot. The divisors are precomputed (FastDivmod): a hardware-less integer divide
// costs ~20 instructions, and these kernels are issue-bound.
struct StripJob {
  int col, row0, slot;
};
template <typename Div>
__device__ __forceinline__ StripJob strip_job(int e, const Div& cols, const Div& strips,
                                              int rows_per_strip) {
  StripJob j;
  uint32_t q, col, slot, strip;
  cols.divmod(uint32_t(e), q, col);
  strips.divmod(q, slot, strip);
  j.col = int(col);
  j.row0 = int(strip) * rows_per_strip;
  j.slot = int(slot);
  return j;
}

// (plane, row, column) of element e of np planes of rows x cols, with divisors plane = rows*cols
// and row = cols.
struct Pos3 {
  int p, y, x;
};
template <typename Div>
__device__ __forceinline__ Pos3 split3(int e, const Div& plane, const Div& row) {
  uint32_t p, rem, y, x;
  plane.divmod(uint32_t(e), p, rem);
  row.divmod(rem, y, x);
  return Pos3{int(p), int(y), int(x)};
}

struct TileGeom {
  int th, tw, np, tiles_y, tiles_x;
  int64_t items;
  int splits;
  bool items32;                       // items < 2^32: the item decode runs in 32 bits
  FastDivmod per_group, tiles_x_div;  // tiles_y * tiles_x, tiles_x
};

struct ItemPos {
  int b0, y0, x0;  // first plane (b) of the item, tile origin in the tile's grid
};

__host__ __device__ __forceinline__ ItemPos decode_item(const TileGeom& g, int64_t item) {
  int bg, ty, tx;
  if (g.items32) {
    uint32_t q, rem, y, x;
    g.per_group.divmod(uint32_t(item), q, rem);
    g.tiles_x_div.divmod(rem, y, x);
    bg = int(q); ty = int(y); tx = int(x);
  } else {
    const int64_t per_group = int64_t(g.tiles_y) * g.tiles_x;
    bg = int(item / per_group);
    const int rem = int(item % per_group);
    ty = rem / g.tiles_x;
    tx = rem % g.tiles_x;
  }
  ItemPos p;
  p.b0 = bg * g.np;
  p.y0 = ty * g.th;
  p.x0 = tx * g.tw;
  return p;
}

// The position of item + step from that of item, without the decode's two divisions: the block's
// items go in a fixed step (block_items), so the step is decoded once (d) and added axis by axis
// with one carry each (every component of d, and of a position, is below its axis' extent, so a
// sum is below twice it). The base kernels' items are short enough on big planes that the decode,
// which every warp ran at each item, was ~3% of the forward's instructions.
struct ItemStep {
  ItemPos d;
  int xspan, yspan;  // tiles_x * tw, tiles_y * th
};
__host__ __device__ __forceinline__ ItemStep item_step(const TileGeom& g, int64_t step) {
  return {decode_item(g, step), g.tiles_x * g.tw, g.tiles_y * g.th};
}
__host__ __device__ __forceinline__ ItemPos next_item(ItemPos p, const ItemStep& s, const TileGeom& g) {
  p.x0 += s.d.x0;
  if (p.x0 >= s.xspan) {
    p.x0 -= s.xspan;
    p.y0 += g.th;
  }
  p.y0 += s.d.y0;
  if (p.y0 >= s.yspan) {
    p.y0 -= s.yspan;
    p.b0 += g.np;
  }
  p.b0 += s.d.b0;
  return p;
}

}  // namespace wtconv_detail
}  // namespace winconv
