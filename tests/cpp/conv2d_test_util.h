// Helpers shared by the conv2d tests: random problems, random data, error metrics.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "winconv/conv2d.h"

namespace winconv::testing {

inline std::vector<float> random_vector(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Relative L2 error; infinity if `got` holds anything non-finite (NaN never passes) or its size
// is not the reference's.
template <typename T>
double relative_l2(const std::vector<T>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]);
    if (!std::isfinite(g)) return std::numeric_limits<double>::infinity();
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0 ? (num == 0 ? 0 : std::numeric_limits<double>::infinity()) : std::sqrt(num / den);
}

// A random valid problem: odd sizes, padding, strides 1-4, C including 1 and 3, K not a multiple
// of any tile.
inline Conv2dConfig random_config(std::mt19937_64& rng, Layout layout, int max_hw = 24) {
  auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  Conv2dConfig cfg;
  cfg.layout = layout;
  Conv2dProblem& pb = cfg.problem;
  const int64_t channel_choices[] = {1, 3, 5, 8, 17, 32};
  pb.n = pick(1, 3);
  pb.c = channel_choices[pick(0, 5)];
  pb.k = pick(1, 150);
  pb.r = pick(1, 7);
  pb.s = pick(1, 7);
  pb.stride_h = pick(1, 4);
  pb.stride_w = pick(1, 4);
  pb.pad_h = pick(0, 3);
  pb.pad_w = pick(0, 3);
  pb.h = std::max<int64_t>(pick(1, max_hw), pb.r - 2 * pb.pad_h);
  pb.w = std::max<int64_t>(pick(1, max_hw), pb.s - 2 * pb.pad_w);
  return cfg;
}

// A random problem for the fuzz tests, beyond random_config's ranges, from families that reach
// every tile class: stems (C = 1-4, kernels up to 11 x 11), deep layers (C and K in the hundreds,
// 1 x 1 and 3 x 3, few output pixels: split-K) and general shapes with asymmetric kernels; strides
// up to 4 and paddings up to the kernel size minus one; either layout and any algorithm. The batch
// (then K) is halved until the problem has at most max_macs multiply-adds, which bounds the FP64
// reference's time.
inline Conv2dConfig fuzz_config(std::mt19937_64& rng, double max_macs) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const Conv2dAlgo algos[] = {Conv2dAlgo::kAuto, Conv2dAlgo::kOnChip, Conv2dAlgo::kMaterialized};
  Conv2dConfig cfg;
  cfg.layout = pick(0, 1) ? Layout::kNCHW : Layout::kNHWC;
  cfg.algo = algos[pick(0, 2)];
  Conv2dProblem& pb = cfg.problem;
  switch (pick(0, 2)) {
    case 0:  // stems
      pb.n = pick(1, 4); pb.c = pick(1, 4); pb.k = pick(4, 96);
      pb.r = pick(1, 11); pb.s = pick(0, 3) ? pb.r : pick(1, 11);
      pb.h = pick(8, 120); pb.w = pick(8, 120);
      break;
    case 1:  // deep layers
      pb.n = pick(1, 6); pb.c = pick(48, 512); pb.k = pick(16, 512);
      pb.r = pb.s = pick(0, 1) ? 1 : 3;
      pb.h = pick(2, 20); pb.w = pick(2, 20);
      break;
    default:  // general
      pb.n = pick(1, 3); pb.c = pick(1, 100); pb.k = pick(1, 300);
      pb.r = pick(1, 9); pb.s = pick(1, 9);
      pb.h = pick(1, 60); pb.w = pick(1, 60);
      break;
  }
  pb.stride_h = pick(1, 4);
  pb.stride_w = pick(0, 2) ? pb.stride_h : pick(1, 4);
  pb.pad_h = pick(0, pb.r - 1);
  pb.pad_w = pick(0, pb.s - 1);
  pb.h = std::max(pb.h, pb.r - 2 * pb.pad_h);  // at least one output row and column
  pb.w = std::max(pb.w, pb.s - 2 * pb.pad_w);
  while (double(pb.y_elements()) * pb.c * pb.r * pb.s > max_macs && (pb.n > 1 || pb.k > 1))
    (pb.n > 1 ? pb.n : pb.k) /= 2;
  return cfg;
}

inline std::string describe(const Conv2dConfig& cfg) {
  const Conv2dProblem& pb = cfg.problem;
  return std::string(layout_name(cfg.layout)) + " n" + std::to_string(pb.n) + " c" + std::to_string(pb.c) + " h" +
         std::to_string(pb.h) + " w" + std::to_string(pb.w) + " k" + std::to_string(pb.k) + " r" +
         std::to_string(pb.r) + " s" + std::to_string(pb.s) + " stride" + std::to_string(pb.stride_h) + "x" +
         std::to_string(pb.stride_w) + " pad" + std::to_string(pb.pad_h) + "x" + std::to_string(pb.pad_w) +
         " algo " + algo_name(cfg.algo);
}

}  // namespace winconv::testing
