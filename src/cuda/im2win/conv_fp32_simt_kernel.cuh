// The FP32 im2win convolution on CUDA cores: a GEMM over windows.
//
// Block tile BM pixels x BN output channels, reduction in steps of BK; kStages-deep cp.async
// pipeline (the next tiles stream into shared memory while the current one is multiplied);
// each thread accumulates an 8x8 register tile from float4 reads of the k-major A and B tiles.
// The A tile comes from a Gather policy (window_gather.cuh): straight from x with zero-fill for
// padding (on-chip windows) or from the materialized window tensor. Every tail (M, N, K) is
// predicated; nothing assumes divisibility.
//
// Tile order ("zig-zag"): blocks walk the (m, n) tile grid row by row with n fastest, reversing
// the n direction on every other m row, so consecutive blocks share either their window rows
// (same m) or, across a row turn, their filter tile (same n): both stay hot in L2.
//
// Epilogue: the accumulators go through shared memory so each warp writes a contiguous run of
// y (pixels for NCHW, channels for NHWC) instead of 8-element scatters.
//
// Split-K (kSplitK, launched when sk.k_splits > 1 for GEMMs whose tiles leave SMs idle):
// blockIdx.y picks a contiguous range of the reduction; the block writes its partial tile
// row-major into sk.partial, and splitk_reduce adds the splits in a fixed order (deterministic)
// into y. A separate instantiation with its own argument (SplitKParams) leaves the unsplit
// kernels' machine code as it was without split-K: a runtime split, or the split fields inside
// ConvGemmParams, made ptxas reload parameters in the loop of the 128x64 scalar NHWC kernel
// (3% slower on conv3 and conv7 NHWC).
#pragma once

#include <cstdint>

#include "cuda/im2win/async_copy.cuh"
#include "cuda/im2win/conv_gemm_params.h"
#include "cuda/im2win/window_gather.cuh"

namespace winconv::im2win {

constexpr int kStages = 4;
constexpr int kTM = 8, kTN = 8;

template <int BM, int BN, bool kMajorM = false>
struct TileTraits {
  static constexpr int kThreads = (BM / kTM) * (BN / kTN);
  static constexpr int kCPitch = BM + 1;  // odd pitch: the epilogue's column reads are conflict-free
  static constexpr int kAStageFloats = kMajorM ? BM * kAPitchMajorM : kBK * BM;
  static constexpr int kPipeFloats = kStages * (kAStageFloats + kBK * BN);
  static constexpr int kEpilogueFloats = BN * kCPitch;
  static constexpr int kSmemBytes =
      int(sizeof(float)) * (kPipeFloats > kEpilogueFloats ? kPipeFloats : kEpilogueFloats) +
      int(sizeof(int64_t)) * BM;
};

// Resident blocks per SM that the register budget is sized for (__launch_bounds__). 128-thread
// tiles with a k-major A stage ask for 4 (at most 128 registers): at 3 (146 registers) the NCHW
// C = 3 stems, with only 2-23 k-steps per tile, were latency-bound at 12 warps per SM (conv7
// -8%, conv3 -4% time at 4). The pixel-major A stage (NHWC vector gather) keeps 3: capped at 128
// registers it ran 10% slower on conv4 and conv9. Other tiles: one block more than fits 256 threads.
template <int kThreads, bool kMajorM>
constexpr int conv_min_blocks_per_sm() {
  return kThreads == 128 && !kMajorM ? 4 : 256 / kThreads + 1;
}

template <int BM, int BN, template <int, int, int> class Gather, bool kOutNchw, bool kSplitK>
__global__ void __launch_bounds__(TileTraits<BM, BN>::kThreads,
                                  conv_min_blocks_per_sm<TileTraits<BM, BN>::kThreads,
                                                         Gather<BM, kBK, TileTraits<BM, BN>::kThreads>::kMajorM>())
conv_fp32_simt_kernel(const ConvGemmParams p, const SplitKParams sk) {
  constexpr bool kMajorM = Gather<BM, kBK, TileTraits<BM, BN>::kThreads>::kMajorM;
  using Traits = TileTraits<BM, BN, kMajorM>;
  constexpr int T = Traits::kThreads;
  constexpr int kAStage = Traits::kAStageFloats;
  extern __shared__ __align__(16) float smem[];
  float* a_stages = smem;                                // [kStages][kBK][BM] or [kStages][BM][pitch]
  float* b_stages = smem + kStages * kAStage;            // [kStages][kBK][BN]
  int64_t* y_offsets = reinterpret_cast<int64_t*>(smem + (Traits::kSmemBytes / 4 - 2 * BM));

  // Zig-zag tile order.
  const int tile = blockIdx.x;
  const int m_tile = tile / p.n_tiles;
  int n_tile = tile - m_tile * p.n_tiles;
  if (m_tile & 1) n_tile = p.n_tiles - 1 - n_tile;
  const int m0 = m_tile * BM, n0 = n_tile * BN;
  const int tid = threadIdx.x;
  const int split = kSplitK ? int(blockIdx.y) : 0;
  const int kt_begin = split * sk.k_tiles_per_split;
  const int kt_all = (p.kg + kBK - 1) / kBK;
  const int k_tiles = kSplitK ? min(kt_all, kt_begin + sk.k_tiles_per_split) - kt_begin : kt_all;  // >= 1 (host)

  Gather<BM, kBK, T> gather(p, m0, tid, kt_begin * kBK);  // stateful gathers advance per load(), in k order

  // The filter tile: 16-byte copies of rows k0.. of b, whose rows are padded to whole stages
  // (kg_pad), so only the column tail is predicated; a copy past it reads column 0 of its row.
  constexpr int kBVecPerRow = BN / 4;
  constexpr int kBVecs = kBK * kBVecPerRow;
  constexpr int kBIters = (kBVecs + T - 1) / T;
  const float* b_src[kBIters];
  bool b_ok[kBIters];
#pragma unroll
  for (int i = 0; i < kBIters; ++i) {
    const int v = min(tid + i * T, kBVecs - 1);
    const int kk = v / kBVecPerRow, n = (v - kk * kBVecPerRow) * 4;
    b_ok[i] = n0 + n < p.n_pad;
    b_src[i] = p.b + int64_t(kk) * p.n_pad + (b_ok[i] ? n0 + n : 0);
  }
  auto load_b = [&](float* bs, int k0) {
    const int64_t row0 = int64_t(k0) * p.n_pad;
#pragma unroll
    for (int i = 0; i < kBIters; ++i) {
      const int v = tid + i * T;
      if (kBVecs % T == 0 || v < kBVecs) {
        const int kk = v / kBVecPerRow, n = (v - kk * kBVecPerRow) * 4;
        cp_async_16(bs + kk * BN + n, b_src[i] + row0, b_ok[i]);
      }
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) {
      gather.load(p, a_stages + s * kAStage, (kt_begin + s) * kBK);
      load_b(b_stages + s * kBK * BN, (kt_begin + s) * kBK);
    }
    cp_async_commit();
  }

  // Thread (tx, ty) owns an 8x8 block of the tile; a warp covers 4 (M) x 8 (N) threads, a 32x64
  // warp tile, so each fragment read touches 4 (A) and 8 (B) distinct vectors.
  constexpr int kThreadsN = BN / kTN, kWarpsN = kThreadsN / 8;
  static_assert(kThreadsN % 8 == 0 && (BM / kTM) % 4 == 0, "a warp covers 4 x 8 threads");
  const int warp = tid / 32, lane = tid % 32;
  const int tx = (warp % kWarpsN) * 8 + lane % 8, ty = (warp / kWarpsN) * 4 + lane / 8;
  float acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) acc[i][j] = 0.f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt landed for everyone; stage kt-1's slot is free to refill
    const int next = kt + kStages - 1;
    if (next < k_tiles) {
      const int slot = next % kStages;
      gather.load(p, a_stages + slot * kAStage, (kt_begin + next) * kBK);
      load_b(b_stages + slot * kBK * BN, (kt_begin + next) * kBK);
    }
    cp_async_commit();

    const float* as = a_stages + (kt % kStages) * kAStage;
    const float* bs = b_stages + (kt % kStages) * kBK * BN;
    if constexpr (!kMajorM) {
#pragma unroll
      for (int kk = 0; kk < kBK; ++kk) {
        float a[kTM], b[kTN];
        // Two float4 halves BM/2 apart: a warp reads 2 (A) and 16 (B) distinct vectors per step.
        *reinterpret_cast<float4*>(&a[0]) = *reinterpret_cast<const float4*>(as + kk * BM + ty * 4);
        *reinterpret_cast<float4*>(&a[4]) = *reinterpret_cast<const float4*>(as + kk * BM + ty * 4 + BM / 2);
        *reinterpret_cast<float4*>(&b[0]) = *reinterpret_cast<const float4*>(bs + kk * BN + tx * 4);
        *reinterpret_cast<float4*>(&b[4]) = *reinterpret_cast<const float4*>(bs + kk * BN + tx * 4 + BN / 2);
#pragma unroll
        for (int i = 0; i < kTM; ++i)
#pragma unroll
          for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    } else {
      // Pixel-major A: one float2 per pixel row covers two reduction steps (float4 would
      // cover four, but its 32 live registers push the 256-thread tile past 128 and spill).
#pragma unroll
      for (int k2 = 0; k2 < kBK; k2 += 2) {
        float2 a2[kTM];
#pragma unroll
        for (int i = 0; i < kTM; ++i) {
          const int ml = ty * 4 + (i & 3) + (i >> 2) * (BM / 2);
          a2[i] = *reinterpret_cast<const float2*>(as + ml * kAPitchMajorM + k2);
        }
#pragma unroll
        for (int kq = 0; kq < 2; ++kq) {
          float b[kTN];
          *reinterpret_cast<float4*>(&b[0]) = *reinterpret_cast<const float4*>(bs + (k2 + kq) * BN + tx * 4);
          *reinterpret_cast<float4*>(&b[4]) = *reinterpret_cast<const float4*>(bs + (k2 + kq) * BN + tx * 4 + BN / 2);
#pragma unroll
          for (int i = 0; i < kTM; ++i) {
            const float a = kq == 0 ? a2[i].x : a2[i].y;
#pragma unroll
            for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a, b[j], acc[i][j]);
          }
        }
      }
    }
  }

  // ---- Epilogue: registers -> shared (column-major tile) -> coalesced global stores.
  cp_async_wait<0>();
  __syncthreads();  // every thread is done reading the pipeline buffers; reuse them
  float* cs = smem;  // [BN][kCPitch]
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int ml = ty * 4 + (i & 3) + (i >> 2) * (BM / 2);
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int nl = tx * 4 + (j & 3) + (j >> 2) * (BN / 2);
      cs[nl * Traits::kCPitch + ml] = acc[i][j];
    }
  }
  // A split writes its partial tile row-major, like the NHWC output.
  constexpr bool out_nchw = kOutNchw && !kSplitK;
  float* const out = kSplitK ? sk.partial + int64_t(split) * sk.partial_stride : p.y;
  if constexpr (out_nchw) {
    // Where pixel m starts in y: image * K*P*Q + (p*Q + q); channel n adds n*P*Q.
    for (int ml = tid; ml < BM; ml += T) {
      const int m = m0 + ml < p.m ? m0 + ml : 0;
      const int img = m / p.pq;
      y_offsets[ml] = int64_t(img) * p.y_image_stride + (m - img * p.pq);
    }
  }
  __syncthreads();
  // Four consecutive outputs per thread: one 16-byte store when they are contiguous and aligned
  // in y (same image, in range, 16-byte boundary), else four predicated scalar stores.
  if constexpr (out_nchw) {
    for (int e = tid; e < BM * BN / 4; e += T) {
      const int nl = e / (BM / 4), ml = (e - nl * (BM / 4)) * 4;
      const int n = n0 + nl;
      if (n >= p.n) continue;
      const float* c = cs + nl * Traits::kCPitch + ml;
      const int64_t base = y_offsets[ml] + int64_t(n) * p.pq;
      if (m0 + ml + 3 < p.m && y_offsets[ml + 3] == y_offsets[ml] + 3 && (base & 3) == 0) {
        *reinterpret_cast<float4*>(p.y + base) = make_float4(c[0], c[1], c[2], c[3]);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (m0 + ml + i < p.m) p.y[y_offsets[ml + i] + int64_t(n) * p.pq] = c[i];
      }
    }
  } else {
    for (int e = tid; e < BM * BN / 4; e += T) {
      const int ml = e / (BN / 4), nl = (e - ml * (BN / 4)) * 4;
      const int m = m0 + ml, n = n0 + nl;
      if (m >= p.m) continue;
      const float* c = cs + nl * Traits::kCPitch + ml;
      const int64_t base = int64_t(m) * p.n + n;
      if (n + 3 < p.n && (base & 3) == 0) {
        *reinterpret_cast<float4*>(out + base) =
            make_float4(c[0], c[Traits::kCPitch], c[2 * Traits::kCPitch], c[3 * Traits::kCPitch]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (n + j < p.n) out[base + j] = c[j * Traits::kCPitch];
      }
    }
  }
}

}  // namespace winconv::im2win
