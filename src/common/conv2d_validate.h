// Internal validation helpers shared by the conv2d entry points (CPU and GPU).
#pragma once

#include <cstddef>

#include "winconv/conv2d.h"

namespace winconv {

// Every element count the kernels index with 32-bit integers fits; whole tensors fit int64 bytes.
Status conv2d_check_index_ranges(const Conv2dConfig& config);

// Null and alignment check of one pointer argument, naming it in the message.
Status conv2d_check_pointer(const char* name, const void* ptr, size_t alignment);

// The variant kAuto stands for (already resolved algorithms are returned unchanged).
Conv2dAlgo conv2d_resolve_algo(const Conv2dConfig& config);

// Alignment conv2d_forward requires of x, w, y and the workspace (16-byte vector loads).
constexpr size_t kConv2dPointerAlignment = 16;

// What every GPU forward entry checks before it plans: conv2d_validate, then x, w and y non-null
// and kConv2dPointerAlignment-aligned (the first failure, naming the tensor).
Status conv2d_check_call(const Conv2dConfig& config, const void* x, const void* w, const void* y);

}  // namespace winconv
