// Backward, one wavelet level l >= 2 (deepest first). From X_{l-1} and the LL chain of G at level
// l-1 (both read with a halo) it forms Y_l and G_l = Haar(G_{l-1}[LL]) on chip, then
//   dY_l = s_l * (flipped W_l) conv G_l, dY_l[LL] += dX_l, dX_{l-1} = synthesis of dY_l (cropped),
//   C_l[s](i,j) = sum_q Y_l[s](q + i - r, ...) * G_l[s](q)   (dW_l = s_l * C_l, ds_l = sum W_l * C_l),
// the correlation as per-block partial sums (fixed order, no atomics) reduced later.
// HBM: reads X_{l-1}, G_{l-1}[LL], dX_l; writes dX_{l-1} and C x splits x 4kk partials. With
// kDirect (level 2 when L == 2 or the activations are 16-bit, plan.bwd_level2_direct) it reads x
// and dy instead (the backward runs at stride 1: plan.h, WtconvRun) and forms X_1 and G_1 on chip,
// in float.
#include <type_traits>

#include "wtconv_kernels.cuh"
#include "wtconv_correlations.cuh"
#include "wtconv_haar.cuh"
#include "wtconv_items.cuh"
#include "wtconv_level_tiles.cuh"
#include "wtconv_quad_staging.cuh"
#include "wtconv_staging.cuh"
#include "wtconv_windows.cuh"

namespace winconv {
namespace wtconv_detail {

// 4 resident blocks for k = 3 and 5 (64 registers; k = 5 spills 40 bytes and is still faster than
// at 3 blocks: big_L2 training step -0.4% fp32, -1.2% fp16); larger k keeps its 128 registers.
// kPlane: the tile holds the whole level grid; its coefficients alone are staged per item, the
// zeros around them written once (staged_block). kPairs: 16-bit activations staged as block pairs
// (a.pairs); compiled only into the instances that take it (perf note 67). kWindows false: the
// k = 1 instance, its subband convs taken in the dX pass (dispatch_kernel_size's kOnly).
template <typename Tc, bool kDirect, int K, bool kPlane, bool kPairs, bool kWindows>
__global__ void __launch_bounds__(kBlockThreads, K == 3 || K == 5 || !kWindows ? 4 : 2) backward_level_kernel(BwdLevelArgs<Tc> a) {
  static_assert(kWindows || K == 0, "only the runtime-k instance has a k = 1 form");
  extern __shared__ float smem[];
  constexpr int kOnly = kWindows ? 0 : 1;  // the k = 1 form: its ring alone (with_compiled_kernel_size)
  constexpr int KM = K > 0 ? K : kOnly > 0 ? kOnly : 15;  // the sums of a kernel row
  const int k = K ? K : a.k, r = k / 2, kk = k * k;
  const int c = blockIdx.x / a.g.splits, split = blockIdx.x % a.g.splits;
  const int th = a.g.th, tw = a.g.tw, np = a.g.np;
  const int eh = th + 2 * r, ew = tw + 2 * r, plane = eh * ew;
  // Correlation threads: two warps per subband, lane = ci + k * (part within the warp), so a
  // half-warp reads consecutive rows of one plane (wtconv_layouts.h: corr_parts_per_warp, kLevelCorrWarpsPerSubband).
  const int jobs = 4 * k, parts_per_warp = corr_parts_per_warp(k);
  const int parts = kLevelCorrWarpsPerSubband * parts_per_warp;
  const int fs = level_filter_stride(k);
  float* wf = smem;                   // 4 filters s_l * W_l flipped, fs apart
  float* ys = wf + 4 * fs;            // np x 4 x plane
  float* gs = ys + np * 4 * plane;    // np x 4 x plane
  float* dz = gs + np * 4 * plane + (K == 0 ? kWindowSlack : 0);  // np x 4 x th x tw subband convs
  float* red = dz + np * 4 * th * tw; // parts x jobs x k

  if constexpr (K == 0) zero_filter_padding(wf, 4, k);
  const int wk = a.wk > 0 ? a.wk : k;  // the stored filters' size: the level runs at their central k x k
  for (int i = threadIdx.x; i < 4 * kk; i += blockDim.x) {
    const int t = i / kk, ij = i % kk, fi = kk - 1 - ij;  // flip both axes
    wf[t * fs + filter_slot(ij, k)] = a.scale[4 * c + t] * a.weight[int64_t(4 * c + t) * wk * wk + central_tap(fi, k, wk)];
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sb = warp / kLevelCorrWarpsPerSubband, ci = lane % k, job = sb * k + ci;
  const int part = (warp % kLevelCorrWarpsPerSubband) * parts_per_warp + lane / k;
  const bool corr_thread = lane / k < parts_per_warp;
  double tot[KM];
#pragma unroll
  for (int j = 0; j < KM; ++j) tot[j] = 0.0;

  if constexpr (kPlane) zero_floats(ys, 2 * np * 4 * plane);  // Y_l and G_l

  int64_t begin, end, step;
  block_items<kDirect>(a.g.items, a.g.splits, split, &begin, &end, &step);
  for (int64_t item = begin; item < end; item += step) {
    const ItemPos pos = decode_item(a.g, item);
    // dX_l of this thread's first synthesis coefficient, loaded before the staging.
    const float res_first = first_residual(a.dxin, pos, np * th * tw, a.d.cell, a.d.col, a.B, a.C, c, a.hq, a.wq);
    __syncthreads();
    struct Blocks { float4 x, g; };  // the 2x2 blocks of X_{l-1} and G_{l-1}[LL]
    // One staging loop per load path (load_block_ll<V>), chosen once per item; kPairs
    // instances stage block pairs instead and never instantiate it.
    const auto stage_blocks = [&](auto vec) {
      stage_level_tile<kPlane, kDirect>(
          a, pos, r, np, plane, c,
          [&](const LevelBlock& blk, int hin, int win) {
            if constexpr (kDirect) {
              return Blocks{load_block_ll<decltype(vec)::value>(a.xin, blk, hin, win),
                            load_block_ll<decltype(vec)::value>(a.gin, blk, hin, win)};
            } else {
              return Blocks{load_block(a.xin, blk, hin, win), load_block(a.gin, blk, hin, win)};
            }
          },
          [&](int e, const Blocks& v) {
            uint32_t p, rem;
            staged_slot<kPlane>(e, a.d, r, ew, p, rem);
            float z[4], g[4];
            haar4(v.x.x, v.x.y, v.x.z, v.x.w, z);
            haar4(v.g.x, v.g.y, v.g.z, v.g.w, g);
#pragma unroll
            for (int t = 0; t < 4; ++t) {
              ys[(p * 4 + t) * plane + rem] = z[t];
              gs[(p * 4 + t) * plane + rem] = g[t];
            }
          });
    };
    if constexpr (kPairs) {
      // Pairs of blocks of x and dy with 16-byte loads (load_block_pair_ll; docs/wtconv.md, perf
      // note 28), one pair in flight per thread: the bytes of the two 8-byte loads it replaces, at
      // half the load instructions. Two in flight would hold 64 registers of raw rows.
      static_assert(kDirect && sizeof(Tc) == 2 && !kPlane, "pair staging: 16-bit activations, tiled grid");
      struct Pairs { BlockPair x, g; };
      stage_tile<1>(
          np * eh * int(a.d.row2.divisor),
          [&](int e) {
            const PairPos v = level_pair(e, pos, r, a.d, a.B, a.C, c, a.hq, a.wq, a.H, a.W);
            return Pairs{load_block_pair_ll(a.xin, v.off, v.qy, v.qx, v.in, a.H, a.W),
                         load_block_pair_ll(a.gin, v.off, v.qy, v.qx, v.in, a.H, a.W)};
          },
          [&](int e, const Pairs& v) {
            const Pos3 q = split3(e, a.d.plane2, a.d.row2);
            float z0[4], z1[4], g0[4], g1[4];
            haar4(v.x.a.x, v.x.a.y, v.x.a.z, v.x.a.w, z0);
            haar4(v.x.b.x, v.x.b.y, v.x.b.z, v.x.b.w, z1);
            haar4(v.g.a.x, v.g.a.y, v.g.a.z, v.g.a.w, g0);
            haar4(v.g.b.x, v.g.b.y, v.g.b.z, v.g.b.w, g1);
            const int at = q.p * 4 * plane + q.y * ew + 2 * q.x;  // 8-byte aligned: ew, plane even
#pragma unroll
            for (int t = 0; t < 4; ++t) {
              *reinterpret_cast<float2*>(ys + at + t * plane) = make_float2(z0[t], z1[t]);
              *reinterpret_cast<float2*>(gs + at + t * plane) = make_float2(g0[t], g1[t]);
            }
          });
    } else {
      stage_level_blocks<kDirect>(a, stage_blocks);
    }
    __syncthreads();
    // The subband convs into dz, then dX_{l-1}: one coefficient (four children) per thread.
    level_subband_results<K, kWindows>(a, wf, fs, gs, eh, ew, th, tw, np, k, dz);
    level_synthesis_pass<kWindows, true>(a, pos, c, np, th, tw, dz, wf, fs, gs, plane, ew, a.dxin, res_first, a.dxout);
    // Weight-gradient correlation: thread (subband, kernel row i, part) sweeps tile rows.
    if (corr_thread) {
      // Quad-read correlations when every subband row meets their alignment (see the backward base:
      // the reads past a row stay in ys, gs or dz).
      constexpr int kR = K / 2;
      const bool quads = plane % 4 == 0 && quad_corr_ok(ys, ew, 0, gs + r, ew, kR % 4, tw);
      float acc[KM];
#pragma unroll
      for (int j = 0; j < KM; ++j) acc[j] = 0.f;
      with_compiled_kernel_size<K, kOnly>(k, [&](auto kc) {
        using KC = decltype(kc);  // K, or the runtime k's ring (runtime-k instance)
        for_strided_rows(part, parts, th, np, [&](int p, int ty) {
          const float* yrow = ys + (p * 4 + sb) * plane + (ty + ci) * ew;
          const float* grow = gs + (p * 4 + sb) * plane + (ty + r) * ew + r;
          if constexpr (K > 0) corr_row_maybe_quads<K, 0, kR % 4>(quads, acc, yrow, grow, tw, k);
          else corr_row<KC::value>(acc, yrow, grow, tw, k);
        });
      });
#pragma unroll
      for (int j = 0; j < KM; ++j) tot[j] += double(acc[j]);
    }
  }
  __syncthreads();
  if (corr_thread) {
#pragma unroll
    for (int j = 0; j < KM; ++j)
      if (K > 0 || j < k) red[(part * jobs + job) * k + j] = float(tot[j]);
  }
  __syncthreads();
  float* out = a.partial + (int64_t(c) * a.g.splits + split) * 4 * kk;
  for (int e = threadIdx.x; e < 4 * kk; e += blockDim.x) {
    const int t = e / kk, i = (e / k) % k, j = e % k;
    float sum = 0.f;
    for (int q = 0; q < parts; ++q) sum += red[(q * jobs + t * k + i) * k + j];
    out[e] = sum;
  }
}

template <typename Tc>
cudaError_t launch_backward_level(const BwdLevelArgs<Tc>& args, size_t smem, cudaStream_t stream) {
  BwdLevelArgs<Tc> a = args;
  a.d = level_divisors(a.g, a.k, a.hq, a.wq);
  a.quad_vec = a.direct ? std::min(quad_load_width(a.xin, a.W), quad_load_width(a.gin, a.W)) : 1;
  a.pairs = a.direct && pair_staging(a.xin, a.W, a.k, a.g.tw) && pair_staging(a.gin, a.W, a.k, a.g.tw);
  a.plane_tile = !(sizeof(Tc) == 2 && a.pairs) && level_plane_tile(a.g);
  const unsigned blocks = unsigned(int64_t(a.C) * a.g.splits);
  return dispatch_kernel_size(a.k, [&](auto kc, auto only) {
    constexpr int K = decltype(kc)::value;
    constexpr bool kW = decltype(only)::value == 0;  // k = 1: the instance without window passes
    const auto launch = [&](auto plane) {
      constexpr bool kPlane = decltype(plane)::value;
      if constexpr (sizeof(Tc) == 2 && !kPlane)
        if (a.pairs) return launch_with_smem(backward_level_kernel<Tc, true, K, false, true, kW>, blocks, smem, stream, a);
      if (a.direct) return launch_with_smem(backward_level_kernel<Tc, true, K, kPlane, false, kW>, blocks, smem, stream, a);
      return launch_with_smem(backward_level_kernel<Tc, false, K, kPlane, false, kW>, blocks, smem, stream, a);
    };
    return a.plane_tile ? launch(std::true_type{}) : launch(std::false_type{});
  });
}

template cudaError_t launch_backward_level<float>(const BwdLevelArgs<float>&, size_t, cudaStream_t);
template cudaError_t launch_backward_level<__half>(const BwdLevelArgs<__half>&, size_t, cudaStream_t);
template cudaError_t launch_backward_level<__nv_bfloat16>(const BwdLevelArgs<__nv_bfloat16>&, size_t, cudaStream_t);

}  // namespace wtconv_detail
}  // namespace winconv
