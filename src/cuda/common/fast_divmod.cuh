// Division by a run-time constant with a multiply-high and a shift (Granlund-Montgomery), for
// index decomposition in memory-bound kernels where a hardware-less integer divide would cost
// more than the memory traffic. Valid for 0 <= n < 2^32 and 1 <= d < 2^31 (Granlund and
// Montgomery, "Division by invariant integers using multiplication", fig. 4.1).
#pragma once

#include <cstdint>

namespace winconv {

// High 32 bits of the 64-bit product n * m: one instruction on the device, the same value on the host.
__host__ __device__ __forceinline__ uint32_t mulhi32(uint32_t n, uint32_t m) {
#ifdef __CUDA_ARCH__
  return __umulhi(n, m);
#else
  return uint32_t((uint64_t(n) * m) >> 32);
#endif
}

struct FastDivmod {
  uint32_t divisor = 1, multiplier = 1, shift1 = 0, shift2 = 0;

  FastDivmod() = default;
  explicit FastDivmod(uint32_t d) : divisor(d) {
    // l = ceil(log2(d)); multiplier = floor(2^32 * (2^l - d) / d) + 1
    uint32_t l = 0;
    while ((uint64_t(1) << l) < d) ++l;
    multiplier = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << l) - d)) / d + 1);
    shift1 = l < 1 ? l : 1;
    shift2 = l > 1 ? l - 1 : 0;
  }

  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
    const uint32_t t = mulhi32(n, multiplier);
    return (t + ((n - t) >> shift1)) >> shift2;
  }
  __host__ __device__ __forceinline__ void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

// Division of a tile-local index by a tile-local divisor: n < 2^16 and 1 <= d <= 2^16. With
// m = ceil(2^32 / d), m d = 2^32 + e (0 <= e < d), so n m / 2^32 = n / d + n e / (2^32 d), and the
// error term stays below 1 / d (n e < 2^32): the multiply-high alone is floor(n / d). One
// multiply-high and one multiply-add per divmod instead of FastDivmod's six instructions; the
// WTConv kernels decompose a few such indices per thread and item. d = 1 has no 32-bit m: it stores
// m = 0 and the quotient is n.
struct TileDivmod {
  static constexpr uint32_t kMax = uint32_t(1) << 16;  // bound of n (exclusive) and of d
  uint32_t divisor = 1, multiplier = 0;

  TileDivmod() = default;
  // constexpr: a kernel that knows d at compile time gets constant operands (no parameter loads).
  __host__ __device__ constexpr explicit TileDivmod(uint32_t d)
      : divisor(d), multiplier(d > 1 ? uint32_t(((uint64_t(1) << 32) + d - 1) / d) : 0) {}

  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
    const uint32_t t = mulhi32(n, multiplier);
    return multiplier ? t : n;
  }
  __host__ __device__ __forceinline__ void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

}  // namespace winconv
