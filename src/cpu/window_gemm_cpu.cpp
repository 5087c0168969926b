// The row GEMM of the CPU im2win path. The register block is QB output columns x KV vectors of
// filters: per run element, KV vector loads of the packed filter and QB broadcasts of window
// elements feed QB * KV multiply-adds, where a dot product per (q, k) spent a load of each
// operand per multiply-add and a horizontal sum per output. The same source is compiled for
// SSE4.2 (the build's baseline), AVX2 + FMA and AVX-512, whose vectors hold 4, 8 and 16 floats.
// Also here: the filter pack into the layout the register blocks read, transposed in registers
// with AVX2 and AVX-512.
#include "cpu/window_gemm_cpu.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

namespace winconv {
namespace {

typedef float V4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V16 __attribute__((vector_size(64)));

// r[i] lane j becomes r[j] lane i: a 16 x 16 transpose in registers, in the steps of the x86
// unpack and shuffle instructions (pairs within 128-bit lanes, 64-bit pairs, then 128-bit lanes
// twice), written as generic shuffles so that no intrinsic header is needed. Inlined only into
// functions compiled for AVX-512.
typedef int I16 __attribute__((vector_size(64)));
__attribute__((always_inline)) inline void transpose_16x16(V16 (&r)[16]) {
  constexpr I16 kUnpackLo = {0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29};
  constexpr I16 kUnpackHi = {2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31};
  constexpr I16 kPairsLo = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
  constexpr I16 kPairsHi = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};
  constexpr I16 kLanesEven = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
  constexpr I16 kLanesOdd = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};
  V16 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = __builtin_shuffle(r[i], r[i + 1], kUnpackLo);
    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], kUnpackHi);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = __builtin_shuffle(t[i], t[i + 2], kPairsLo);
    r[i + 1] = __builtin_shuffle(t[i], t[i + 2], kPairsHi);
    r[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], kPairsLo);
    r[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], kPairsHi);
  }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; ++j) {
      t[i + j] = __builtin_shuffle(r[i + j], r[i + j + 4], kLanesEven);
      t[i + j + 4] = __builtin_shuffle(r[i + j], r[i + j + 4], kLanesOdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = __builtin_shuffle(t[j], t[j + 8], kLanesEven);
    r[j + 8] = __builtin_shuffle(t[j], t[j + 8], kLanesOdd);
  }
}

// A register block of 12 columns x 32 filters, lanes[column][filter], into NCHW y: the filter e's
// 12 columns at y + e * y_k. Each half of 16 filters is transposed in registers (rows past the 12
// columns zero), then every filter writes its columns as one 8-float and one 4-float store.
#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v4"), noinline))
#endif
void store_12_columns_nchw(const float* lanes, float* y, int64_t y_k) {
  for (int half = 0; half < 2; ++half) {
    V16 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      t[i] = V16{};
      if (i < 12) std::memcpy(&t[i], lanes + i * 32 + half * 16, sizeof(V16));
    }
    transpose_16x16(t);
    float* ye = y + half * 16 * y_k;
#pragma GCC unroll 16
    for (int e = 0; e < 16; ++e, ye += y_k) {
      const V8 low = __builtin_shufflevector(t[e], t[e], 0, 1, 2, 3, 4, 5, 6, 7);
      const V4 high = __builtin_shufflevector(t[e], t[e], 8, 9, 10, 11);
      std::memcpy(ye, &low, sizeof(V8));
      std::memcpy(ye + 8, &high, sizeof(V4));
    }
  }
}

// KV = 2 filter vectors by QB = 6 columns keep 12 accumulators, 2 filter vectors and a broadcast
// within the 16 vector registers of SSE and AVX2; AVX-512's 32 hold QB = 12, which halves the
// filter loads per multiply-add (the packed block of a deep layer streams from L2).
constexpr int kVectors = 2;

// Output pixels [q0, min(q0 + QB, q)) of the row, filters [k0, k0 + KV * VW) ∩ [k0, k1).
template <typename V, int QB, int KV>
__attribute__((always_inline)) inline void column_block(const WindowRow& r, int64_t k0, int64_t q0) {
  constexpr int VW = int(sizeof(V) / sizeof(float)), KB = KV * VW;
  // Pixels past the row's last repeat it; their sums are not stored.
  const float* a[QB];
  if (r.row_q == 0) {
    for (int i = 0; i < QB; ++i) a[i] = r.a + std::min<int64_t>(q0 + i, r.q - 1) * r.q_stride;
  } else {
    int64_t row = q0 / r.row_q, column = q0 % r.row_q;
    for (int i = 0; i < QB; ++i) {
      a[i] = r.a + row * r.row_stride + column * r.q_stride;
      if (q0 + i + 1 < r.q && ++column == r.row_q) column = 0, ++row;
    }
  }
  V acc[QB][KV];
  for (int i = 0; i < QB; ++i)
    for (int v = 0; v < KV; ++v) acc[i][v] = V{};
  const float* b = r.b + (k0 - r.k0);
  // NCHW walks C groups (input channels) whose windows lie a channel's window plane apart (36 KB
  // at conv9), too far for the hardware prefetchers: the next group's lines are asked for while
  // this one runs (conv5 and conv9 NCHW -14 to -16%, deep layers -7 to -11%). Within one output
  // row the block's runs span [a[0], a[QB - 1] + len); grouped rows are not prefetched.
  const bool prefetch = r.groups > 1 && r.row_q == 0;
  for (int64_t g = 0; g < r.groups; ++g) {
    const int64_t at = g * r.g_stride;
    if (prefetch && g + 1 < r.groups)
      for (const float* line = a[0] + at + r.g_stride; line < a[QB - 1] + at + r.g_stride + r.len; line += 16)
        __builtin_prefetch(line);
    for (int64_t j = 0; j < r.len; ++j, b += kCpuFilterBlock) {
      V bv[KV];
      for (int v = 0; v < KV; ++v) std::memcpy(&bv[v], b + v * VW, sizeof(V));
      for (int i = 0; i < QB; ++i) {
        const float av = a[i][at + j];
        for (int v = 0; v < KV; ++v) acc[i][v] += av * bv[v];
      }
    }
  }
  // The stores read the accumulators at constant positions only (the loops over i and v unrolled
  // whole, single lanes from a copy). Indexed at run time, the array had to live in memory: the
  // compiler copied all of it to the stack after the reduction and stored y from there.
  // NHWC (filters contiguous in y) stores whole vectors where the block holds KB filters.
  if (r.y_k == 1 && k0 + KB <= r.k1) {
#pragma GCC unroll 16
    for (int i = 0; i < QB; ++i) {
      if (q0 + i >= r.q) break;
      float* yq = r.y + (q0 + i) * r.y_q + k0;
      for (int v = 0; v < KV; ++v) std::memcpy(yq + v * VW, &acc[i][v], sizeof(V));
    }
    return;
  }
  // Otherwise (NCHW, or a block past K) one float at a time, filter by filter: in NCHW a filter's
  // columns are adjacent in y, so each filter writes one run of up to QB floats.
  float lanes[QB][KB];
#pragma GCC unroll 16
  for (int i = 0; i < QB; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < KV; ++v) std::memcpy(&lanes[i][v * VW], &acc[i][v], sizeof(V));
  // NCHW (columns contiguous in y), AVX-512, a whole block: transposed in registers, so that each
  // filter stores its 12 columns as two vector stores. One float at a time (below) cost conv7, 27
  // multiply-adds per output, more than its reduction. Out of line: inlined here, it changed the
  // register allocation of the reduction and the deep NCHW layers ran 4-7% slower.
  if constexpr (std::is_same<V, V16>::value && QB == 12 && KV == 2) {
    static_assert(KB == 32, "store_12_columns_nchw reads rows of 32 filters");
    if (r.y_q == 1 && k0 + KB <= r.k1 && q0 + QB <= r.q) {
      store_12_columns_nchw(&lanes[0][0], r.y + k0 * r.y_k + q0, r.y_k);
      return;
    }
  }
  const int columns = int(std::min<int64_t>(QB, r.q - q0)), filters = int(std::min<int64_t>(KB, r.k1 - k0));
  for (int e = 0; e < filters; ++e)
    for (int i = 0; i < columns; ++i) r.y[(q0 + i) * r.y_q + (k0 + e) * r.y_k] = lanes[i][e];
}

// One function per instruction set and block width, each running `count` blocks of its width
// side by side: the whole register file is then the width's own (with every width inlined into
// one function, the loops reloaded their column pointers from the stack at each broadcast), and
// a row makes at most three calls (one per block per call cost conv7, 27 multiply-adds per
// output, 10%).
using ColumnBlocksFn = void (*)(const WindowRow&, int64_t k0, int64_t q0, int64_t count);
#define WINCONV_COLUMN_BLOCKS(V, COLUMNS, TARGET)                                                   \
  static constexpr int kColumns = COLUMNS, kFilters = kVectors * int(sizeof(V) / sizeof(float)); \
  template <int W>                                                                                \
  TARGET static void blocks(const WindowRow& r, int64_t k0, int64_t q0, int64_t count) {         \
    for (int64_t b = 0; b < count; ++b) column_block<V, W, kVectors>(r, k0, q0 + b * W);         \
  }
struct Sse42 {
  WINCONV_COLUMN_BLOCKS(V4, 6, __attribute__((noinline)))
};
#if defined(__x86_64__)
struct Avx2 {
  WINCONV_COLUMN_BLOCKS(V8, 6, __attribute__((target("arch=x86-64-v3"), noinline)))
};
struct Avx512 {
  WINCONV_COLUMN_BLOCKS(V16, 12, __attribute__((target("arch=x86-64-v4"), noinline)))
};
#else
// Elsewhere only the baseline instance exists (cpu_runs says so).
using Avx2 = Sse42;
using Avx512 = Sse42;
#endif
#undef WINCONV_COLUMN_BLOCKS

// blocks_of_width[w - 1] runs blocks of w columns, w = 1 .. Isa::kColumns.
template <typename Isa, size_t... W>
constexpr std::array<ColumnBlocksFn, sizeof...(W)> column_blocks(std::index_sequence<W...>) {
  return {&Isa::template blocks<int(W) + 1>...};
}

// The row's q columns in blocks of QB, and the rest r = q mod QB in one block of r columns; a
// rest under QB / 2 joins the last whole block, the two split into halves. A narrow block streams
// the packed filter from L2 for few multiply-adds: with the rest always in a block of QB, QB / 2
// or QB / 4, conv10's rows of 26 (12 + 12 + a block of 3 for the last 2) spent a quarter of their
// time in the block of 3 (perf, AVX-512), and rows of 10 or 20 computed 12 or 24 columns.
// Splitting every row evenly instead (11 + 11 + 11 + 11 + 10 for 54) was slower where the rest
// had been wide (conv9 4-6%): a narrower block does fewer multiply-adds per filter load.
template <typename Isa>
void row_gemm(const WindowRow& r) {
  constexpr int QB = Isa::kColumns;
  static_assert(kCpuFilterBlock % Isa::kFilters == 0, "a register block of filters never crosses the padding");
  static constexpr std::array<ColumnBlocksFn, QB> blocks_of_width =
      column_blocks<Isa>(std::make_index_sequence<QB>());
  int64_t whole = r.q / QB;
  int rest[2] = {int(r.q % QB), 0};
  if (rest[0] > 0 && rest[0] < QB / 2 && whole > 0) {
    --whole;
    rest[1] = (QB + rest[0]) / 2;
    rest[0] = QB + rest[0] - rest[1];
  }
  for (int64_t k0 = r.k0; k0 < r.k1; k0 += Isa::kFilters) {
    int64_t q0 = 0;
    if (whole > 0) blocks_of_width[QB - 1](r, k0, q0, whole);
    q0 += whole * QB;
    for (int width : rest)
      if (width > 0) {
        blocks_of_width[size_t(width - 1)](r, k0, q0, 1);
        q0 += width;
      }
  }
}

// 16 weights of `count` <= 16 filters at src, src + stride, ... (filters past count read as zeros)
// into 16 lanes of the packed rows rows[0..15] at dst: a 16 x 16 transpose in registers.
#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v4")))
#endif
void pack_tile_16x16(const float* src, int64_t stride, int count, const int64_t* rows, float* dst) {
  V16 r[16];
  for (int i = 0; i < 16; ++i) {
    r[i] = V16{};
    if (i < count) std::memcpy(&r[i], src + i * stride, sizeof(V16));
  }
  transpose_16x16(r);
  for (int j = 0; j < 16; ++j) std::memcpy(dst + rows[j] * kCpuFilterBlock, &r[j], sizeof(V16));
}

// The same for 8 weights of `count` <= 8 filters into 8 lanes of rows[0..7] (AVX2): an 8 x 8
// transpose (pairs within 128-bit lanes, 64-bit pairs, 128-bit lanes).
typedef int I8 __attribute__((vector_size(32)));
#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v3")))
#endif
void pack_tile_8x8(const float* src, int64_t stride, int count, const int64_t* rows, float* dst) {
  constexpr I8 kUnpackLo = {0, 8, 1, 9, 4, 12, 5, 13}, kUnpackHi = {2, 10, 3, 11, 6, 14, 7, 15};
  constexpr I8 kPairsLo = {0, 1, 8, 9, 4, 5, 12, 13}, kPairsHi = {2, 3, 10, 11, 6, 7, 14, 15};
  constexpr I8 kLanesLow = {0, 1, 2, 3, 8, 9, 10, 11}, kLanesHigh = {4, 5, 6, 7, 12, 13, 14, 15};
  V8 r[8], t[8];
  for (int i = 0; i < 8; ++i) {
    r[i] = V8{};
    if (i < count) std::memcpy(&r[i], src + i * stride, sizeof(V8));
  }
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shuffle(r[i], r[i + 1], kUnpackLo);
    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], kUnpackHi);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = __builtin_shuffle(t[i], t[i + 2], kPairsLo);
    r[i + 1] = __builtin_shuffle(t[i], t[i + 2], kPairsHi);
    r[i + 2] = __builtin_shuffle(t[i + 1], t[i + 3], kPairsLo);
    r[i + 3] = __builtin_shuffle(t[i + 1], t[i + 3], kPairsHi);
  }
  for (int j = 0; j < 4; ++j) {
    t[j] = __builtin_shuffle(r[j], r[j + 4], kLanesLow);
    t[j + 4] = __builtin_shuffle(r[j], r[j + 4], kLanesHigh);
  }
  for (int j = 0; j < 8; ++j) std::memcpy(dst + rows[j] * kCpuFilterBlock, &t[j], sizeof(V8));
}

}  // namespace

bool cpu_runs(CpuVectorIsa isa) {
  switch (isa) {
    case CpuVectorIsa::kSse42: return true;  // the build's baseline (x86-64-v2)
#if defined(__x86_64__)
    case CpuVectorIsa::kAvx2: return __builtin_cpu_supports("x86-64-v3");
    case CpuVectorIsa::kAvx512: return __builtin_cpu_supports("x86-64-v4");
#else
    case CpuVectorIsa::kAvx2: return false;
    case CpuVectorIsa::kAvx512: return false;
#endif
    case CpuVectorIsa::kAuto: return true;
  }
  return false;
}

CpuVectorIsa widest_cpu_isa() {
  if (cpu_runs(CpuVectorIsa::kAvx512)) return CpuVectorIsa::kAvx512;
  if (cpu_runs(CpuVectorIsa::kAvx2)) return CpuVectorIsa::kAvx2;
  return CpuVectorIsa::kSse42;
}

const char* cpu_isa_name(CpuVectorIsa isa) {
  switch (isa) {
    case CpuVectorIsa::kSse42: return "SSE4.2";
    case CpuVectorIsa::kAvx2: return "AVX2+FMA";
    case CpuVectorIsa::kAvx512: return "AVX-512";
    case CpuVectorIsa::kAuto: return "auto";
  }
  return "?";
}

int64_t packed_filter_k(const Conv2dProblem& pb) {
  return (pb.k + kCpuFilterBlock - 1) / kCpuFilterBlock * kCpuFilterBlock;
}

int64_t packed_filter_elements(const Conv2dProblem& pb) { return packed_filter_k(pb) * pb.c * pb.r * pb.s; }

int64_t packed_block_elements(const Conv2dProblem& pb) { return kCpuFilterBlock * pb.c * pb.r * pb.s; }

void pack_filter_cpu(const Conv2dConfig& config, const float* w, float* packed) {
  for (int64_t block = 0; block < packed_filter_k(config.problem) / kCpuFilterBlock; ++block)
    pack_filter_block_cpu(config, w, packed + block * packed_block_elements(config.problem), block, CpuVectorIsa::kAuto);
}

void pack_filter_block_cpu(const Conv2dConfig& config, const float* w, float* dst, int64_t block, CpuVectorIsa isa) {
  const Conv2dProblem& pb = config.problem;
  const int64_t K = pb.k, C = pb.c, R = pb.r, S = pb.s, CRS = C * R * S;
  const int64_t k0 = block * kCpuFilterBlock, k_end = std::min(K, k0 + kCpuFilterBlock);
  if (isa == CpuVectorIsa::kAuto) isa = widest_cpu_isa();
  // The block is a transpose of the 32 filters' rows, done in tiles of 16 weights: a tile reads one
  // cache line or two of each filter and writes 16 whole packed rows, so both sides move whole lines.
  // (Scattering one filter at a time across the whole block wrote one float per 128-byte row, a
  // cache line's round trip per float; reading the 32 filters one weight at a time ran 32 streams.)
  // Filter k is [c][r][s] at w + k*CRS (NCHW; packed row (c*S + s)*R + r) or [r][s][c] (NHWC, the
  // filter in KRSC; packed row (s*R + r)*C + c). With AVX-512 a whole tile is two 16 x 16
  // transposes in registers, with AVX2 eight 8 x 8, filters past K read as zeros; one float at a
  // time, a deep layer's pack took longer than its GEMM (conv12: 58% of the time against 25%).
  constexpr int64_t kTile = 16;
  const bool nchw = config.layout == Layout::kNCHW;
  // The digits of weight t, fastest first (NCHW: s, r, c; NHWC: c, s, r), stepped per weight.
  const int64_t base0 = nchw ? S : C, base1 = nchw ? R : S;
  int64_t d0 = 0, d1 = 0, d2 = 0;
  int64_t rows[kTile];
  const bool vector_tiles = (isa == CpuVectorIsa::kAvx512 || isa == CpuVectorIsa::kAvx2) && cpu_runs(isa);
  for (int64_t t0 = 0; t0 < CRS; t0 += kTile) {
    const int64_t t1 = std::min(CRS, t0 + kTile);
    for (int64_t j = 0; j < t1 - t0; ++j) {
      rows[j] = nchw ? (d2 * S + d0) * R + d1 : (d1 * R + d2) * C + d0;
      if (++d0 == base0) {
        d0 = 0;
        if (++d1 == base1) d1 = 0, ++d2;
      }
    }
    if (vector_tiles && t1 - t0 == kTile) {
      // Squares of n weights x n filters: n = 16 (AVX-512) or 8 (AVX2).
      const int64_t n = isa == CpuVectorIsa::kAvx512 ? 16 : 8;
      for (int64_t f = 0; f < kCpuFilterBlock; f += n) {
        const int64_t first = k0 + f, count = std::max<int64_t>(0, std::min(n, k_end - first));
        for (int64_t j = 0; j < kTile; j += n) {
          const float* src = count > 0 ? w + first * CRS + t0 + j : nullptr;
          if (n == 16) pack_tile_16x16(src, CRS, int(count), rows + j, dst + f);
          else pack_tile_8x8(src, CRS, int(count), rows + j, dst + f);
        }
      }
      continue;
    }
    for (int64_t k = k0; k < k_end; ++k) {
      const float* src = w + k * CRS;
      for (int64_t t = t0; t < t1; ++t) dst[rows[t - t0] * kCpuFilterBlock + (k - k0)] = src[t];
    }
    if (k_end < k0 + kCpuFilterBlock)  // zeros past K
      for (int64_t t = t0; t < t1; ++t)
        std::fill(dst + rows[t - t0] * kCpuFilterBlock + (k_end - k0), dst + (rows[t - t0] + 1) * kCpuFilterBlock, 0.f);
  }
}

void window_row_gemm(CpuVectorIsa isa, const WindowRow& row) {
  switch (isa) {
    case CpuVectorIsa::kAvx512: row_gemm<Avx512>(row); break;
    case CpuVectorIsa::kAvx2: row_gemm<Avx2>(row); break;
    default: row_gemm<Sse42>(row); break;
  }
}

}  // namespace winconv
