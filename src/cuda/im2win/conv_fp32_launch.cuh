// Instantiates and launches conv_fp32_simt_kernel for one tile shape; included by the small
// per-variant .cu files in instantiations/ so they compile in parallel.
#pragma once

#include "cuda/cuda_status.h"
#include "cuda/im2win/conv_fp32_launch.h"
#include "cuda/im2win/conv_fp32_simt_kernel.cuh"
#include "cuda/im2win/window_gather.cuh"

namespace winconv::im2win {

template <int BM, int BN, template <int, int, int> class Gather, bool kOutNchw>
cudaError_t launch_conv_fp32_tile(const ConvGemmParams& p, const SplitKParams& sk, cudaStream_t stream) {
  using Traits = TileTraits<BM, BN, Gather<BM, kBK, TileTraits<BM, BN>::kThreads>::kMajorM>;
  auto* unsplit = conv_fp32_simt_kernel<BM, BN, Gather, kOutNchw, false>;
  auto* split = conv_fp32_simt_kernel<BM, BN, Gather, kOutNchw, true>;
  // Above 48 KB of dynamic shared memory a kernel must opt in (cheap and idempotent).
  auto run = [&](auto* kernel, dim3 grid) {
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
    if (err != cudaSuccess) return cuda_take_error(err);
    kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(p, sk);
    return cudaGetLastError();
  };
  const unsigned tiles = unsigned(p.m_tiles) * unsigned(p.n_tiles);
  // Unsplit tiles: all of them, or the head of a tail split.
  const unsigned unsplit_tiles = sk.k_splits > 1 ? unsigned(sk.tile_begin) : tiles;
  if (unsplit_tiles > 0) {
    const cudaError_t err = run(unsplit, dim3(unsplit_tiles));
    if (err != cudaSuccess) return err;
  }
  return sk.k_splits > 1 ? run(split, dim3(tiles - unsplit_tiles, unsigned(sk.k_splits))) : cudaSuccess;
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
