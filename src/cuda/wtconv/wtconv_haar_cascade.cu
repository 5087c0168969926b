// Haar cascade: the raw LL chain X_{a+1..a+m} (forward) or the LL chain of G = Haar cascade of dy
// (backward) from one pass over level a. A block loads a T x T tile (T a power of two, so every
// deeper level of the tile stays aligned) of np planes and halves it m times in shared memory;
// each level is written once (N/4 + N/16 + ... floats) and the input read once.
#include "wtconv_kernels.cuh"

namespace winconv {
namespace wtconv_detail {

template <typename Tfirst>
struct CascadeGeom {
  int64_t planes;
  int hin, win, levels, lt, np;   // T = 1 << lt
  bool vec4;                      // 4-element loads (see launch_haar_cascade)
  bool vec2;                      // else 2-element loads of level 1's blocks: even widths
  bool plane_path;                // the kPlane path (haar_cascade_planes)
  FastDivmod per_group, tiles_x;  // block -> (plane group, tile row, tile column)
  // kPlane (one tile per plane): the np planes of a block are contiguous in `in` and
  // in every level's output, so each level writes its grid rounded up to even (zeros past the
  // grid: what the next level's Haar blocks read there), instead of the whole tile with a bounds
  // test per element (haar_cascade_planes).
  FastDivmod lvl_plane[5], lvl_row[5];   // per level: even(hout) * even(wout), even(wout) (last: exact)
  Tfirst* first;   // out level a+1, or null: computed for the deeper levels, not stored
  float* deeper[4];  // levels a+2..a+levels
  int hout[5], wout[5];
};

// The 2 x 2 pixel block whose top-left pixel is at s (rows `win` elements apart) as floats: a, b
// (top row), c, d, zeros right of the plane (right false) and below it (down false).
template <typename Tin>
__device__ __forceinline__ float4 load_block_2x2(const Tin* s, int win, bool right, bool down) {
  float4 v;
  v.x = to_float(s[0]);
  v.y = right ? to_float(s[1]) : 0.f;
  v.z = down ? to_float(s[win]) : 0.f;
  v.w = right && down ? to_float(s[win + 1]) : 0.f;
  return v;
}

// Writes the LL coefficient (y, x) of `plane` at output level a+1+j where it lies on that level's
// grid (tiles run past the plane's edges): level a+1 to g.first when the caller keeps it, deeper
// levels to g.deeper. The generic path's two sources of level a+1 (staged quads, or 2 x 2 blocks
// from global memory) and its level loop all store through here.
template <typename Tfirst>
__device__ __forceinline__ void store_level_ll(const CascadeGeom<Tfirst>& g, int j, int64_t plane, int y, int x,
                                               float ll) {
  if (plane >= g.planes || y >= g.hout[j] || x >= g.wout[j]) return;
  const int64_t at = plane * g.hout[j] * g.wout[j] + int64_t(y) * g.wout[j] + x;
  if (j > 0)
    g.deeper[j - 1][at] = ll;
  else if (g.first != nullptr)
    g.first[at] = from_float<Tfirst>(ll);
}

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

// The kernel; its generic path (T x T tiles): index math is shifts and masks (T is a
// power of two) and the block decode uses FastDivmod. The kernel moves 4-6 bytes per element, so
// an integer divide per element (no hardware divider) made it instruction-bound at a fifth of the
// copy bandwidth.
template <typename Tin, typename Tfirst, bool kPlane>
__device__ __forceinline__ void haar_cascade_block(const Tin* __restrict__ in, const CascadeGeom<Tfirst>& g,
                                                   uint32_t block) {
  extern __shared__ float smem[];
  const int lt = g.lt, T = 1 << lt, TT = T * T;
  float* buf0 = smem;
  float* buf1 = smem + g.np * TT;
  uint32_t pg, rem, ty, tx;
  g.per_group.divmod(block, pg, rem);
  g.tiles_x.divmod(rem, ty, tx);
  const int y0 = int(ty) << lt, x0 = int(tx) << lt;
  const int64_t plane0 = int64_t(pg) * g.np;
  if constexpr (kPlane) {
    haar_cascade_planes(in, g, buf0, buf1, plane0);
    return;
  }

  int ls = lt, oy = y0, ox = x0, j0 = 0;  // side = 1 << ls; levels j0.. from the tile in buf0
  if (g.vec4) {
    const int lq = lt - 2;  // T / 4 quads per tile row
    stage_tile<2>(
        g.np * TT / 4,
        [&](int e) {
          const int p = e >> (2 * lt - 2), y = y0 + ((e >> lq) & (T - 1)), x = x0 + ((e & ((1 << lq) - 1)) << 2);
          const int64_t plane = plane0 + p;
          float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
          if (plane < g.planes && y < g.hin && x < g.win) {
            const Tin* src = in + plane * g.hin * g.win + int64_t(y) * g.win + x;
            if (x + 3 < g.win) {
              v = load4(src);
            } else {
              v.x = to_float(src[0]);
              if (x + 1 < g.win) v.y = to_float(src[1]);
              if (x + 2 < g.win) v.z = to_float(src[2]);
            }
          }
          return v;
        },
        [&](int e, float4 v) { reinterpret_cast<float4*>(buf0)[e] = v; });
  } else {
    // Rows that are not whole quads: level 1 straight from global memory, each coefficient's
    // 2 x 2 pixel block (zeros past the plane) loaded by its thread, as the kPlane path does (note
    // 50), instead of staging the pixel tile element by element and halving it after a barrier:
    // one shared-memory pass and one barrier fewer, and pair loads where the width is even (a
    // tile's columns start even, so a pair lies inside the plane or outside it). The same four
    // values go to the same haar_ll, so the same bits. Training steps 0.88-0.97 on odd and even
    // widths, where 2-element staging alone gave 0.94-0.99 on even ones (docs/wtconv.md, note 96).
    const int ln = lt - 1, ns = 1 << ln;
    stage_tile<2>(
        g.np << (2 * ln),
        [&](int e) {
          const int p = e >> (2 * ln), y = y0 + 2 * ((e >> ln) & (ns - 1)), x = x0 + 2 * (e & (ns - 1));
          const int64_t plane = plane0 + p;
          float4 v = make_float4(0.f, 0.f, 0.f, 0.f);  // the block's a, b (top row), c, d
          if (plane < g.planes && y < g.hin && x < g.win) {
            const Tin* s = in + plane * g.hin * g.win + int64_t(y) * g.win + x;
            const bool down = y + 1 < g.hin;
            if (g.vec2) {
              const float2 u = load2(s);
              v.x = u.x; v.y = u.y;
              if (down) {
                const float2 w = load2(s + g.win);
                v.z = w.x; v.w = w.y;
              }
            } else {
              v = load_block_2x2(s, g.win, x + 1 < g.win, down);
            }
          }
          return v;
        },
        [&](int e, float4 v) {
          const float ll = haar_ll(v.x, v.y, v.z, v.w);
          buf0[e] = ll;
          store_level_ll(g, 0, plane0 + (e >> (2 * ln)), (y0 >> 1) + ((e >> ln) & (ns - 1)),
                         (x0 >> 1) + (e & (ns - 1)), ll);
        });
    ls = lt - 1;
    oy = y0 >> 1;
    ox = x0 >> 1;
    j0 = 1;
  }
  for (int j = j0; j < g.levels; ++j) {
    __syncthreads();
    const int side = 1 << ls, ln = ls - 1, ns = 1 << ln;
    oy >>= 1; ox >>= 1;
    for (int e = threadIdx.x; e < (g.np << (2 * ln)); e += blockDim.x) {
      const int p = e >> (2 * ln), yy = (e >> ln) & (ns - 1), xx = e & (ns - 1);
      const float* s = buf0 + (p << (2 * ls)) + (2 * yy) * side + 2 * xx;
      const float ll = haar_ll(s[0], s[1], s[side], s[side + 1]);
      buf1[e] = ll;
      store_level_ll(g, j, plane0 + p, oy + yy, ox + xx, ll);
    }
    float* t = buf0; buf0 = buf1; buf1 = t;
    ls = ln;
  }
}

template <typename Tin, typename Tfirst, bool kPlane>
__global__ void __launch_bounds__(kBlockThreads) haar_cascade_kernel(const Tin* __restrict__ in, CascadeGeom<Tfirst> g) {
  haar_cascade_block<Tin, Tfirst, kPlane>(in, g, blockIdx.x);
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
  haar_cascade_block<Tin, Tfirst, true>(second ? in1 : in0, second ? g1 : g0,
                                        second ? blockIdx.x - blocks0 : blockIdx.x);
}

// The geometry of one cascade launch (arguments as launch_haar_cascade's), its blocks and bytes of
// shared memory.
template <typename Tin, typename Tfirst>
CascadeGeom<Tfirst> cascade_geom(const Tin* in, int64_t planes, int64_t hin, int64_t win, int levels, Tfirst* first,
                                 float* const* deeper, const int64_t* hout, const int64_t* wout, int64_t* blocks_out,
                                 size_t* smem_out) {
  CascadeGeom<Tfirst> g;
  g.first = first;
  g.planes = planes;
  g.hin = int(hin); g.win = int(win); g.levels = levels;
  g.lt = cascade_tile_log2(hin, win, levels);
  const int lt = g.lt;
  const int T = 1 << lt;
  int np = 2048 / (T * T);  // two 32x32 planes per block: two 16-byte loads in flight per thread
  if (np < 1) np = 1;
  if (np > planes) np = int(planes);
  g.np = np;
  const int tiles_y = int((hin + T - 1) / T), tiles_x = int((win + T - 1) / T);
  // Rows of 4 whole, 4-aligned elements: tiles of at least 4 columns, a row pitch and a base
  // pointer that keep every quad aligned.
  g.vec4 = lt >= 2 && win % 4 == 0 && reinterpret_cast<uintptr_t>(in) % (4 * sizeof(Tin)) == 0;
  g.vec2 = !g.vec4 && win % 2 == 0 && reinterpret_cast<uintptr_t>(in) % (2 * sizeof(Tin)) == 0;
  g.per_group = FastDivmod(uint32_t(tiles_y) * uint32_t(tiles_x));
  g.tiles_x = FastDivmod(uint32_t(tiles_x));
  for (int j = 0; j < 5; ++j) {
    if (j > 0) g.deeper[j - 1] = j < levels ? deeper[j - 1] : nullptr;
    g.hout[j] = j < levels ? int(hout[j]) : 0;
    g.wout[j] = j < levels ? int(wout[j]) : 0;
  }
  *blocks_out = (planes + np - 1) / np * tiles_y * tiles_x;
  *smem_out = size_t(2) * np * T * T * sizeof(float);
  // One tile per plane, rows not 4-element loads: the planes alone (haar_cascade_planes).
  g.plane_path = tiles_y == 1 && tiles_x == 1 && !g.vec4;
  if (g.plane_path) {
    for (int j = 0; j < levels; ++j) {
      // Rounded up to even except at the last level, whose blocks nothing reads (and whose grid may
      // fill a 1 x 1 tile side already).
      const int64_t pad = j + 1 < levels ? 1 : 0;
      const uint32_t eh = uint32_t(hout[j] + (hout[j] & pad)), ew = uint32_t(wout[j] + (wout[j] & pad));
      g.lvl_plane[j] = FastDivmod(eh * ew);
      g.lvl_row[j] = FastDivmod(ew);
    }
  }
  return g;
}

// One cascade launch of a geometry from cascade_geom, on its path.
template <typename Tin, typename Tfirst>
cudaError_t launch_cascade_geom(const Tin* in, const CascadeGeom<Tfirst>& g, int64_t blocks, size_t smem,
                                cudaStream_t stream) {
  if (g.plane_path)
    haar_cascade_kernel<Tin, Tfirst, true><<<unsigned(blocks), kBlockThreads, smem, stream>>>(in, g);
  else
    haar_cascade_kernel<Tin, Tfirst, false><<<unsigned(blocks), kBlockThreads, smem, stream>>>(in, g);
  return cudaGetLastError();
}

template <typename Tin, typename Tfirst>
cudaError_t launch_haar_cascade(const Tin* in, int64_t planes, int64_t hin, int64_t win, int levels, Tfirst* first,
                                float* const* deeper, const int64_t* hout, const int64_t* wout, cudaStream_t stream) {
  int64_t blocks;
  size_t smem;
  const CascadeGeom<Tfirst> g = cascade_geom(in, planes, hin, win, levels, first, deeper, hout, wout, &blocks, &smem);
  return launch_cascade_geom(in, g, blocks, smem, stream);
}

template <typename Tin, typename Tfirst>
cudaError_t launch_haar_cascade_pair(const CascadeInput<Tin, Tfirst>& a, const CascadeInput<Tin, Tfirst>& b,
                                     int64_t planes, int64_t hin, int64_t win, int levels, const int64_t* hout,
                                     const int64_t* wout, cudaStream_t stream) {
  int64_t blocks_a, blocks_b;
  size_t smem_a, smem_b;
  const CascadeGeom<Tfirst> ga =
      cascade_geom(a.in, planes, hin, win, levels, a.first, a.deeper, hout, wout, &blocks_a, &smem_a);
  const CascadeGeom<Tfirst> gb =
      cascade_geom(b.in, planes, hin, win, levels, b.first, b.deeper, hout, wout, &blocks_b, &smem_b);
  if (ga.plane_path && gb.plane_path) {
    haar_cascade_pair_kernel<Tin, Tfirst><<<unsigned(blocks_a + blocks_b), kBlockThreads,
                                            smem_a > smem_b ? smem_a : smem_b, stream>>>(a.in, ga, uint32_t(blocks_a),
                                                                                        b.in, gb);
    return cudaGetLastError();
  }
  // Otherwise one launch each, as launch_haar_cascade.
  const cudaError_t e = launch_cascade_geom(a.in, ga, blocks_a, smem_a, stream);
  return e != cudaSuccess ? e : launch_cascade_geom(b.in, gb, blocks_b, smem_b, stream);
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
