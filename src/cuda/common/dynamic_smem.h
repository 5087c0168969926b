// The dynamic shared-memory limit of a kernel, raised once per (kernel, device), and, for the
// kernels that ask, the shared-memory carveout their resident blocks need (shared_carveout.h).
//
// cudaFuncSetAttribute costs the host a few microseconds, as much as a launch. A WTConv training
// step at the WTConvNeXt shapes issues a handful of launches in a few hundred microseconds of host
// time, more than its GPU time, so setting the limit before every launch showed in the step's
// time. The limit belongs to the function on the current device: it is set the first time a size
// above the 48 KiB default is asked for and raised only when a larger one is. The runtime keeps it
// through cudaDeviceReset (checked on the H200 with CUDA 13.0: a 60 KiB launch after a reset runs
// without setting it again), so what is remembered stays true for the life of the process.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace winconv {

// Makes `kernel` launchable with `bytes` of dynamic shared memory on the current device.
cudaError_t ensure_dynamic_smem(const void* kernel, size_t bytes);

// The same, and the kernel's preferred carveout set to the smallest that holds every block of
// `threads` threads and `bytes` of dynamic shared memory that the occupancy query says an SM of
// the current device keeps resident (carveout_percent); found and set once per (kernel, device,
// bytes). Without it the driver picks the split, and its pick varies between processes (the
// conv2d GEMMs: docs/conv2d.md, v20). The carveout is a hint: were it lost (a device reset, say),
// the launches would run at the driver's split again, not fail.
cudaError_t ensure_dynamic_smem_fitted(const void* kernel, size_t bytes, int threads);

}  // namespace winconv
