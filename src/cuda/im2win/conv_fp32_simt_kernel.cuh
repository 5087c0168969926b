// The FP32 im2win convolution on CUDA cores: a GEMM over windows.
//
// Block tile BM pixels x BN output channels, reduction in steps of BK; kStages-deep cp.async
// pipeline (the next tiles stream into shared memory while the current one is multiplied);
// each thread accumulates an 8x8 (8x12 in the 96-wide tile, 8x4 in the 32-wide one, 8x2 in the
// 16-wide one) register tile from vector reads of the A and B tiles.
// The A tile comes from a Gather policy (window_gather.cuh): straight from x with zero-fill for
// padding (on-chip windows) or from the materialized window tensor. Every tail (M, N, K) is
// predicated; nothing assumes divisibility.
//
// Tile order ("zig-zag"): blocks walk the (m, n) tile grid row by row with n fastest, reversing
// the n direction on every other m row, so consecutive blocks share either their window rows
// (same m) or, across a row turn, their filter tile (same n): both stay hot in L2.
//
// Epilogue: the accumulators go through shared memory so each warp writes a contiguous run of
// y (pixels for NCHW, channels for NHWC) instead of 8-element scatters; a swizzle keeps both
// sides free of bank conflicts (EpilogueTile).
//
// Split-K (kSplitK, launched when sk.k_splits > 1 for GEMMs whose tiles leave SMs idle):
// blockIdx.y picks a contiguous range of the reduction and blockIdx.x + sk.tile_begin the tile
// (a tail split runs the tiles before tile_begin unsplit, in a launch of the unsplit kernel);
// the block writes its partial tile row-major into sk.partial, and splitk_reduce adds the splits
// in a fixed order (deterministic) into y. A separate instantiation with its own argument (SplitKParams) leaves the unsplit
// kernels' machine code as it was without split-K: a runtime split, or the split fields inside
// ConvGemmParams, made ptxas reload parameters in the loop of the 128x64 scalar NHWC kernel
// (3% slower on conv3 and conv7 NHWC).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/im2win/async_copy.cuh"
#include "cuda/im2win/conv_gemm_params.h"
#include "cuda/im2win/tile_shape.h"
#include "cuda/im2win/window_gather.cuh"

namespace winconv::im2win {

constexpr int kStages = 4;
constexpr int kTM = 8;  // outputs per thread along M: two float4 runs of A, BM/2 apart

// A thread's kTN outputs along N: kPieces runs of kWidth adjacent columns, kStride apart, so the
// 8 column-threads of a warp read 8 * kWidth adjacent floats per run (no bank conflict).
// BN = 64 and 128: 8 = two float4 runs BN/2 apart; BN = 96: 12 = three float4 runs 32 apart;
// BN = 32: 4 = one float4 run; BN = 16: 2 = one float2 run.
template <int BN>
struct NFragment {
  static constexpr int kTN = tile_tn_of_bn(BN);
  static constexpr int kWidth = kTN % 4 == 0 ? 4 : 2;
  static constexpr int kPieces = kTN / kWidth;
  static constexpr int kStride = BN / kPieces;
  static_assert(kStride == BN / kTN * kWidth, "the runs of all threads tile BN exactly");
  // Column of the thread's output j within the tile.
  __device__ static constexpr int column(int tx, int j) { return (j / kWidth) * kStride + tx * kWidth + j % kWidth; }
  // The thread's kTN values of one row of a BN-wide stage.
  __device__ static void load(float* b, const float* row, int tx) {
#pragma unroll
    for (int q = 0; q < kPieces; ++q) {
      if constexpr (kWidth == 4)
        *reinterpret_cast<float4*>(&b[4 * q]) = *reinterpret_cast<const float4*>(row + q * kStride + tx * 4);
      else
        *reinterpret_cast<float2*>(&b[2 * q]) = *reinterpret_cast<const float2*>(row + q * kStride + tx * 2);
    }
  }
};

// Where the epilogue keeps the output tile in shared memory: [BN][BM] (column-major) for NCHW
// output, [BM][BN] (row-major) for NHWC output and split-K partials. A thread stores its
// accumulators one by one; a warp then reads 32 consecutive elements of one column (or row) and
// stores them to 32 consecutive addresses of y. An XOR swizzle inside each aligned run of 32
// makes both sides conflict-free. In a store, lane (tx, ty) of the 8 x 4 warp layout writes
// pixel 4 ty + c of column kWidth tx + c' (plus offsets that are multiples of 32, or 16 columns
// apart at kWidth = 2), so
// - column-major: the pixel index supplies bits 2-3 (ty); the swizzle adds tx in bits 0-1 and 4;
// - row-major: the column index supplies bits 2-4 (tx) at kWidth = 4 and bits 1-3 at kWidth = 2;
//   the swizzle adds ty in bits 0-1, or in bits 0 and 4.
// (The former tile, column-major with an odd pitch and read as 4 consecutive pixels per thread,
// met 4-way conflicts in both the stores and the reads of the NCHW epilogue: 4x the shared-memory
// cycles, as many as the whole GEMM of the 27-step reduction of conv7.)
// The 16-wide tile (kWidth = 2) has rows of 16: its row-major form takes rows in pairs, each pair
// one aligned run of 32 (row ml at half ml & 1), swizzled as the kWidth = 2 rows above; its reads
// then take the 16 channels of two adjacent rows.
template <int BM, int BN, int kWidth>
struct EpilogueTile {
  static_assert(BM % 32 == 0 && (BN % 32 == 0 || (BN == 16 && kWidth == 2)),
                "the swizzle permutes aligned runs of 32");
  __host__ __device__ static int column_major(int nl, int ml) {
    const int tx = (nl / kWidth) & 7;
    return nl * BM + (ml ^ ((tx & 3) | (tx >> 2) << 4));
  }
  __host__ __device__ static int row_major(int ml, int nl) {
    const int ty = (ml >> 2) & 3;
    if constexpr (BN == 16) return (ml >> 1) * 32 + (((ml & 1) * 16 + nl) ^ ((ty & 1) | (ty >> 1) << 4));
    return ml * BN + (nl ^ (kWidth == 4 ? ty : (ty & 1) | (ty >> 1) << 4));
  }
};

// The epilogue's walk along one dimension of the tile: element k of Count, S apart, goes from
// tile[index(k * S)] to out + k * step while k * S < left.
template <int Count, int S, class Index>
__device__ __forceinline__ void store_walk(const float* tile, float* out, int64_t step, int left, Index index) {
#pragma unroll
  for (int k = 0; k < Count; ++k, out += step)
    if (k * S < left) *out = tile[index(k * S)];
}

template <int BM, int BN, bool kMajorM = false>
struct TileTraits {
  static constexpr int kThreads = (BM / kTM) * (BN / NFragment<BN>::kTN);
  static constexpr int kAStageFloats = kMajorM ? BM * kAPitchMajorM : kBK * BM;
  static constexpr int kPipeFloats = kStages * (kAStageFloats + kBK * BN);
  static constexpr int kEpilogueFloats = BM * BN;  // EpilogueTile
  static constexpr int kSmemBytes =
      int(sizeof(float)) * (kPipeFloats > kEpilogueFloats ? kPipeFloats : kEpilogueFloats);
};

// Resident blocks per SM that the register budget is sized for (__launch_bounds__). 128-thread
// tiles of 8x8 or fewer outputs per thread with a k-major A stage ask for 4 (at most 128
// registers): at 3 (146 registers) the NCHW C = 3 stems, with only 2-23 k-steps per tile, were
// latency-bound at 12 warps per SM (conv7 -8%, conv3 -4% time at 4). The pixel-major A stage
// (NHWC vector gather) keeps 3: capped at 128 registers it ran 10% slower on conv4 and conv9.
// The 8x12 threads of 128x96 keep 3 too (96 accumulators: 168 registers). Other tiles: one block
// more than fits 256 threads.
template <int kThreads, bool kMajorM, int kTN>
constexpr int conv_min_blocks_per_sm() {
  return kThreads == 128 && !kMajorM && kTN <= 8 ? 4 : 256 / kThreads + 1;
}

template <int BM, int BN, template <int, int, int> class Gather, bool kOutNchw, bool kSplitK>
__global__ void __launch_bounds__(TileTraits<BM, BN>::kThreads,
                                  conv_min_blocks_per_sm<TileTraits<BM, BN>::kThreads,
                                                         Gather<BM, kBK, TileTraits<BM, BN>::kThreads>::kMajorM,
                                                         tile_tn_of_bn(BN)>())
conv_fp32_simt_kernel(const ConvGemmParams p, const SplitKParams sk) {
  constexpr bool kMajorM = Gather<BM, kBK, TileTraits<BM, BN>::kThreads>::kMajorM;
  using Traits = TileTraits<BM, BN, kMajorM>;
  constexpr int T = Traits::kThreads;
  constexpr int kAStage = Traits::kAStageFloats;
  extern __shared__ __align__(16) float smem[];
  float* a_stages = smem;                                // [kStages][kBK][BM] or [kStages][BM][pitch]
  float* b_stages = smem + kStages * kAStage;            // [kStages][kBK][BN]

  // Zig-zag tile order.
  const int tile = blockIdx.x + (kSplitK ? sk.tile_begin : 0);
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
  int b_dst[kBIters];  // the copy's offset in a stage
  bool b_ok[kBIters];
#pragma unroll
  for (int i = 0; i < kBIters; ++i) {
    const int v = min(tid + i * T, kBVecs - 1);
    const int kk = v / kBVecPerRow, n = (v - kk * kBVecPerRow) * 4;
    b_ok[i] = n0 + n < p.n_pad;
    b_src[i] = p.b + int64_t(kk) * p.n_pad + (b_ok[i] ? n0 + n : 0);
    b_dst[i] = kk * BN + n;
  }
  auto load_b = [&](float* bs, int k0) {
    const int64_t row0 = int64_t(k0) * p.n_pad;
#pragma unroll
    for (int i = 0; i < kBIters; ++i)
      if (kBVecs % T == 0 || tid + i * T < kBVecs) cp_async_16(bs + b_dst[i], b_src[i] + row0, b_ok[i]);
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) {
      gather.load(p, a_stages + s * kAStage, (kt_begin + s) * kBK);
      load_b(b_stages + s * kBK * BN, (kt_begin + s) * kBK);
    }
    cp_async_commit();
  }

  // Thread (tx, ty) owns an 8 x kTN block of the tile; a warp covers 4 (M) x 8 (N) threads (a
  // 32x64 warp tile at kTN = 8), so each fragment read touches 4 (A) and 8 (B) distinct vectors.
  using Frag = NFragment<BN>;
  constexpr int kTN = Frag::kTN;
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
    if constexpr (!kMajorM && BN <= 64) {
      // The reduction's last step may hold fewer than kBK rows (K_gemm = 27 for a 3 x 3 x 3 stem:
      // 5 of its 32 rows are zero padding). In the 64- and 32-wide tiles, which the stems with up to 64
      // filters take and where 2-10 steps per tile make the padding weigh, that step runs its own
      // copy of the loop, which stops after the real rows (conv7 -1.5% to -4% time, conv3 -6%);
      // the padding adds zeros, so the sums are the same. The other tiles keep the single loop
      // below as it was: compiled beside a second copy, their main loops took other registers and
      // ran up to 5% slower (docs/conv2d.md, v11). (So the loop is written twice: as a shared
      // helper, or one loop for both, it also moved the other tiles' register allocation.)
      const int kk_n = p.kg - (kt_begin + kt) * kBK;
      auto multiply = [&](auto partial_tag) {
        constexpr bool kPartial = decltype(partial_tag)::value;
#pragma unroll
        for (int kk = 0; kk < kBK; ++kk) {
          if (kPartial && kk >= kk_n) break;
          float a[kTM], b[kTN];
          *reinterpret_cast<float4*>(&a[0]) = *reinterpret_cast<const float4*>(as + kk * BM + ty * 4);
          *reinterpret_cast<float4*>(&a[4]) = *reinterpret_cast<const float4*>(as + kk * BM + ty * 4 + BM / 2);
          Frag::load(b, bs + kk * BN, tx);
#pragma unroll
          for (int i = 0; i < kTM; ++i)
#pragma unroll
            for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
      };
      if (kk_n < kBK) multiply(std::true_type{});
      else multiply(std::false_type{});
    } else if constexpr (!kMajorM) {
#pragma unroll
      for (int kk = 0; kk < kBK; ++kk) {
        float a[kTM], b[kTN];
        // A: two float4 halves BM/2 apart; B: the thread's runs (NFragment).
        *reinterpret_cast<float4*>(&a[0]) = *reinterpret_cast<const float4*>(as + kk * BM + ty * 4);
        *reinterpret_cast<float4*>(&a[4]) = *reinterpret_cast<const float4*>(as + kk * BM + ty * 4 + BM / 2);
        Frag::load(b, bs + kk * BN, tx);
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
          Frag::load(b, bs + (k2 + kq) * BN, tx);
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

  // ---- Epilogue: registers -> shared (EpilogueTile) -> coalesced global stores.
  // A split writes its partial tile row-major, like the NHWC output.
  constexpr bool out_nchw = kOutNchw && !kSplitK;
  using Epi = EpilogueTile<BM, BN, Frag::kWidth>;
  cp_async_wait<0>();
  __syncthreads();  // every thread is done reading the pipeline buffers; reuse them
  float* cs = smem;
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int ml = ty * 4 + (i & 3) + (i >> 2) * (BM / 2);
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int nl = Frag::column(tx, j);
      cs[out_nchw ? Epi::column_major(nl, ml) : Epi::row_major(ml, nl)] = acc[i][j];
    }
  }
  __syncthreads();
  // Each thread keeps one pixel (NCHW) or one channel (row-major) and walks the other dimension S
  // apart, S = 1 or 2 dividing kWidth (and 4): every element's swizzle is then a compile-time
  // function of the step k, since nl0 + k S and k S share their run index (and ml0 + k S and
  // k S their group of 4 pixels).
  if constexpr (out_nchw) {
    constexpr int S = T / BM;
    static_assert(T % BM == 0 && Frag::kWidth % S == 0, "a thread keeps its pixel");
    const int ml = tid % BM, nl0 = S == 1 ? 0 : tid / BM, m = m0 + ml;
    if (m >= p.m) return;
    const int img = m / p.pq;
    float* const y_out = p.y + int64_t(img) * p.y_image_stride + (m - img * p.pq) + int64_t(n0 + nl0) * p.pq;
    const int64_t y_step = int64_t(S) * p.pq;
    const int n_left = p.n - n0 - nl0;
    store_walk<BN / S, S>(cs + nl0 * BM, y_out, y_step, n_left, [&](int nl) { return Epi::column_major(nl, ml); });
  } else {
    // Partial rows start at sk.m_begin.
    float* const out = kSplitK ? sk.partial + int64_t(split) * sk.partial_stride : p.y;
    const int row0 = kSplitK ? sk.m_begin : 0;
    if constexpr (T % BN == 0) {
      constexpr int S = T / BN;
      static_assert(4 % S == 0 || BN == 16, "a thread keeps its channel");
      const int nl = tid % BN, ml0 = S == 1 ? 0 : tid / BN, n = n0 + nl;
      if (n >= p.n) return;
      float* const o = out + int64_t(m0 + ml0 - row0) * p.n + n;
      const int64_t o_step = int64_t(S) * p.n;
      const int m_left = p.m - m0 - ml0;
      if constexpr (BN == 16)  // S = 8: row ml0 + k S is not row k S's swizzle shifted, so index it whole
        store_walk<BM / S, S>(cs, o, o_step, m_left, [&](int ml) { return Epi::row_major(ml0 + ml, nl); });
      else
        store_walk<BM / S, S>(cs + ml0 * BN, o, o_step, m_left, [&](int ml) { return Epi::row_major(ml, nl); });
    } else {
      // BN = 96: warp w takes rows w, w + W, ...; its lanes take channels lane + 32 c of each. The
      // swizzle stays inside each run of 32, so row_major(ml, lane + 32 c) = row_major(ml, lane) + 32 c.
      constexpr int W = T / 32;
      static_assert(BM % W == 0, "the warps share the rows evenly");
      const int lane = tid % 32, w = tid / 32;
      bool n_ok[BN / 32];
#pragma unroll
      for (int c = 0; c < BN / 32; ++c) n_ok[c] = n0 + 32 * c + lane < p.n;
#pragma unroll 4
      for (int k = 0; k < BM / W; ++k) {
        const int ml = w + k * W, m = m0 + ml;
        if (m >= p.m) break;
        float* const o = out + int64_t(m - row0) * p.n + n0 + lane;
        const float* const c_row = cs + Epi::row_major(ml, lane);
#pragma unroll
        for (int c = 0; c < BN / 32; ++c)
          if (n_ok[c]) o[32 * c] = c_row[32 * c];
      }
    }
  }
}

}  // namespace winconv::im2win
