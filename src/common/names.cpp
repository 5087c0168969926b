// Printable names of the API's enums, as they appear in result files and messages.
#include "winconv/conv2d.h"

namespace winconv {

const char* layout_name(Layout layout) { return layout == Layout::kNCHW ? "nchw" : "nhwc"; }

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFP32: return "fp32";
    case Precision::kFP16: return "fp16";
    case Precision::kBF16: return "bf16";
  }
  return "unknown";
}

const char* algo_name(Conv2dAlgo algo) {
  switch (algo) {
    case Conv2dAlgo::kAuto: return "auto";
    case Conv2dAlgo::kMaterialized: return "materialized";
    case Conv2dAlgo::kOnChip: return "onchip";
  }
  return "unknown";
}

size_t precision_bytes(Precision p) { return p == Precision::kFP32 ? 4 : 2; }

}  // namespace winconv
