// The row GEMM of the CPU im2win path. The register block is QB output columns x KV vectors of
// filters: per run element, KV vector loads of the packed filter and QB broadcasts of window
// elements feed QB * KV multiply-adds, where a dot product per (q, k) spent a load of each
// operand per multiply-add and a horizontal sum per output. The same source is compiled for
// SSE4.2 (the build's baseline), AVX2 + FMA and AVX-512, whose vectors hold 4, 8 and 16 floats.
#include "cpu/window_gemm_cpu.h"

#include <algorithm>
#include <cstring>

namespace winconv {
namespace {

typedef float V4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V16 __attribute__((vector_size(64)));

// QB = 6 and KV = 2 keep 12 accumulators, 2 filter vectors and a broadcast within the 16 vector
// registers of SSE and AVX2 (AVX-512 has 32).
constexpr int kColumns = 6, kVectors = 2;

template <typename V, int QB, int KV>
__attribute__((always_inline)) inline void row_gemm(const WindowRow& r) {
  constexpr int VW = int(sizeof(V) / sizeof(float)), KB = KV * VW;
  static_assert(kCpuFilterBlock % KB == 0, "a register block of filters never crosses the padding");
  for (int64_t k0 = r.k0; k0 < r.k1; k0 += KB) {
    for (int64_t q0 = 0; q0 < r.q; q0 += QB) {
      // Columns past the row's last repeat it; their sums are not stored.
      const float* a[QB];
      for (int i = 0; i < QB; ++i) a[i] = r.a + std::min<int64_t>(q0 + i, r.q - 1) * r.q_stride;
      V acc[QB][KV];
      for (int i = 0; i < QB; ++i)
        for (int v = 0; v < KV; ++v) acc[i][v] = V{};
      const float* b = r.b + k0;
      for (int64_t g = 0; g < r.groups; ++g) {
        const int64_t at = g * r.g_stride;
        for (int64_t j = 0; j < r.len; ++j, b += r.k_padded) {
          V bv[KV];
          for (int v = 0; v < KV; ++v) std::memcpy(&bv[v], b + v * VW, sizeof(V));
          for (int i = 0; i < QB; ++i) {
            const float av = a[i][at + j];
            for (int v = 0; v < KV; ++v) acc[i][v] += av * bv[v];
          }
        }
      }
      // NHWC (filters contiguous in y) stores whole vectors where the block holds KB filters.
      const bool whole = r.y_k == 1 && k0 + KB <= r.k1;
      for (int i = 0; i < QB && q0 + i < r.q; ++i) {
        float* yq = r.y + (q0 + i) * r.y_q;
        if (whole) {
          for (int v = 0; v < KV; ++v) std::memcpy(yq + k0 + v * VW, &acc[i][v], sizeof(V));
          continue;
        }
        for (int v = 0; v < KV; ++v)
          for (int e = 0; e < VW; ++e) {
            const int64_t k = k0 + v * VW + e;
            if (k < r.k1) yq[k * r.y_k] = acc[i][v][e];
          }
      }
    }
  }
}

void row_gemm_sse42(const WindowRow& r) { row_gemm<V4, kColumns, kVectors>(r); }
#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v4"))) void row_gemm_avx512(const WindowRow& r) {
  row_gemm<V16, kColumns, kVectors>(r);
}
__attribute__((target("arch=x86-64-v3"))) void row_gemm_avx2(const WindowRow& r) {
  row_gemm<V8, kColumns, kVectors>(r);
}
#else
// Elsewhere only the baseline instance exists (cpu_runs says so).
void row_gemm_avx512(const WindowRow& r) { row_gemm_sse42(r); }
void row_gemm_avx2(const WindowRow& r) { row_gemm_sse42(r); }
#endif

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

void pack_filter_cpu(const Conv2dConfig& config, const float* w, float* packed) {
  for (int64_t block = 0; block < packed_filter_k(config.problem) / kCpuFilterBlock; ++block)
    pack_filter_block_cpu(config, w, packed, block);
}

void pack_filter_block_cpu(const Conv2dConfig& config, const float* w, float* packed, int64_t block) {
  const Conv2dProblem& pb = config.problem;
  const int64_t K = pb.k, C = pb.c, R = pb.r, S = pb.s, CRS = C * R * S;
  const int64_t k_padded = packed_filter_k(pb), k0 = block * kCpuFilterBlock;
  const int64_t k_end = std::min(K, k0 + kCpuFilterBlock);
  // Each packed row's block is written once, in order, and the block's filters are read as that
  // many sequential streams (zeros past K). Weight (k, c, r, s) of filter k sits at k * CRS + at.
  auto pack_row = [&](int64_t row, int64_t at) {
    float* dst = packed + row * k_padded;
    const float* src = w + at;
    for (int64_t k = k0; k < k_end; ++k) dst[k] = src[k * CRS];
    for (int64_t k = k_end; k < k0 + kCpuFilterBlock; ++k) dst[k] = 0.f;
  };
  // The loops walk the packed rows in order: group c, element s*R + r (NCHW); element
  // (s*R + r)*C + c (NHWC).
  int64_t row = 0;
  if (config.layout == Layout::kNCHW) {
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t r = 0; r < R; ++r) pack_row(row++, (c * R + r) * S + s);
  } else {
    for (int64_t s = 0; s < S; ++s)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) pack_row(row++, (r * S + s) * C + c);
  }
}

void window_row_gemm(CpuVectorIsa isa, const WindowRow& row) {
  switch (isa) {
    case CpuVectorIsa::kAvx512: row_gemm_avx512(row); break;
    case CpuVectorIsa::kAvx2: row_gemm_avx2(row); break;
    default: row_gemm_sse42(row); break;
  }
}

}  // namespace winconv
