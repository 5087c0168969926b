#include "winconv/status.h"

namespace winconv {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "Ok";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kNullPointer: return "NullPointer";
    case StatusCode::kMisalignedPointer: return "MisalignedPointer";
    case StatusCode::kWorkspaceTooSmall: return "WorkspaceTooSmall";
    case StatusCode::kIndexOverflow: return "IndexOverflow";
    case StatusCode::kNoDevice: return "NoDevice";
    case StatusCode::kCudaError: return "CudaError";
    case StatusCode::kOutOfMemory: return "OutOfMemory";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "Ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace winconv
