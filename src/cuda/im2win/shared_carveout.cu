// The occupancy queries behind the GEMM launches' shared-memory carveout (shared_carveout.h).
#include "cuda/im2win/shared_carveout.h"
#include "cuda/im2win/shared_carveout_launch.h"

namespace winconv::im2win {

cudaError_t fitted_shared_carveout(const void* kernel, int threads, int smem_bytes, int* percent) {
  *percent = -1;
  int blocks = 0, device = 0, smem_per_sm = 0, reserved = 0;
  cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, size_t(smem_bytes));
  if (err == cudaSuccess) err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device);
  if (err != cudaSuccess) return err;
  *percent = carveout_percent(blocks, smem_bytes, reserved, smem_per_sm);
  return cudaSuccess;
}

}  // namespace winconv::im2win
