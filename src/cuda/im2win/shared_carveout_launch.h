// The device side of shared_carveout.h: the carveout a kernel's resident blocks need, from the
// occupancy query of the current device.
#pragma once

#include <cuda_runtime.h>

namespace winconv::im2win {

// Sets *percent to carveout_percent() for the blocks of `kernel` (launched with `threads` threads
// and `smem_bytes` of dynamic shared memory, the kernel's attribute for it already set) that the
// current device keeps resident per SM; -1 when none fit. Returns the first failed query's error.
cudaError_t fitted_shared_carveout(const void* kernel, int threads, int smem_bytes, int* percent);

}  // namespace winconv::im2win
