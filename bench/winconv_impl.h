#pragma once

#include <memory>
#include <string>

#include "baselines/baseline.h"

namespace winconv::bench {

// winconv (the default choice), winconv_materialized or winconv_onchip; nullptr for other names.
std::unique_ptr<Conv2dImpl> make_winconv(const std::string& impl_name);

}  // namespace winconv::bench
