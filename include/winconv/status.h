// Status: how every winconv entry point reports success or a precise error.
// No entry point throws or aborts on bad input; it returns a Status whose message names the
// argument, what was expected and what was given, and it launches nothing.
// The GPU entry points also refuse to start while an earlier CUDA call of the caller's has left an
// error pending in the runtime (kCudaError, naming that error, which stays for the caller to read
// with cudaGetLastError): a launch's own error is read from the same place, and would otherwise be
// reported as the launch's.
#pragma once

#include <string>
#include <utility>

namespace winconv {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // a size, stride or padding outside its valid range
  kUnsupported,        // a valid option winconv does not implement (dilation, groups, ...)
  kNullPointer,        // a required pointer is null
  kMisalignedPointer,  // a pointer lacks the alignment its element type needs
  kWorkspaceTooSmall,  // the caller's workspace is smaller than the size query returned
  kIndexOverflow,      // an element count does not fit the index type the kernels use
  kNoDevice,           // the operation needs a CUDA device and none is usable
  kCudaError,          // the CUDA runtime reported an error (message carries its text)
  kOutOfMemory,        // host memory for a CPU-path buffer could not be allocated
};

const char* status_code_name(StatusCode code);

class Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: stride_h must be >= 1, got 0"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace winconv
