// winconv's own conv2d behind the benchmark's Conv2dImpl interface.
#include <stdexcept>

#include "baselines/baseline.h"
#include "winconv_impl.h"

namespace winconv::bench {
namespace {

class WinconvImpl : public Conv2dImpl {
 public:
  WinconvImpl(std::string name, Conv2dAlgo algo) : name_(std::move(name)), algo_(algo) {}
  ~WinconvImpl() override {
    if (workspace_) cudaFree(workspace_);
  }
  std::string name() const override { return name_; }

  bool prepare(const Conv2dConfig& config, const void*, const void*, void*, std::string* why) override {
    config_ = config;
    config_.algo = algo_;
    Status st = conv2d_forward_workspace_size(config_, &workspace_bytes_);
    if (st.ok()) st = conv2d_select_algo(config_, &resolved_);
    if (!st.ok()) {
      *why = st.to_string();
      return false;
    }
    if (workspace_bytes_ > 0 && cudaMalloc(&workspace_, workspace_bytes_) != cudaSuccess) {
      cudaGetLastError();
      *why = "cannot allocate " + std::to_string(workspace_bytes_) + " bytes of workspace";
      return false;
    }
    return true;
  }
  size_t extra_bytes() const override { return workspace_bytes_; }
  void run(const void* x, const void* w, void* y, cudaStream_t stream) override {
    Status st = conv2d_forward(config_, x, w, y, workspace_, workspace_bytes_, stream);
    if (!st.ok()) throw std::runtime_error(name_ + ": " + st.to_string());
  }
  std::string detail() const override { return std::string("algo=") + algo_name(resolved_); }

 private:
  std::string name_;
  Conv2dAlgo algo_;
  Conv2dAlgo resolved_ = Conv2dAlgo::kAuto;
  Conv2dConfig config_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Conv2dImpl> make_winconv(const std::string& impl_name) {
  if (impl_name == "winconv") return std::make_unique<WinconvImpl>(impl_name, Conv2dAlgo::kAuto);
  if (impl_name == "winconv_materialized") return std::make_unique<WinconvImpl>(impl_name, Conv2dAlgo::kMaterialized);
  if (impl_name == "winconv_onchip") return std::make_unique<WinconvImpl>(impl_name, Conv2dAlgo::kOnChip);
  return nullptr;
}

}  // namespace winconv::bench
