// Instantiates and launches conv_fp32_simt_kernel for one tile shape; included by the small
// per-variant .cu files in instantiations/ so they compile in parallel.
#pragma once

#include "cuda/common/dynamic_smem.h"
#include "cuda/im2win/conv_fp32_launch.h"
#include "cuda/im2win/conv_fp32_simt_kernel.cuh"
#include "cuda/im2win/window_gather.cuh"

namespace winconv::im2win {

// One launch of the unsplit or the split kernel. Above 48 KB of dynamic shared memory a kernel
// must opt in; the limit is raised once per kernel and device (dynamic_smem.h). The carveout is
// left to the driver: asking for the smallest that holds the resident blocks did not steady the
// one layer whose time varies between processes (docs/conv2d.md, v20).
template <int BM, int BN, template <int, int, int> class Gather, bool kOutNchw, bool kSplitK>
cudaError_t launch_conv_fp32_grid(const ConvGemmParams& p, const SplitKParams& sk, dim3 grid, cudaStream_t stream) {
  using Traits = TileTraits<BM, BN, Gather<BM, kBK, TileTraits<BM, BN>::kThreads>::kMajorM>;
  auto* kernel = conv_fp32_simt_kernel<BM, BN, Gather, kOutNchw, kSplitK>;
  const cudaError_t err = ensure_dynamic_smem(reinterpret_cast<const void*>(kernel), Traits::kSmemBytes);
  if (err != cudaSuccess) return err;
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(p, sk);
  return cudaGetLastError();
}

template <int BM, int BN, template <int, int, int> class Gather, bool kOutNchw>
cudaError_t launch_conv_fp32_tile(const ConvGemmParams& p, const SplitKParams& sk, cudaStream_t stream) {
  const unsigned tiles = unsigned(p.m_tiles) * unsigned(p.n_tiles);
  // Unsplit tiles: all of them, or the head of a tail split.
  const unsigned unsplit_tiles = sk.k_splits > 1 ? unsigned(sk.tile_begin) : tiles;
  if (unsplit_tiles > 0) {
    const cudaError_t err = launch_conv_fp32_grid<BM, BN, Gather, kOutNchw, false>(p, sk, dim3(unsplit_tiles), stream);
    if (err != cudaSuccess) return err;
  }
  return sk.k_splits > 1
             ? launch_conv_fp32_grid<BM, BN, Gather, kOutNchw, true>(p, sk, dim3(tiles - unsplit_tiles, unsigned(sk.k_splits)), stream)
             : cudaSuccess;
}

template <template <int, int, int> class Gather, bool kOutNchw>
cudaError_t launch_conv_fp32(const ConvGemmParams& p, const SplitKParams& sk, TileShape tile, cudaStream_t stream) {
  switch (tile) {
    case TileShape::k128x128: return launch_conv_fp32_tile<128, 128, Gather, kOutNchw>(p, sk, stream);
    case TileShape::k128x64: return launch_conv_fp32_tile<128, 64, Gather, kOutNchw>(p, sk, stream);
    case TileShape::k64x128: return launch_conv_fp32_tile<64, 128, Gather, kOutNchw>(p, sk, stream);
    case TileShape::k128x96: return launch_conv_fp32_tile<128, 96, Gather, kOutNchw>(p, sk, stream);
    case TileShape::k128x32: return launch_conv_fp32_tile<128, 32, Gather, kOutNchw>(p, sk, stream);
    case TileShape::k128x16: return launch_conv_fp32_tile<128, 16, Gather, kOutNchw>(p, sk, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace winconv::im2win
