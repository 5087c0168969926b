// Haar cascade: the raw LL chain X_{a+1..a+m} (forward) or the LL chain of G = Haar cascade of dy
// (backward) from one pass over level a; each level is written once (N/4 + N/16 + ... floats) and
// the input read once. Planes that one T x T tile holds (T a power of two, cascade_plane_tile_log2) and
// whose rows are not whole 16-byte quads take the kPlane path: a block halves np planes m times in
// shared memory. Every other plane takes the band path: each thread forms all m levels of a
// column quad of 2^m pixel rows in registers (haar_cascade_band_kernel).
#include "wtconv_kernels.cuh"
#include "wtconv_haar.cuh"
#include "wtconv_level_tiles.cuh"
#include "wtconv_plan.h"
#include "wtconv_quad_staging.cuh"
#include "wtconv_values.cuh"

namespace winconv {
namespace wtconv_detail {

template <typename Tfirst>
struct CascadeGeom {
  int64_t planes;
  int hin, win, levels, lt, np;   // kPlane: T = 1 << lt, np planes per block
  bool plane_path;                // the kPlane path (haar_cascade_planes), else the band path
  // kPlane (one tile per plane): the np planes of a block are contiguous in `in` and
  // in every level's output, so each level writes its grid rounded up to even (zeros past the
  // grid: what the next level's Haar blocks read there), instead of the whole tile with a bounds
  // test per element (haar_cascade_planes).
  FastDivmod lvl_plane[5], lvl_row[5];   // per level: even(hout) * even(wout), even(wout) (last: exact)
  // Band path: thread (blockIdx.x * kBlockThreads + threadIdx.x) of plane group blockIdx.y ->
  // (plane in the group, band, quad column); band_vec: the rows' load width (quad_load_width: 4,
  // 2 or 1); band_pair1: level 1's coefficient pairs stored as one 2-element store.
  FastDivmod band_plane, band_row;
  uint32_t band_planes_per_y;
  int band_vec;
  bool band_pair1;
  Tfirst* first;   // out level a+1, or null: computed for the deeper levels, not stored
  float* deeper[4];  // levels a+2..a+levels
  int hout[5], wout[5];
};

// The kPlane instance (CascadeGeom::lvl_plane): one tile per plane. Level 1 reads each
// coefficient's 2 x 2 pixel block from global memory (zeros past odd plane edges), so nothing
// stages or zeroes the pixel tile and one index split serves four pixels: staged through shared
// memory with two splits per pixel, this kernel was issue-bound at 82% (14 x 14 planes, L = 3:
// 561 instructions per warp for 196 pixels; docs/wtconv.md, perf note 50). Same inputs to the same
// haar_ll, so the same bits.
template <typename Tin, typename Tfirst>
__device__ __forceinline__ void haar_cascade_planes(const Tin* __restrict__ in, const CascadeGeom<Tfirst>& g,
                                                    float* buf0, float* buf1, int64_t plane0) {
  const int np = int(g.planes - plane0 < g.np ? g.planes - plane0 : g.np);  // planes of this block
  const int hin = g.hin, win = g.win;
  const Tin* src = in + plane0 * hin * win;  // the block's planes, contiguous: 32-bit offsets below
  int ls = g.lt - 1;                         // level-1 side 1 << ls in buf0
  {
    const int hout = g.hout[0], wout = g.wout[0];
    Tfirst* out = g.first != nullptr ? g.first + plane0 * hout * wout : nullptr;
    for (int e = threadIdx.x; e < np * int(g.lvl_plane[0].divisor); e += blockDim.x) {
      uint32_t p, rem, yy, xx;
      g.lvl_plane[0].divmod(uint32_t(e), p, rem);
      g.lvl_row[0].divmod(rem, yy, xx);
      float ll = 0.f;  // past the grid: the zero padding of level 2's blocks
      if (int(yy) < hout && int(xx) < wout) {
        const int y = 2 * int(yy), x = 2 * int(xx);
        const float4 v = load_block_2x2(src + int(p) * hin * win + y * win + x, win, x + 1 < win, y + 1 < hin);
        ll = haar_ll(v.x, v.y, v.z, v.w);
        if (out != nullptr) out[int(p) * hout * wout + int(yy) * wout + int(xx)] = from_float<Tfirst>(ll);
      }
      if (g.levels > 1) buf0[(p << (2 * ls)) + (yy << ls) + xx] = ll;
    }
  }
  for (int j = 1; j < g.levels; ++j) {
    __syncthreads();
    const int side = 1 << ls, ln = ls - 1, hout = g.hout[j], wout = g.wout[j];
    float* out = g.deeper[j - 1] + plane0 * hout * wout;
    for (int e = threadIdx.x; e < np * int(g.lvl_plane[j].divisor); e += blockDim.x) {
      uint32_t p, rem, yy, xx;
      g.lvl_plane[j].divmod(uint32_t(e), p, rem);
      g.lvl_row[j].divmod(rem, yy, xx);
      float ll = 0.f;  // past the grid: the zero padding of the next level's blocks
      if (int(yy) < hout && int(xx) < wout) {
        const float* s = buf0 + (p << (2 * ls)) + (2 * yy) * side + 2 * xx;
        ll = haar_ll(s[0], s[1], s[side], s[side + 1]);
        out[int(p) * hout * wout + int(yy) * wout + int(xx)] = ll;
      }
      buf1[(p << (2 * ln)) + (yy << ln) + xx] = ll;
    }
    float* t = buf0; buf0 = buf1; buf1 = t;
    ls = ln;
  }
}

// The kPlane kernel: a block takes np whole planes (CascadeGeom::np), one per tile.
template <typename Tin, typename Tfirst>
__device__ __forceinline__ void haar_cascade_block(const Tin* __restrict__ in, const CascadeGeom<Tfirst>& g,
                                                   uint32_t block) {
  extern __shared__ float smem[];
  const int TT = 1 << (2 * g.lt);
  haar_cascade_planes(in, g, smem, smem + g.np * TT, int64_t(block) * g.np);
}

template <typename Tin, typename Tfirst>
__global__ void __launch_bounds__(kBlockThreads) haar_cascade_kernel(const Tin* __restrict__ in, CascadeGeom<Tfirst> g) {
  haar_cascade_block<Tin, Tfirst>(in, g, blockIdx.x);
}

// The band path (planes larger than one tile): a thread takes one column quad (4 pixels) of a
// band of 2^M pixel rows and forms every level of it in registers, top to bottom: level 1's two
// coefficients per row pair, level 2 from two of those rows, and level j >= 3 from two rows of
// level j - 1 of its own lane and of the lane 2^(j-3) to its right (__shfl_down_sync). Consecutive
// threads take consecutive quads of a band row (its quads rounded up to a multiple of the 2^(M-2)
// lanes a level-M coefficient spans, so those lanes share a warp and line up), so every load
// instruction of a warp reads contiguous bytes. No shared memory, no barrier, no per-element
// index split: the tiled form staged the tile and split an index per coefficient and level, and
// ran at 1.2-2.4 TB/s, issue-bound (46-53 instructions per pixel; docs/wtconv.md, perf note 108).
// Pixels past the plane read as zeros, so coefficients past a level's grid are zero, as the
// zero padding of odd extents requires; the same four values go to the same haar_ll in the same
// order as before, so the same bits.
template <int M, int V, typename Tin, typename Tfirst>
__global__ void __launch_bounds__(kBlockThreads)
    haar_cascade_band_kernel(const Tin* __restrict__ in, CascadeGeom<Tfirst> g) {
  constexpr int S = 1 << M;           // pixel rows of a band
  constexpr int kRows = S < 8 ? S : 8;  // rows loaded before any is used: 8 loads in flight
  uint32_t p_off, rem, band, q;
  g.band_plane.divmod(blockIdx.x * kBlockThreads + threadIdx.x, p_off, rem);
  g.band_row.divmod(rem, band, q);
  const int64_t plane_raw = int64_t(blockIdx.y) * g.band_planes_per_y + p_off;
  // Threads past the last plane still run every shuffle, on zeros, and store nothing.
  const bool active = p_off < g.band_planes_per_y && plane_raw < g.planes;
  const int64_t plane = active ? plane_raw : 0;
  const int hin = g.hin, win = g.win, y0 = int(band) << M, x0 = 4 * int(q);
  const Tin* px = in + (plane * hin + y0) * win + x0;
  const bool quad_in = active && x0 < win;
  // Level j's output row of this band and whether this lane stores there: level 1 the pair at
  // column 2 q, level 2 column q, level j >= 3 column q >> (j - 2) from the lane whose q it divides.
  Tfirst* out1 = g.first != nullptr ? g.first + (plane * g.hout[0] + (y0 >> 1)) * g.wout[0] + 2 * int(q) : nullptr;
  const bool st1a = out1 != nullptr && active && 2 * int(q) < g.wout[0];
  const bool st1b = out1 != nullptr && active && 2 * int(q) + 1 < g.wout[0];
  float* out[M + 1];
  bool st[M + 1];
#pragma unroll
  for (int j = 2; j <= M; ++j) {
    const int xj = int(q) >> (j - 2);
    out[j] = g.deeper[j - 2] + (plane * g.hout[j - 1] + (y0 >> j)) * g.wout[j - 1] + xj;
    st[j] = active && (int(q) & ((1 << (j - 2)) - 1)) == 0 && xj < g.wout[j - 1];
  }
  float top1a = 0.f, top1b = 0.f;  // level 1's upper row pair, until its lower one (M >= 2)
  float top[M + 1];                // top[j]: level j's upper value, until its lower one (j >= 2)
#pragma unroll
  for (int j = 0; j <= M; ++j) top[j] = 0.f;
#pragma unroll
  for (int r0 = 0; r0 < S; r0 += kRows) {
    QuadRow<Tin, V> rows[kRows];  // as loaded (load_quad_row), converted when used
#pragma unroll
    for (int i = 0; i < kRows; ++i)
      rows[i] = load_quad_row<V>(px + int64_t(r0 + i) * win, x0, win, quad_in && y0 + r0 + i < hin);
#pragma unroll
    for (int i = 0; i < kRows; i += 2) {
      const int r = (r0 + i) / 2;  // row pair of the band: level 1's row r
      const float4 u = quad_row_floats<Tin>(rows[i]), w = quad_row_floats<Tin>(rows[i + 1]);
      const float a = haar_ll(u.x, u.y, w.x, w.y), b = haar_ll(u.z, u.w, w.z, w.w);
      if ((y0 >> 1) + r < g.hout[0]) {
        Tfirst* o = out1 + int64_t(r) * g.wout[0];
        if (g.band_pair1) {  // even level-1 width: the pair is inside the row or past it
          if (st1a) store2(o, a, b);
        } else {
          if (st1a) o[0] = from_float<Tfirst>(a);
          if (st1b) o[1] = from_float<Tfirst>(b);
        }
      }
      if constexpr (M >= 2) {
        if (r % 2 == 0) {
          top1a = a;
          top1b = b;
          continue;
        }
        float v = haar_ll(top1a, top1b, a, b);  // level 2, band row r / 2
        if (st[2] && (y0 >> 2) + r / 2 < g.hout[1]) out[2][int64_t(r / 2) * g.wout[1]] = v;
#pragma unroll
        for (int j = 3; j <= M; ++j) {
          // v is level j - 1's value of band row r >> (j - 2): an upper one waits for its lower one.
          if (((r >> (j - 2)) & 1) == 0) {
            top[j - 1] = v;
            break;
          }
          const int d = 1 << (j - 3);  // lanes between horizontally adjacent level j - 1 values
          const float tn = __shfl_down_sync(0xffffffffu, top[j - 1], d);
          const float bn = __shfl_down_sync(0xffffffffu, v, d);
          v = haar_ll(top[j - 1], tn, v, bn);
          const int yj = r >> (j - 1);
          if (st[j] && (y0 >> j) + yj < g.hout[j - 1]) out[j][int64_t(yj) * g.wout[j - 1]] = v;
        }
      }
    }
  }
}

// Two kPlane cascades of one plan in one launch (the backward's chains of x and dy, one-tile
// planes): blocks [0, blocks0) run the first, the others the second. Only for the kPlane path: with
// both paths in one kernel the generic cascades of large planes ran ~1.3% slower per training step
// (docs/wtconv.md, perf note 51), and a launch saved matters only where the cascades are short.
template <typename Tin, typename Tfirst>
__global__ void __launch_bounds__(kBlockThreads)
    haar_cascade_pair_kernel(const Tin* __restrict__ in0, CascadeGeom<Tfirst> g0, uint32_t blocks0,
                             const Tin* __restrict__ in1, CascadeGeom<Tfirst> g1) {
  const bool second = blockIdx.x >= blocks0;
  haar_cascade_block<Tin, Tfirst>(second ? in1 : in0, second ? g1 : g0, second ? blockIdx.x - blocks0 : blockIdx.x);
}

// The geometry of one cascade launch (arguments as launch_haar_cascade's), its grid and bytes of
// shared memory.
template <typename Tin, typename Tfirst>
CascadeGeom<Tfirst> cascade_geom(const Tin* in, int64_t planes, int64_t hin, int64_t win, int levels, Tfirst* first,
                                 float* const* deeper, const int64_t* hout, const int64_t* wout, dim3* grid_out,
                                 size_t* smem_out) {
  CascadeGeom<Tfirst> g{};
  g.first = first;
  g.planes = planes;
  g.hin = int(hin); g.win = int(win); g.levels = levels;
  for (int j = 0; j < 5; ++j) {
    if (j > 0) g.deeper[j - 1] = j < levels ? deeper[j - 1] : nullptr;
    g.hout[j] = j < levels ? int(hout[j]) : 0;
    g.wout[j] = j < levels ? int(wout[j]) : 0;
  }
  const auto aligned = [&](const void* p, size_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  g.lt = cascade_plane_tile_log2(hin, win, levels);
  const int quad_vec = quad_load_width(in, win);
  const bool vec4 = quad_vec == 4;
  // One tile per plane, rows not 4-element loads: the planes alone (haar_cascade_planes).
  g.plane_path = g.lt >= 0 && !(g.lt >= 2 && vec4);
  if (g.plane_path) {
    const int T = 1 << g.lt;
    int np = 2048 / (T * T);  // two 32x32 planes per block: two 16-byte loads in flight per thread
    if (np < 1) np = 1;
    if (np > planes) np = int(planes);
    g.np = np;
    for (int j = 0; j < levels; ++j) {
      // Rounded up to even except at the last level, whose blocks nothing reads (and whose grid may
      // fill a 1 x 1 tile side already).
      const int64_t pad = j + 1 < levels ? 1 : 0;
      const uint32_t eh = uint32_t(hout[j] + (hout[j] & pad)), ew = uint32_t(wout[j] + (wout[j] & pad));
      g.lvl_plane[j] = FastDivmod(eh * ew);
      g.lvl_row[j] = FastDivmod(ew);
    }
    *grid_out = dim3(unsigned((planes + np - 1) / np));
    *smem_out = size_t(2) * np * T * T * sizeof(float);
    return g;
  }
  // Band path: a band row of quads rounded up to the 2^(levels-2) lanes of a deepest coefficient.
  const int64_t span = levels >= 3 ? int64_t(1) << (levels - 2) : 1;
  const int64_t row_threads = ((win + 3) / 4 + span - 1) / span * span;
  const int64_t plane_threads = (hin + (int64_t(1) << levels) - 1) / (int64_t(1) << levels) * row_threads;
  // Plane groups of at most 2^31 threads, so a thread's index in its group is 32-bit.
  const int64_t per_y = std::max<int64_t>(1, std::min<int64_t>(planes, (int64_t(1) << 31) / plane_threads));
  g.band_plane = FastDivmod(uint32_t(plane_threads));
  g.band_row = FastDivmod(uint32_t(row_threads));
  g.band_planes_per_y = uint32_t(per_y);
  g.band_vec = quad_vec;
  g.band_pair1 = first != nullptr && hout[0] > 0 && wout[0] % 2 == 0 && aligned(first, 2 * sizeof(Tfirst));
  *grid_out = dim3(unsigned((per_y * plane_threads + kBlockThreads - 1) / kBlockThreads),
                   unsigned((planes + per_y - 1) / per_y));
  *smem_out = 0;
  return g;
}

template <int M, typename Tin, typename Tfirst>
void launch_band(const Tin* in, const CascadeGeom<Tfirst>& g, dim3 grid, cudaStream_t stream) {
  with_quad_load_width(g.band_vec, [&](auto width) {
    haar_cascade_band_kernel<M, decltype(width)::value, Tin, Tfirst><<<grid, kBlockThreads, 0, stream>>>(in, g);
  });
}

// One cascade launch of a geometry from cascade_geom, on its path.
template <typename Tin, typename Tfirst>
cudaError_t launch_cascade_geom(const Tin* in, const CascadeGeom<Tfirst>& g, dim3 grid, size_t smem,
                                cudaStream_t stream) {
  if (g.plane_path) {
    haar_cascade_kernel<Tin, Tfirst><<<grid, kBlockThreads, smem, stream>>>(in, g);
  } else {
    switch (g.levels) {
      case 1: launch_band<1>(in, g, grid, stream); break;
      case 2: launch_band<2>(in, g, grid, stream); break;
      case 3: launch_band<3>(in, g, grid, stream); break;
      case 4: launch_band<4>(in, g, grid, stream); break;
      case 5: launch_band<5>(in, g, grid, stream); break;
      default: return cudaErrorInvalidValue;
    }
  }
  return cudaGetLastError();
}

template <typename Tin, typename Tfirst>
cudaError_t launch_haar_cascade(const Tin* in, int64_t planes, int64_t hin, int64_t win, int levels, Tfirst* first,
                                float* const* deeper, const int64_t* hout, const int64_t* wout, cudaStream_t stream) {
  dim3 grid;
  size_t smem;
  const CascadeGeom<Tfirst> g = cascade_geom(in, planes, hin, win, levels, first, deeper, hout, wout, &grid, &smem);
  return launch_cascade_geom(in, g, grid, smem, stream);
}

template <typename Tin, typename Tfirst>
cudaError_t launch_haar_cascade_pair(const CascadeInput<Tin, Tfirst>& a, const CascadeInput<Tin, Tfirst>& b,
                                     int64_t planes, int64_t hin, int64_t win, int levels, const int64_t* hout,
                                     const int64_t* wout, cudaStream_t stream) {
  dim3 grid_a, grid_b;
  size_t smem_a, smem_b;
  const CascadeGeom<Tfirst> ga = cascade_geom(a.in, planes, hin, win, levels, a.first, a.deeper, hout, wout, &grid_a, &smem_a);
  const CascadeGeom<Tfirst> gb = cascade_geom(b.in, planes, hin, win, levels, b.first, b.deeper, hout, wout, &grid_b, &smem_b);
  // One launch for both chains unless its grid would pass gridDim.x's 2^31 - 1 (about 2^31 planes).
  if (ga.plane_path && gb.plane_path && uint64_t(grid_a.x) + grid_b.x <= uint64_t(INT32_MAX)) {
    haar_cascade_pair_kernel<Tin, Tfirst><<<grid_a.x + grid_b.x, kBlockThreads, smem_a > smem_b ? smem_a : smem_b,
                                            stream>>>(a.in, ga, grid_a.x, b.in, gb);
    return cudaGetLastError();
  }
  // Otherwise one launch each, as launch_haar_cascade.
  const cudaError_t e = launch_cascade_geom(a.in, ga, grid_a, smem_a, stream);
  return e != cudaSuccess ? e : launch_cascade_geom(b.in, gb, grid_b, smem_b, stream);
}

// The forward keeps float chains; the backward stores level 1 in the activation type.
#define WINCONV_CASCADE(TIN, TFIRST)                                                                        \
  template cudaError_t launch_haar_cascade<TIN, TFIRST>(const TIN*, int64_t, int64_t, int64_t, int, TFIRST*,  \
                                                        float* const*, const int64_t*, const int64_t*,         \
                                                        cudaStream_t);                                        \
  template cudaError_t launch_haar_cascade_pair<TIN, TFIRST>(const CascadeInput<TIN, TFIRST>&,              \
                                                             const CascadeInput<TIN, TFIRST>&, int64_t,      \
                                                             int64_t, int64_t, int, const int64_t*,          \
                                                             const int64_t*, cudaStream_t);
WINCONV_CASCADE(float, float)
WINCONV_CASCADE(__half, float)
WINCONV_CASCADE(__nv_bfloat16, float)
WINCONV_CASCADE(__half, __half)
WINCONV_CASCADE(__nv_bfloat16, __nv_bfloat16)
#undef WINCONV_CASCADE

}  // namespace wtconv_detail
}  // namespace winconv
