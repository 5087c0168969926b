// cp.async wrappers (sm_80+): global -> shared copies that bypass registers and complete in
// groups, so the next tiles stream in while the current one is multiplied. A false predicate
// copies zero bytes and zero-fills the destination: padding and tails cost no branch.
#pragma once

#include <cstdint>

namespace winconv::im2win {

__device__ __forceinline__ void cp_async_4(float* smem, const float* gmem, bool pred) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_bytes = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
}

// 16 bytes, L1 bypassed (.cg): for the filter tiles, which every block reads once per stage.
__device__ __forceinline__ void cp_async_16(float* smem, const float* gmem, bool pred) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int src_bytes = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace winconv::im2win
