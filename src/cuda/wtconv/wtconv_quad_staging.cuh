// Quad staging with the Haar analysis on the fly: activation blocks of 2 x 4 pixels loaded and
// stored with their Haar blocks, and the Haar passes over a tile the copy engine (TMA) staged.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "wtconv_haar.cuh"
#include "wtconv_items.cuh"
#include "wtconv_layouts.h"
#include "wtconv_staging.cuh"
#include "wtconv_values.cuh"

namespace winconv {
namespace wtconv_detail {

// Quad staging with the Haar analysis on the fly: a 2-row x 4-column block of an activation plane
// (columns x .. x + 3, x a multiple of 4) is two 2x2 Haar blocks, loaded by one thread and stored
// with its two Haar blocks in one pass (store_quad_rows). A block costs one index decomposition
// for eight pixels, where the generic staging decomposed every pixel and then every Haar block
// again in a second pass (docs/wtconv.md, perf note 66). The rows load V elements at a time
// (quad_load_width):
//   V = 4: W % 4 == 0 and a 4-element-aligned base; each row is one aligned load, wholly inside or
//          outside the row;
//   V = 2: W even and a 2-element-aligned base; two aligned loads per row, each pair inside or past
//          the row (an even width that is not a multiple of 4 took the element loads before,
//          perf note 109);
//   V = 1: any W; four element loads per row, each column tested against W.
// A quad's two rows as loaded: fp32 as floats; 16-bit rows of vector or pair loads as their raw 8
// bytes, half the registers, converted when stored (store_quad_rows), so that a thread keeps twice
// as many quads in flight for the same registers. Element loads (V = 1) are converted as loaded:
// packing 16-bit elements into raw rows only to unpack them when stored adds instructions and
// saves no load (docs/wtconv.md, perf note 69).
template <typename T>
struct QuadRows {
  uint2 r0, r1;
};
template <>
struct QuadRows<float> {
  float4 r0, r1;
};
// One row of a quad as loaded: V > 1 as the row's raw bytes (floats for fp32, raw 8 bytes for
// 16-bit types); V = 1 as its four elements, converted once the loads are out (quad_row_floats).
template <typename T>
struct ElemRow {
  T e[4];
};
template <typename T, int V>
using QuadRow = std::conditional_t<(V > 1), decltype(QuadRows<T>::r0), ElemRow<T>>;
template <typename T, int V>
using LoadedQuad = std::conditional_t<(V > 1), QuadRows<T>, QuadRows<float>>;
// The widest load a plane's quad rows allow (V above): 4, 2 or 1.
template <typename T>
WTCONV_HOST_DEVICE inline int quad_load_width(const T* plane_base, int64_t W) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(plane_base);
  if (W % 4 == 0 && at % (4 * sizeof(T)) == 0) return 4;
  if (W % 2 == 0 && at % (2 * sizeof(T)) == 0) return 2;
  return 1;
}
// Calls f(std::integral_constant<int, V>{}) for V = v (4, 2 or 1): the load path as a template
// parameter, chosen once per item by the caller; a run-time choice inside the staging loop would
// keep every load path in it.
// Host and device: the launchers pick a kernel instance the same way.
template <typename F>
WTCONV_HOST_DEVICE inline void with_quad_load_width(int v, F&& f) {
  if (v == 4) f(std::integral_constant<int, 4>{});
  else if (v == 2) f(std::integral_constant<int, 2>{});
  else f(std::integral_constant<int, 1>{});
}
// Columns x .. x + 3 (x a multiple of 4) of the row at src (which points at column x) of a W-wide
// plane, V elements a load; zeros where !in and past column W - 1.
template <int V, typename T>
__device__ __forceinline__ QuadRow<T, V> load_quad_row(const T* src, int x, int W, bool in) {
  static_assert(V == 4 || V == 2 || V == 1, "rows load 4, 2 or 1 elements at a time");
  QuadRow<T, V> row;
  if constexpr (V == 4) {
    static_assert(sizeof(row) == 4 * sizeof(T), "a row of the block is four elements");
    row = QuadRow<T, V>{};  // zero bits: +0 in every type
    if (in) row = *reinterpret_cast<const QuadRow<T, V>*>(src);
  } else if constexpr (V == 2) {
    using Pair = std::conditional_t<std::is_same<T, float>::value, float2, uint32_t>;
    static_assert(sizeof(Pair) == 2 * sizeof(T) && sizeof(row) == 2 * sizeof(Pair), "a row is two pairs");
    Pair p[2] = {Pair{}, Pair{}};  // zero bits: +0 in every type
    if (in) p[0] = *reinterpret_cast<const Pair*>(src);
    if (in && x + 2 < W) p[1] = *reinterpret_cast<const Pair*>(src + 2);
    memcpy(&row, p, sizeof row);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      row.e[i] = T(0.f);
      if (in && x + i < W) row.e[i] = src[i];
    }
  }
  return row;
}
// A row as floats: raw 16-bit rows and element rows converted, float rows (fp32, or element rows
// converted already) as they are.
template <typename T, typename Row>
__device__ __forceinline__ float4 quad_row_floats(Row row) {
  if constexpr (std::is_same<Row, float4>::value) return row;
  else if constexpr (std::is_same<Row, ElemRow<T>>::value)
    return make_float4(to_float(row.e[0]), to_float(row.e[1]), to_float(row.e[2]), to_float(row.e[3]));
  else return raw4_to_float4<T>(row);
}
// The block's two rows (y, y + 1; zeros outside the plane and past the batch: !in_plane). Element
// rows are converted after both rows' loads are issued: a conversion next to its load makes the
// thread wait for that load before it issues the next one.
template <int V, typename T>
__device__ __forceinline__ LoadedQuad<T, V> load_quad_rows(const T* plane, int H, int W, int y, int x,
                                                           bool in_plane) {
  const bool inside = in_plane && x >= 0 && x < W;  // x % 4 == 0: a block left of column 0 lies wholly outside
  const T* src = plane + int64_t(y) * W + x;
  const bool in0 = y >= 0 && y < H, in1 = y + 1 >= 0 && y + 1 < H;
  const QuadRow<T, V> r0 = load_quad_row<V>(src, x, W, inside && in0);
  const QuadRow<T, V> r1 = load_quad_row<V>(src + W, x, W, inside && in1);
  if constexpr (V > 1) return QuadRows<T>{r0, r1};
  else return QuadRows<float>{quad_row_floats<T>(r0), quad_row_floats<T>(r1)};
}
// Stores the block at tile columns col0..col0+3 (col0 and ncols even; columns outside [0, ncols)
// dropped) of tile rows row, row + 1 (pitch `pitch`), and its two Haar blocks at subband row row / 2,
// columns col0 / 2 + {0, 1}, into the four subband planes of `sub` (plane stride `sub_plane`,
// pitch `sub_pitch` = ncols / 2). kPtx: the vector stores written in PTX (store_tile4; the
// runtime-k instances).
template <bool kPtx, typename T>
__device__ __forceinline__ void store_quad_rows(const QuadRows<T>& q, float* tile, int pitch, int row, int col0,
                                                int ncols, float* sub, int sub_plane, int sub_pitch) {
  const float4 r0 = quad_row_floats<T>(q.r0), r1 = quad_row_floats<T>(q.r1);
  const float a[4] = {r0.x, r0.y, r0.z, r0.w}, b[4] = {r1.x, r1.y, r1.z, r1.w};
  // A warp's quads sit 4 floats apart: scalar stores meet 4-way bank conflicts (2-way in the
  // subbands), so whole aligned quads go out as one 16-byte store per row and one 8-byte store
  // per subband.
  const bool inside = col0 >= 0 && col0 + 4 <= ncols;
  // t0 and d0 are dereferenced only for a quad inside the tile. Forming them first, and testing
  // their alignment, keeps the machine code that was measured: forming them only inside cost
  // the base kernels 2-4% (docs/wtconv.md, note 18).
  float* t0 = tile + row * pitch + col0;
  const uintptr_t t0_phase = reinterpret_cast<uintptr_t>(t0) | (uintptr_t(pitch) * sizeof(float));
  if (inside && (t0_phase & 15) == 0) {
    store_tile4<kPtx>(t0, r0);
    store_tile4<kPtx>(t0 + pitch, r1);
  } else if ((t0_phase & 7) == 0) {
    // 8-byte column pairs, each inside the tile or outside it (col0 and ncols even): the quads of
    // tiles 2 floats off the 16-byte grid (odd r, k = 3 and 7: the tile starts 2 pixels before a
    // multiple of 4), and the edge quads of the others. Half the instructions and wavefronts of
    // scalar stores, and the same path for a warp's inside and edge quads (docs/wtconv.md, perf
    // note 109).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = col0 + 2 * h;
      if (col >= 0 && col < ncols) {
        store_tile2<kPtx>(t0 + 2 * h, a[2 * h], a[2 * h + 1]);
        store_tile2<kPtx>(t0 + pitch + 2 * h, b[2 * h], b[2 * h + 1]);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = col0 + i;
      if (col >= 0 && col < ncols) {
        tile[row * pitch + col] = a[i];
        tile[(row + 1) * pitch + col] = b[i];
      }
    }
  }
  float z[2][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) haar4(a[2 * h], a[2 * h + 1], b[2 * h], b[2 * h + 1], z[h]);
  float* d0 = sub + (row >> 1) * sub_pitch + (col0 >> 1);
  if (inside && ((reinterpret_cast<uintptr_t>(d0) | (uintptr_t(sub_plane) * sizeof(float))) & 7) == 0) {
#pragma unroll
    for (int t = 0; t < 4; ++t) store_tile2<kPtx>(d0 + t * sub_plane, z[0][t], z[1][t]);
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = col0 + 2 * h;
      if (col >= 0 && col < ncols) {
        float* dst = sub + (row >> 1) * sub_pitch + (col >> 1);
#pragma unroll
        for (int t = 0; t < 4; ++t) dst[t * sub_plane] = z[h][t];
      }
    }
  }
}

// TMA staging of the base kernels, the Haar pass: the level-1 subbands (qh x qw per plane) of the
// pixel tile that the copy engine left in `buf` (np x xh rows, `pitch` elements apart, the tile's
// column 0 at column `off`, even: the box starts 16-byte aligned), one 2 x 4 pixel quad (two 2x2
// blocks) per job. With `copy` the tile is also written out as floats (xs, rows xw floats apart)
// for the convolutions; without (fp32, off = 0) they read the buffer itself.
template <typename T>
__device__ __forceinline__ void haar_pass_from_tile(const T* buf, int pitch, int off, bool copy, float* xs, int xh,
                                                    int xw, float* ys, int qh, int qw, int np,
                                                    const TileDivmod& hplane, const TileDivmod& hrow) {
  const int nq = qw / 2;
  for (int e = threadIdx.x; e < np * qh * nq; e += blockDim.x) {
    const Pos3 q = split3(e, hplane, hrow);
    const T* src = buf + (q.p * xh + 2 * q.y) * pitch + off + 4 * q.x;
    float4 u, v;
    if (sizeof(T) == 4 && !copy) {
      u = load4(src);
      v = load4(src + pitch);
    } else {
      const float2 u0 = load2(src), u1 = load2(src + 2), v0 = load2(src + pitch), v1 = load2(src + pitch + 2);
      u = make_float4(u0.x, u0.y, u1.x, u1.y);
      v = make_float4(v0.x, v0.y, v1.x, v1.y);
    }
    if (copy) {
      float* dst = xs + (q.p * xh + 2 * q.y) * xw + 4 * q.x;
      *reinterpret_cast<float4*>(dst) = u;
      *reinterpret_cast<float4*>(dst + xw) = v;
    }
    float z0[4], z1[4];
    haar4(u.x, u.y, v.x, v.y, z0);
    haar4(u.z, u.w, v.z, v.w, z1);
    float* dst = ys + q.p * 4 * qh * qw + q.y * qw + 2 * q.x;  // 8-byte aligned: qw, qh * qw even
#pragma unroll
    for (int t = 0; t < 4; ++t) *reinterpret_cast<float2*>(dst + t * qh * qw) = make_float2(z0[t], z1[t]);
  }
}

// The level-2 fused Haar pass (forward and backward base kernels): per 4 x 4 pixel block of the box
// (np x xh rows, `pitch` elements apart, the tile's column 0 at `off`), its four 2x2 blocks' Y_1
// and the Haar analysis of their four LL values, Y_2 (np x 4 x eh2 x ew2; X_1 = LL(x) with the
// cascade's formula, which haar4's LL is, rounded through Tll, the type the cascade would store
// X_1 in). Y_1 (np x 4 x qh x qw) covers the blocks from block (b0, b0) on; with kInner the blocks
// outside it are skipped (the fused kernels keep Y_1 over the inner region only), without it Y_1
// covers every block (b0 = 0). With `copy` the pixels also go to the float tile (rows xw apart):
// every block's (np x xh rows), or with kInner the inner blocks' (np x 2 qh rows).
// kOnePass: at most one block per thread (for_thread_jobs; a fixed tile).
template <typename T, bool kInner = false, typename Tll = float, bool kOnePass = false>
__device__ __forceinline__ void haar2_pass_from_tile(const T* buf, int pitch, int off, bool copy, float* xs, int xh,
                                                     int xw, float* ys, int qh, int qw, int b0, float* y2s, int eh2,
                                                     int ew2, int np, const TileDivmod& plane,
                                                     const TileDivmod& row) {
  for_thread_jobs<kOnePass>(np * eh2 * ew2, [&](int e) {
    const Pos3 q = split3(e, plane, row);
    const T* src = buf + (q.p * xh + 4 * q.y) * pitch + off + 4 * q.x;
    const int by = q.y - b0, bx = q.x - b0;
    const bool inner = !kInner || (unsigned(by) < unsigned(qh / 2) && unsigned(bx) < unsigned(qw / 2));
    float4 px[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (sizeof(T) == 4 && (off & 3) == 0) {  // 16-byte aligned (pitch % 4 == 0): one load per row
        px[i] = load4(src + i * pitch);
      } else {
        const float2 u0 = load2(src + i * pitch), u1 = load2(src + i * pitch + 2);
        px[i] = make_float4(u0.x, u0.y, u1.x, u1.y);
      }
      if constexpr (kInner) {
        if (copy && inner) *reinterpret_cast<float4*>(xs + (q.p * 2 * qh + 4 * by + i) * xw + 4 * bx) = px[i];
      } else {
        if (copy) *reinterpret_cast<float4*>(xs + (q.p * xh + 4 * q.y + i) * xw + 4 * q.x) = px[i];
      }
    }
    float z[2][2][4];  // [block row][block column][subband]
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      haar4(px[2 * i].x, px[2 * i].y, px[2 * i + 1].x, px[2 * i + 1].y, z[i][0]);
      haar4(px[2 * i].z, px[2 * i].w, px[2 * i + 1].z, px[2 * i + 1].w, z[i][1]);
    }
    if (inner) {
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int i = 0; i < 2; ++i)  // 8-byte aligned: qw, qh * qw even
          *reinterpret_cast<float2*>(ys + (q.p * 4 + t) * qh * qw + (2 * by + i) * qw + 2 * bx) =
              make_float2(z[i][0][t], z[i][1][t]);
    }
    const auto ll = [](float v) { return to_float(from_float<Tll>(v)); };
    float y2[4];
    haar4(ll(z[0][0][0]), ll(z[0][1][0]), ll(z[1][0][0]), ll(z[1][1][0]), y2);
#pragma unroll
    for (int t = 0; t < 4; ++t) y2s[(q.p * 4 + t) * eh2 * ew2 + q.y * ew2 + q.x] = y2[t];
  });
}

// Index divisors of a base kernel's quad staging (set on the host by quad_divisors): jobs per
// plane (tile rows x quads per row) and quads per row.
template <typename Div>
struct QuadDivisors {
  Div plane, row;
};

}  // namespace wtconv_detail
}  // namespace winconv
