// Kernel launch helpers used by wtconv_dispatch.cu; each is defined in its own .cu file.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda/common/dynamic_smem.h"
#include "cuda/common/fast_divmod.cuh"
#include "wtconv_items.cuh"
#include "wtconv_level_tiles.cuh"
#include "wtconv_quad_staging.cuh"
#include "wtconv_layouts.h"

namespace winconv {
namespace wtconv_detail {

// Every tile-local index the kernels decompose with TileDivmod (staged elements, strip jobs, tile
// cells) is below the shared-memory floats of a block or the outputs of a tile, both under 2^16.
static_assert(kSmemBudget / sizeof(float) < TileDivmod::kMax, "tile-local indices exceed TileDivmod's range");

// A strided problem on the full grid (plan.h, WtconvRun; wtconv_full_grid.cu): y (planes x Ho x Wo)
// from every s-th row and column of the full-resolution result (planes x H x W), and the full-grid
// output gradient from dy: dy's element at (p / s, q / s) where s divides both p and q, else zero.
template <typename T>
cudaError_t launch_subsample(const T* full, T* y, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int s,
                             cudaStream_t stream);
template <typename T>
cudaError_t launch_spread(const T* dy, T* full, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int s,
                          cudaStream_t stream);

// Raw LL chain: from the planes of `in` (level a, hin x win each) write level a+1 to `first` (as
// Tfirst) and levels a+2..a+levels to deeper[0..levels-2] (float). levels <= 5.
template <typename Tin, typename Tfirst>
cudaError_t launch_haar_cascade(const Tin* in, int64_t planes, int64_t hin, int64_t win, int levels, Tfirst* first,
                                float* const* deeper, const int64_t* hout, const int64_t* wout, cudaStream_t stream);
// One input of launch_haar_cascade_pair: the activation and the chain it writes.
template <typename Tin, typename Tfirst>
struct CascadeInput {
  const Tin* in;
  Tfirst* first;
  float* const* deeper;
};
// The first launches of two chains of one plan (the backward's x and dy): the same planes, sizes
// and levels, each input with its own outputs; one launch when both take the kPlane path
// (one-tile planes), else one each.
template <typename Tin, typename Tfirst>
cudaError_t launch_haar_cascade_pair(const CascadeInput<Tin, Tfirst>& a, const CascadeInput<Tin, Tfirst>& b,
                                     int64_t planes, int64_t hin, int64_t win, int levels, const int64_t* hout,
                                     const int64_t* wout, cudaStream_t stream);

// Tin: float for a stored chain X_{l-1}; with `direct` (level 2, plan.fwd_level2_direct) xin is the
// activation x (H x W, Tin = the activation type) and X_1 is formed on chip.
template <typename Tin = float>
struct FwdLevelArgs {
  const Tin* xin;    // X_{l-1}: hin x win (or x: H x W)
  const float* rin;  // R_l (level-l grid) or null at the deepest level
  float* rout;       // R_{l-1}: hin x win
  const float* weight;
  const float* scale;
  float factor;      // 2^-l
  int B, C, hin, win, hq, wq, k;
  int wk = 0;        // the stored filters' size (>= k: the level runs at their central k x k, plan.kl)
  TileGeom g;
  LevelDivisors d;  // set by the launcher
  bool direct = false;
  int H = 0, W = 0;
  int quad_vec = 1;  // direct: x's row load width (quad_load_width: 4, 2 or 1; set by the launcher)
  bool pairs = false;  // direct, 16-bit: stage block pairs with 16-byte loads (launcher: pair_staging)
  bool plane_tile = false;  // one tile per plane, not pairs: the kPlane instance (launcher: level_plane_tile)
};
template <typename Tin>
cudaError_t launch_forward_level(const FwdLevelArgs<Tin>& a, size_t smem, cudaStream_t stream);

template <typename T>
struct FwdBaseArgs {
  const T* x;
  const float* rin;  // R_1 or null when L == 1
  T* y;
  const float *w0, *b0, *s0, *w1, *s1;
  int B, C, H, W, Ho, Wo, h1, w1g, k, stride;
  TileGeom g;
  // Index divisors, set by the launcher: x tile plane and row, level-1 halo plane and row,
  // level-1 strip jobs (columns, strips), base strip jobs (columns, strips).
  TileDivmod xplane, xrow, qplane, qrow, qcols, qstrips, ocols, ostrips;
  int quad_vec;              // quad staging's load width (quad_load_width of x: 4, 2 or 1)
  QuadDivisors<TileDivmod> quads;  // quad jobs over the qh rows of the x tile
  bool plane_tile = false;   // generic staging of the plane's pixels alone (StagedRegion; launcher)
  bool pair_base, pair_sub;  // two columns per strip job in the base / level-1 subband convs
  bool y_pairs = false;      // Wo even and y 2-element aligned: an output column pair is one store
  bool y_quads = false;      // Wo a multiple of 4 and y 4-element aligned: four output columns, one store
  TileDivmod ocols2, ostrips4, qcols2, qstrips4;  // their column pairs and 4-row strips
  // TMA staging (plan.fwd_base_tma_smem > 0 and the map encodes; set by prepare_forward_base): the x tile
  // of the next item streams into the other buffer while this one is computed.
  size_t tma_smem = 0;       // from the plan; 0: no TMA
  bool tma = false;
  bool tma_inplace = false;  // fp32 boxes read in place (fwd_base_tma_layout)
  int xp = 0;                // box pitch (elements)
  TileDivmod hplane, hrow;   // Haar pass: 2 x 4 pixel quads per plane (qh * qw / 2) and per row (qw / 2)
  CUtensorMap xmap;          // W x H x C x B, box xp x xh x 1 x np
  // Level 2 fused (L = 2, plan.fwd_fused_smem > 0 and the map encodes; prepare_forward_base):
  // no level kernel, no R_1; level 2's weights and scales here.
  size_t fused_smem = 0;     // from the plan; 0: no fusion
  bool fuse2 = false;
  const float *w2 = nullptr, *s2 = nullptr;
  TileDivmod fplane, frow;      // fused Haar pass: 4 x 4 pixel blocks per plane (eh2 * ew2) and per row (ew2)
  TileDivmod l2cols, l2strips;  // level-2 convs: column pairs of tw2, 4-row strips of th2
};
// Host: the forward base's staging (TMA, level 2 fused) and its tensor map, decided before the
// level kernels, which a fused forward skips.
template <typename T>
void prepare_forward_base(FwdBaseArgs<T>& a);
template <typename T>
cudaError_t launch_forward_base(const FwdBaseArgs<T>& a, size_t smem, cudaStream_t stream);

// Tc: the type of the level-(l-1) chains. The backward stores its level-1 chains (X_1, G_1, dX_1,
// three quarter-size planes per input plane, the training step's largest temporaries) in the
// activation type, and deeper levels in float, whose small grids make few-term gradient sums.
// With `direct` (level 2, plan.bwd_level2_direct) xin and gin are the activations x and dy (H x W)
// and X_1, G_1 are formed on chip in float, never rounded to 16 bits (plan.h says why).
template <typename Tc>
struct BwdLevelArgs {
  const Tc* xin;      // X_{l-1} (or x)
  const Tc* gin;      // LL chain of G at level l-1 (G_0 = D is never needed here), or dy
  const float* dxin;  // dX_l or null at the deepest level
  Tc* dxout;          // dX_{l-1}
  const float* weight;
  const float* scale;
  float* partial;     // [C][splits][4kk]
  int B, C, hin, win, hq, wq, k;
  int wk = 0;         // the stored filters' size (>= k: the level runs at their central k x k, plan.kl)
  TileGeom g;
  LevelDivisors d;  // set by the launcher
  bool direct = false;
  int H = 0, W = 0;
  int quad_vec = 1;  // direct: the smaller quad_load_width of x and dy (set by the launcher)
  bool pairs = false;  // direct, 16-bit: stage block pairs with 16-byte loads (launcher: pair_staging)
  bool plane_tile = false;  // one tile per plane, not pairs: the kPlane instance (launcher: level_plane_tile)
};
template <typename Tc>
cudaError_t launch_backward_level(const BwdLevelArgs<Tc>& a, size_t smem, cudaStream_t stream);

template <typename T>
struct BwdBaseArgs {
  const T* dy;
  const T* x;
  const T* dxin;  // dX_1 or null when L == 1
  T* dx;
  const float *w0, *s0, *w1, *s1;
  float* partial;     // [C][splits][kk + 1 + 4kk]
  int B, C, H, W, h1, w1g, k;
  TileGeom g;
  int pitch;  // row pitch (floats) of the x and D pixel tiles (plan: pixel_pitch)
  // Index divisors, set by the launcher: pixel tile plane and row, coefficient halo plane and
  // row, level-1 strip jobs (columns, strips; qcols also counts the dx conv's column pairs, the
  // pixel tile being 2 tw wide), pixel strips (of kStripRows rows).
  FastDivmod pplane, prow, plane, row, qcols, qstrips, pstrips;
  int quad_vec;              // quad staging's load width (the smaller quad_load_width of x and dy)
  QuadDivisors<FastDivmod> quads;  // quad jobs over the eh rows of the pixel tile
  bool plane_tile = false;   // generic staging of the plane's pixels alone (StagedRegion; launcher)
  bool pair_sub;             // two columns per level-1 subband strip job (tw even)
  bool dx_pairs = false;     // W even and dx 2-element aligned: a pixel column pair is one store
  bool dx_quads = false;     // W a multiple of 4 and dx 4-element aligned: four pixel columns, one store
  FastDivmod qcols2, qstrips4;  // column pairs of the subband convs; 4-row strips
  // TMA staging (plan.bwd_base_tma_smem > 0 and both maps encode; set by prepare_backward_base):
  // boxes of pitch x 2 eh x 1 x np straight into the pixel tiles (fused: bwd_fused_layout's boxes).
  size_t tma_smem = 0;       // from the plan; 0: no TMA
  bool tma = false;
  TileDivmod hplane, hrow;   // Haar pass: 2 x 4 pixel quads per plane (eh * ew / 2) and per row (ew / 2)
  CUtensorMap xmap, dmap;    // W x H x C x B
  // Level 2 fused (L = 2, plan.bwd_fused_smem > 0 and both maps encode; prepare_backward_base): no
  // level kernel, no dX_1; level 2's weights and scales here, its partials [C][splits][4kk].
  size_t fused_smem = 0;     // from the plan; 0: no fusion
  bool fuse2 = false;
  const float *w2 = nullptr, *s2 = nullptr;
  float* partial2 = nullptr;
  TileDivmod fplane, frow;      // fused Haar pass: 4 x 4 pixel blocks per plane (eh2 * ew2) and per row (ew2)
  FastDivmod l2cols, l2strips;  // level-2 convs: column pairs of tw2, 4-row strips of th2
  // Stride 2 (dy spread onto the full grid; unfused instances): the base conv folded into the
  // level-1 filters and C0 formed from the level-1 correlations (wtconv_fold.h: folded_dx_tap,
  // folded_corr_tap), so the kernel runs no base conv and no base correlation.
  bool fold_base = false;
};
// Host: the backward base's staging (TMA, level 2 fused) and its tensor maps, decided before the
// level kernels, which a fused backward skips.
template <typename T>
void prepare_backward_base(BwdBaseArgs<T>& a);
template <typename T>
cudaError_t launch_backward_base(const BwdBaseArgs<T>& a, size_t smem, cudaStream_t stream);

struct ParamGradArgs {
  const float* partial[kWtconvMaxLevels + 1];  // [1] base kernel, [l] level l >= 2
  int splits[kWtconvMaxLevels + 1];
  const float *w0, *b0, *s0;
  const float* wl[kWtconvMaxLevels];
  const float* sl[kWtconvMaxLevels];
  float *gw0, *gb0, *gs0;
  float* gwl[kWtconvMaxLevels];
  float* gsl[kWtconvMaxLevels];
  int C, k, L;
  int kl[kWtconvMaxLevels + 1];  // level l >= 2: its partials' kernel size (plan.kl, <= k)
};
cudaError_t launch_param_grad_reduce(const ParamGradArgs& a, cudaStream_t stream);

// The dynamic shared memory of a base kernel's launch: its fused or TMA layout's when the host
// chose one (prepare_forward_base / prepare_backward_base), else the plain layout's.
template <typename Args>
size_t base_launch_smem(const Args& a, size_t plain) {
  return a.fuse2 ? a.fused_smem : a.tma ? a.tma_smem : plain;
}

// Launches `kernel` with `smem` bytes of dynamic shared memory, the kernel's limit raised first
// when it asks for more than the 48 KiB default (once per kernel and device: dynamic_smem.h).
template <typename Kernel, typename Args>
cudaError_t launch_with_smem(Kernel kernel, unsigned blocks, size_t smem, cudaStream_t stream, const Args& a) {
  const cudaError_t e = ensure_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
  if (e != cudaSuccess) return e;
  kernel<<<blocks, kBlockThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

// f(std::integral_constant<int, K>{}, std::integral_constant<int, kOnly>{}): K = k for the
// specialised kernel sizes 3, 5 and 7, K = 0 (the runtime-k instantiation) for every other odd k;
// kOnly = 1 for k = 1, else 0. The runtime-k instances launched for k = 1 compile that size alone
// (kOnly): the k = 9..15 window passes and correlation rings, which k = 1 never runs, held their
// registers (the level kernels' k = 1 forward ran 6-9% and backward 4-9% slower, the base kernels
// at a third of their warp slots: docs/wtconv.md, notes 86 and 107). The level kernels take the
// k = 1 form as kWindows = false: each subband conv is one product, taken in the synthesis pass.
template <typename F>
cudaError_t dispatch_kernel_size(int k, F&& f) {
  using Runtime = std::integral_constant<int, 0>;
  switch (k) {
    case 3: return f(std::integral_constant<int, 3>{}, Runtime{});
    case 5: return f(std::integral_constant<int, 5>{}, Runtime{});
    case 7: return f(std::integral_constant<int, 7>{}, Runtime{});
    case 1: return f(Runtime{}, std::integral_constant<int, 1>{});
    default: return f(Runtime{}, Runtime{});
  }
}

// Index in a stored wk x wk filter of tap ij (row-major) of its central k x k square (k <= wk, both
// odd: plan.h, level_kernel_size).
__host__ __device__ __forceinline__ int central_tap(int ij, int k, int wk) {
  const int off = (wk - k) / 2;
  return (ij / k + off) * wk + ij % k + off;
}

inline TileGeom geom_of(const WtconvTile& t) {
  TileGeom g;
  g.th = t.th; g.tw = t.tw; g.np = t.np; g.tiles_y = t.tiles_y; g.tiles_x = t.tiles_x;
  g.items = t.items; g.splits = t.splits;
  g.items32 = t.items < (int64_t(1) << 32);
  g.per_group = FastDivmod(uint32_t(t.tiles_y) * uint32_t(t.tiles_x));
  g.tiles_x_div = FastDivmod(uint32_t(t.tiles_x));
  return g;
}

// Divisor of the number of strips of `rows` rows that cover n rows.
template <typename Div = TileDivmod>
inline Div strip_count(int n, int rows) { return Div(uint32_t((n + rows - 1) / rows)); }

// Divisor of the number of column pairs in n columns (at least 1, so that it can divide).
template <typename Div = TileDivmod>
inline Div pair_count(int n) { return Div(uint32_t(n / 2 > 0 ? n / 2 : 1)); }

// Divisors of the quad staging jobs of a base kernel: `rows` row pairs of the tile, each row
// `cols` elements wide after a lead-in of `lead` elements (wtconv_layouts.h, fwd/bwd_quad_lead: exact when
// the same for every item, so that no quad lies wholly outside the tile and sends its warp through
// the scalar store path; else 2, the largest).
template <typename Div = TileDivmod>
inline QuadDivisors<Div> quad_divisors(int rows, int cols, int lead) {
  const int per_row = quads_per_row(cols, lead);
  QuadDivisors<Div> q;
  q.plane = Div(uint32_t(rows * per_row));
  q.row = Div(uint32_t(per_row));
  return q;
}

// Divisors of the level kernels (forward and backward): halo plane and row, coefficient tile and
// row, strips per subband column, and the kPlane instances' hq x wq coefficients (at most the
// tile's interior: the grid when one tile holds it).
inline LevelDivisors level_divisors(const TileGeom& g, int k, int64_t hq, int64_t wq) {
  const int r = k / 2, eh = g.th + 2 * r, ew = g.tw + 2 * r;
  LevelDivisors d;
  d.plane = TileDivmod(uint32_t(eh * ew));
  d.row = TileDivmod(uint32_t(ew));
  d.cell = TileDivmod(uint32_t(g.th * g.tw));
  d.col = TileDivmod(uint32_t(g.tw));
  d.strips = strip_count(g.th, kStripRows);
  d.plane2 = TileDivmod(uint32_t(eh * (ew / 2 > 0 ? ew / 2 : 1)));
  d.row2 = TileDivmod(uint32_t(ew / 2 > 0 ? ew / 2 : 1));
  const int rows = int(hq < g.th + r ? hq : g.th + r), cols = int(wq < g.tw + r ? wq : g.tw + r);
  d.iplane = TileDivmod(uint32_t(rows * cols));
  d.irow = TileDivmod(uint32_t(cols));
  return d;
}
// Whether a level kernel may take its kPlane instance (staged_block): one tile per plane.
inline bool level_plane_tile(const TileGeom& g) { return g.tiles_y == 1 && g.tiles_x == 1; }

// Whether a direct level-2 kernel over 16-bit activations stages pairs of blocks with 16-byte
// loads (load_block_pair_ll): W % 8 == 0 and a 16-byte aligned base, so every pixel row of 8 lies
// inside or outside the plane; an even halo r and an even tile width, so the left block of every
// pair has an even level-2 column (8-pixel aligned) and the tile's halo rows pair up exactly.
template <typename T>
inline bool pair_staging(const T* act, int W, int k, int tw) {
  return sizeof(T) == 2 && W % 8 == 0 && reinterpret_cast<uintptr_t>(act) % 16 == 0 && (k / 2) % 2 == 0 &&
         tw % 2 == 0;
}

}  // namespace wtconv_detail
}  // namespace winconv
