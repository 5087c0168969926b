// The dynamic shared-memory limit of a kernel, raised once per (kernel, device).
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

}  // namespace winconv
