// conv2d's GPU entry points in a build without a CUDA compiler: they validate their arguments
// like the real ones and then report that no device path exists.
#if !WINCONV_HAVE_CUDA
#include "common/conv2d_validate.h"
#include "winconv/conv2d.h"

namespace winconv {
namespace {
Status no_cuda() {
  return Status(StatusCode::kNoDevice, "winconv was built without CUDA; use conv2d_forward_cpu");
}
}  // namespace

Status conv2d_forward_workspace_size(const Conv2dConfig& config, size_t* bytes) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  if (!bytes) return Status(StatusCode::kNullPointer, "bytes is null");
  return no_cuda();
}

Status conv2d_forward(const Conv2dConfig& config, const void* x, const void* w, void* y, void*, size_t,
                      cudaStream_t) {
  Status st = conv2d_check_call(config, x, w, y);
  if (!st.ok()) return st;
  return no_cuda();
}

}  // namespace winconv
#endif
