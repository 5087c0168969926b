// Forward, one wavelet level l >= 2 (deepest first): reads X_{l-1} tiles with a halo, forms the
// four Haar subbands Y_l on chip, convolves them with the folded weights 2^-l * s_l * W_l, adds the
// already-synthesised deeper residual R_l at the LL position and writes R_{l-1}, the synthesis of
// levels >= l on the level l-1 grid. HBM: reads X_{l-1} and R_l, writes R_{l-1}. With kDirect
// (level 2 when L == 2, plan.fwd_level2_direct) it reads x instead and forms X_1 on chip.
#include <type_traits>

#include "wtconv_kernels.cuh"
#include "wtconv_haar.cuh"
#include "wtconv_items.cuh"
#include "wtconv_level_tiles.cuh"
#include "wtconv_quad_staging.cuh"
#include "wtconv_staging.cuh"
#include "wtconv_windows.cuh"

namespace winconv {
namespace wtconv_detail {

// kPlane: the tile holds the whole level grid; its coefficients alone are staged per item, the
// zeros around them written once (staged_block). kPairs: 16-bit activations staged as block pairs
// (a.pairs); compiled only into the instances that take it, whose registers it raises. kWindows
// false: the k = 1 instance, its subband convs taken in the synthesis (dispatch_kernel_size's kOnly).
template <typename Tin, bool kDirect, int K, bool kPlane, bool kPairs, bool kWindows>
__device__ __forceinline__ void forward_level_body(const FwdLevelArgs<Tin>& a) {
  static_assert(kWindows || K == 0, "only the runtime-k instance has a k = 1 form");
  extern __shared__ float smem[];
  const int k = K ? K : a.k, r = k / 2, kk = k * k;
  const int c = blockIdx.x / a.g.splits, split = blockIdx.x % a.g.splits;
  const int th = a.g.th, tw = a.g.tw, np = a.g.np;
  const int eh = th + 2 * r, ew = tw + 2 * r, plane = eh * ew;
  const int fs = level_filter_stride(k);
  float* ws = smem;           // 4 folded filters, fs apart
  float* ys = smem + 4 * fs;  // np x 4 x eh x ew subbands
  float* zs = ys + np * 4 * plane + (K == 0 ? kWindowSlack : 0);  // np x 4 x th x tw convolved subbands

  if constexpr (K == 0) zero_filter_padding(ws, 4, k);
  const int wk = a.wk > 0 ? a.wk : k;  // the stored filters' size: the level runs at their central k x k
  for (int i = threadIdx.x; i < 4 * kk; i += blockDim.x)
    ws[i / kk * fs + filter_slot(i % kk, k)] =
        a.weight[int64_t(4 * c + i / kk) * wk * wk + central_tap(i % kk, k, wk)] * a.scale[4 * c + i / kk] * a.factor;

  if constexpr (kPlane) zero_floats(ys, np * 4 * plane);

  int64_t begin, end, step;
  block_items<kDirect>(a.g.items, a.g.splits, split, &begin, &end, &step);
  for (int64_t item = begin; item < end; item += step) {
    const ItemPos pos = decode_item(a.g, item);
    // R_l of this thread's first synthesis coefficient, loaded before the staging.
    const float res_first = first_residual(a.rin, pos, np * th * tw, a.d.cell, a.d.col, a.B, a.C, c, a.hq, a.wq);
    __syncthreads();
    // One staging loop per load path (load_block_ll<V>), chosen once per item; kPairs
    // instances stage block pairs instead and never instantiate it.
    const auto stage_blocks = [&](auto vec) {
      stage_level_tile<kPlane, kDirect>(
          a, pos, r, np, plane, c,
          [&](const LevelBlock& blk, int hin, int win) {
            if constexpr (kDirect) {
              return load_block_ll<decltype(vec)::value>(a.xin, blk, hin, win);  // the forward chain is float
            } else {
              return load_block(a.xin, blk, hin, win);
            }
          },
          [&](int e, float4 v) {
            uint32_t p, rem;
            staged_slot<kPlane>(e, a.d, r, ew, p, rem);
            float z[4];
            haar4(v.x, v.y, v.z, v.w, z);
            float* dst = ys + p * 4 * plane + rem;
#pragma unroll
            for (int s = 0; s < 4; ++s) dst[s * plane] = z[s];
          });
    };
    if constexpr (kPairs) {
      static_assert(kDirect && sizeof(Tin) == 2 && !kPlane, "pair staging: 16-bit activations, tiled grid");
      stage_tile<2>(
          np * eh * int(a.d.row2.divisor),
          [&](int e) {
            const PairPos v = level_pair(e, pos, r, a.d, a.B, a.C, c, a.hq, a.wq, a.H, a.W);
            return load_block_pair_ll(a.xin, v.off, v.qy, v.qx, v.in, a.H, a.W);
          },
          [&](int e, const BlockPair& v) {
            const Pos3 q = split3(e, a.d.plane2, a.d.row2);
            float z0[4], z1[4];
            haar4(v.a.x, v.a.y, v.a.z, v.a.w, z0);
            haar4(v.b.x, v.b.y, v.b.z, v.b.w, z1);
            float* dst = ys + q.p * 4 * plane + q.y * ew + 2 * q.x;  // 8-byte aligned: ew, plane even
#pragma unroll
            for (int s = 0; s < 4; ++s) *reinterpret_cast<float2*>(dst + s * plane) = make_float2(z0[s], z1[s]);
          });
    } else {
      stage_level_blocks<kDirect>(a, stage_blocks);
    }
    __syncthreads();
    // The subband convs into zs, then the synthesis per coefficient.
    level_subband_results<K, kWindows>(a, ws, fs, ys, eh, ew, th, tw, np, k, zs);
    level_synthesis_pass<kWindows, false>(a, pos, c, np, th, tw, zs, ws, fs, ys, plane, ew, a.rin, res_first, a.rout);
  }
}

// The runtime-k windows instance at 3 blocks per SM (80 registers): its window passes' vector
// phases and compile-time kernel sizes took it to 110 registers, 2 blocks. The direct k = 7
// instance likewise: with its three row-load widths (load_block_ll<V>) it took 98 registers, 2
// blocks, and ran 7-14% slower than at 80 (docs/wtconv.md, perf note 109).
template <typename Tin, bool kDirect, int K, bool kPlane, bool kWindows>
__global__ void __launch_bounds__(kBlockThreads, (K == 0 && kWindows) || (kDirect && K == 7) ? 3 : 0)
    forward_level_kernel(FwdLevelArgs<Tin> a) {
  forward_level_body<Tin, kDirect, K, kPlane, false, kWindows>(a);
}
// 16-bit activations staged in block pairs: held to 4 blocks per SM (64 registers; k = 5 spills
// 20 bytes), which the pairs' 16-byte loads in flight would otherwise exceed; a bound of 3 blocks
// measured 1.6% slower on the big_L2 forward (docs/wtconv.md, perf note 28). Without pairs the
// 16-bit kernel is the float one's (perf note 67).
template <typename Tin, int K, bool kWindows>
__global__ void __launch_bounds__(kBlockThreads, 4) forward_level_pairs_kernel(FwdLevelArgs<Tin> a) {
  forward_level_body<Tin, true, K, false, true, kWindows>(a);
}

// A stored chain is float; an activation input (fp16/bf16 only ever direct) takes the direct kernel.
template <typename Tin>
cudaError_t launch_forward_level(const FwdLevelArgs<Tin>& args, size_t smem, cudaStream_t stream) {
  FwdLevelArgs<Tin> a = args;
  a.d = level_divisors(a.g, a.k, a.hq, a.wq);
  a.quad_vec = a.direct ? quad_load_width(a.xin, a.W) : 1;
  a.pairs = a.direct && pair_staging(a.xin, a.W, a.k, a.g.tw);
  a.plane_tile = !(sizeof(Tin) == 2 && a.pairs) && level_plane_tile(a.g);
  const unsigned blocks = unsigned(int64_t(a.C) * a.g.splits);
  return dispatch_kernel_size(a.k, [&](auto kc, auto only) {
    constexpr int K = decltype(kc)::value;
    constexpr bool kW = decltype(only)::value == 0;  // k = 1: the instance without window passes
    const auto launch = [&](auto plane) {
      constexpr bool kPlane = decltype(plane)::value;
      if constexpr (std::is_same<Tin, float>::value)
        if (!a.direct)
          return launch_with_smem(forward_level_kernel<float, false, K, kPlane, kW>, blocks, smem, stream, a);
      if constexpr (sizeof(Tin) == 2 && !kPlane)
        if (a.pairs) return launch_with_smem(forward_level_pairs_kernel<Tin, K, kW>, blocks, smem, stream, a);
      return launch_with_smem(forward_level_kernel<Tin, true, K, kPlane, kW>, blocks, smem, stream, a);
    };
    return a.plane_tile ? launch(std::true_type{}) : launch(std::false_type{});
  });
}

template cudaError_t launch_forward_level<float>(const FwdLevelArgs<float>&, size_t, cudaStream_t);
template cudaError_t launch_forward_level<__half>(const FwdLevelArgs<__half>&, size_t, cudaStream_t);
template cudaError_t launch_forward_level<__nv_bfloat16>(const FwdLevelArgs<__nv_bfloat16>&, size_t,
                                                         cudaStream_t);

}  // namespace wtconv_detail
}  // namespace winconv
