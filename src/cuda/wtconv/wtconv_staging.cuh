// Staging into shared memory: a tile filled with several loads in flight, the region a base
// kernel stages, zero fills, and vector stores that stay whole.
#pragma once

#include <cstdint>

namespace winconv {
namespace wtconv_detail {

// Fills n tile elements: store(e, load(e)) for e = threadIdx.x, threadIdx.x + blockDim.x, ...
// N loads of a thread are issued before any of its stores, so N global loads per thread are in
// flight at once; one load per loop iteration left the staging latency-bound (each iteration
// waited a full global-memory round trip, ~0.45 TB/s achieved).
template <int N, typename Load, typename Store>
__device__ __forceinline__ void stage_tile(int n, Load load, Store store) {
  using V = decltype(load(0));
  for (int e0 = threadIdx.x; e0 < n; e0 += N * blockDim.x) {
    V v[N];
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const int e = e0 + u * blockDim.x;
      if (e < n) v[u] = load(e);
    }
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const int e = e0 + u * blockDim.x;
      if (e < n) store(e, v[u]);
    }
  }
}

// The region of a base kernel's pixel tile (px_rows x px_cols, origin 2 r pixels before the
// tile's first coefficient in both axes) that its generic staging would load per item: the whole
// tile, or, when the tile holds its whole plane (one tile per plane: the small planes, 7 x 7 or
// 14 x 14), the plane's pixels alone. The kernels stage generically only the latter (their kPlane
// instances); tiles of larger planes take the quad staging (load_quad_rows) at any width. They sit at tile row and column off = 2 r (the item's origin is then
// -2 r), and everything else the tile holds is zero for every item: the kernel (its kPlane
// instance) writes those zeros, and the Haar blocks of zeros, once before its item loop (nothing
// else writes them) and forms the Haar blocks the plane touches (from block r on) per item. The
// whole tile cost more than 40% of the kernels' instructions at 7 x 7 planes, on halo slots and
// their index math (docs/wtconv.md, perf note 48).
struct StagedRegion {
  bool plane;        // the plane's pixels alone (the kernels' kPlane instances)
  int off;           // first staged pixel row and column of the tile (0 or 2 r); Haar blocks from off / 2
  int rows, cols;    // staged pixels
  int brows, bcols;  // Haar blocks from them (every block the staged pixels touch)
};
inline StagedRegion staged_region(bool whole_plane, int64_t H, int64_t W, int r, int px_rows, int px_cols) {
  if (!whole_plane) return {false, 0, px_rows, px_cols, px_rows / 2, px_cols / 2};
  const int rows = int(H < px_rows - 2 * r ? H : px_rows - 2 * r);
  const int cols = int(W < px_cols - 2 * r ? W : px_cols - 2 * r);
  return {true, 2 * r, rows, cols, (rows + 1) / 2, (cols + 1) / 2};
}
// The divisors of a StagedRegion: staged pixels per plane and per row, Haar blocks likewise.
template <typename Div>
inline void staged_region_divisors(const StagedRegion& sr, Div& pixel_plane, Div& pixel_row, Div& block_plane,
                                   Div& block_row) {
  pixel_plane = Div(uint32_t(sr.rows * sr.cols));
  pixel_row = Div(uint32_t(sr.cols));
  block_plane = Div(uint32_t(sr.brows * sr.bcols));
  block_row = Div(uint32_t(sr.bcols));
}
// n floats of shared memory set to zero by the block (16-byte stores where p and n allow).
__device__ __forceinline__ void zero_floats(float* p, int n) {
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0 && n % 4 == 0) {
    for (int i = threadIdx.x; i < n / 4; i += blockDim.x) reinterpret_cast<float4*>(p)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  } else {
    for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = 0.f;
  }
}

// Four (two) floats into shared memory at p, 16-byte (8-byte) aligned, as one vector store. Written
// in PTX because in the runtime-k base kernels the compiler split the C++ float4 and float2 stores
// of their staging into scalar stores (none of their staging stores was a vector, against 4-8
// 16-byte stores in each k = 3, 5, 7 instance): a warp's quads sit 4 floats apart, so every
// scalar store met a 4-way bank conflict (docs/wtconv.md, perf note 99).
__device__ __forceinline__ void store_shared4(float* p, float a, float b, float c, float d) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(uint32_t(__cvta_generic_to_shared(p))), "f"(a),
               "f"(b), "f"(c), "f"(d)
               : "memory");
}
__device__ __forceinline__ void store_shared4(float* p, float4 v) { store_shared4(p, v.x, v.y, v.z, v.w); }
__device__ __forceinline__ void store_shared2(float* p, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(uint32_t(__cvta_generic_to_shared(p))), "f"(a), "f"(b)
               : "memory");
}
// kPtx: store_shared4 / store_shared2; else C++ vector stores, which the compiler keeps whole in
// the k = 3, 5, 7 instances (their machine code as measured: with the PTX stores their training
// steps ran 0.3-0.6% slower, note 99).
template <bool kPtx>
__device__ __forceinline__ void store_tile4(float* p, float4 v) {
  if constexpr (kPtx) store_shared4(p, v);
  else *reinterpret_cast<float4*>(p) = v;
}
template <bool kPtx>
__device__ __forceinline__ void store_tile2(float* p, float a, float b) {
  if constexpr (kPtx) store_shared2(p, a, b);
  else *reinterpret_cast<float2*>(p) = make_float2(a, b);
}

}  // namespace wtconv_detail
}  // namespace winconv
