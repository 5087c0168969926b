// Turning CUDA runtime errors into winconv::Status, for the GPU entry points.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "winconv/status.h"

namespace winconv {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                                            cudaGetErrorString(err) + ")");
}

// A failed runtime call also leaves its error as the thread's last error, where the next launch's
// cudaGetLastError would find it and report it as its own: read it back (clearing it) and return it.
inline cudaError_t cuda_take_error(cudaError_t err) {
  if (err != cudaSuccess) (void)cudaGetLastError();
  return err;
}

// Fails when an earlier CUDA call of the caller's left an error pending. Every launch here reads its
// own error with cudaGetLastError, which would return that earlier error as the launch's; so the
// entry points that launch refuse to start on one, launch nothing and leave the error where it is.
Status cuda_check_no_pending_error();

// Checks that a usable sm_90 device is current. The kernels are built as sm_90a machine code,
// which no other architecture can run, so say so instead of failing at the first launch.
Status cuda_check_device(int* num_sms);

}  // namespace winconv

#define WINCONV_RETURN_IF_CUDA_ERROR(expr, what)          \
  do {                                                     \
    ::winconv::Status _st = ::winconv::cuda_status((expr), (what)); \
    if (!_st.ok()) return _st;                             \
  } while (0)
