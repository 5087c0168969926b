// The shared-memory carveout: how much of an SM's unified L1 / shared memory the driver gives to
// shared memory when it loads a kernel.
//
// Without a preference the driver picks the split itself, and it does not pick the same one in
// every process: on the 256-channel 3x3 layer at 14 x 14 (128x128 tile, two 64 KB blocks per SM)
// the GEMM ran at 0.698 ms in some processes and at 0.72-0.88 ms in others, with the same bits
// (H200 and H100, docs/conv2d.md v20). Its reduction table is read by every block at every stage;
// with the largest shared-memory split the L1 left beside the blocks is too small to keep it. So
// the conv2d GEMM launches ask for the smallest split that still holds every block the SM can keep
// resident (dynamic_smem.h: ensure_dynamic_smem_fitted). The arithmetic is here, free of CUDA
// headers, so it is tested on the CPU.
#pragma once

#include <cstdint>

namespace winconv {

// The carveout in percent of `smem_per_sm` (the SM's largest shared memory) that holds `blocks`
// blocks of `smem_bytes` dynamic shared memory each plus `reserved_per_block` (the runtime's share
// per block), rounded up so that the driver's split never holds fewer blocks; 100 at most.
// -1 (no preference: the driver's choice) when there is nothing to fit or the SM size is unknown.
inline int carveout_percent(int blocks, int smem_bytes, int reserved_per_block, int smem_per_sm) {
  if (blocks <= 0 || smem_bytes < 0 || reserved_per_block < 0 || smem_per_sm <= 0) return -1;
  const int64_t need = int64_t(blocks) * (int64_t(smem_bytes) + reserved_per_block);
  if (need >= smem_per_sm) return 100;
  return int((need * 100 + smem_per_sm - 1) / smem_per_sm);
}

}  // namespace winconv
