// Activations as floats: FP32, FP16 and BF16 loads and the rounding stores of the WTConv
// kernels (two, four or a 2 x 4 block of elements at a time).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <cstring>

namespace winconv {
namespace wtconv_detail {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Four consecutive activations as floats, one 16-byte (fp32) or 8-byte (fp16/bf16) load.
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
// Four 16-bit values (their raw 8 bytes) as floats.
template <typename H>
__device__ __forceinline__ float4 raw4_to_float4(uint2 raw) {
  H h[4];
  memcpy(h, &raw, sizeof raw);
  return make_float4(to_float(h[0]), to_float(h[1]), to_float(h[2]), to_float(h[3]));
}
template <typename H>
__device__ __forceinline__ float4 load4(const H* p) {
  return raw4_to_float4<H>(*reinterpret_cast<const uint2*>(p));
}

// Two consecutive activations as floats: one 8-byte (fp32) or 4-byte (fp16/bf16) load.
__device__ __forceinline__ float2 load2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 load2(const __half* p) { return __half22float2(*reinterpret_cast<const __half2*>(p)); }
__device__ __forceinline__ float2 load2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}

// Two consecutive outputs as one 8-byte (fp32) or 4-byte (fp16/bf16) store at p (2-element aligned),
// each rounded as from_float rounds it.
__device__ __forceinline__ void store2(float* p, float a, float b) { *reinterpret_cast<float2*>(p) = make_float2(a, b); }
__device__ __forceinline__ void store2(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

// Four outputs at p as one store (p 4-element aligned): 16 bytes of float, or two packed 16-bit
// pairs as 8 bytes.
__device__ __forceinline__ void store4(float* p, const float (&v)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
template <typename T, typename T2>
__device__ __forceinline__ void store4_pairs(T* p, T2 lo, T2 hi) {
  static_assert(sizeof(T2) == 4, "a packed pair of 16-bit values");
  uint2 u;
  u.x = *reinterpret_cast<const uint32_t*>(&lo);
  u.y = *reinterpret_cast<const uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(p) = u;
}
__device__ __forceinline__ void store4(__half* p, const float (&v)[4]) {
  store4_pairs(p, __floats2half2_rn(v[0], v[1]), __floats2half2_rn(v[2], v[3]));
}
__device__ __forceinline__ void store4(__nv_bfloat16* p, const float (&v)[4]) {
  store4_pairs(p, __floats2bfloat162_rn(v[0], v[1]), __floats2bfloat162_rn(v[2], v[3]));
}
// Two rows of four outputs of a 4 x 4 strip's epilogue (out[h] at row0 + h * pitch; the second
// only when `second`, the first ncols columns only): one store per row when all four columns are
// in and `quads` (row length a multiple of 4, 4-element aligned base), else two pair stores when
// `pairs` (even row length, pair-aligned base), else element stores.
template <typename T>
__device__ __forceinline__ void store_rows_2x4(T* row0, int64_t pitch, const float (&out)[2][4], bool second,
                                               int ncols, bool pairs, bool quads) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (h == 1 && !second) break;
    T* row = row0 + h * pitch;
    if (ncols == 4 && quads) {
      store4(row, out[h]);
    } else if (ncols == 4 && pairs) {
      store2(row, out[h][0], out[h][1]);
      store2(row + 2, out[h][2], out[h][3]);
    } else {
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (u < ncols) row[u] = from_float<T>(out[h][u]);
    }
  }
}

}  // namespace wtconv_detail
}  // namespace winconv
