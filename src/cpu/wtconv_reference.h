// WTConv2d CPU reference (float64), forward and backward, straight from DESIGN.md's formulas:
// Haar analysis of the zero-padded previous LL, 'same' depthwise convs, and the one-pass
// bit-indexed synthesis. Slow and simple on purpose: it is the oracle of the C++ tests.
// Pointers are host pointers with the layouts of winconv/wtconv.h.
#pragma once

#include <vector>

#include "winconv/wtconv.h"

namespace winconv {

// y (B, C, ceil(H/stride), ceil(W/stride)) in double.
void wtconv_reference_forward(const WtconvProblem& problem, const float* x, const WtconvParams& params,
                              std::vector<double>* y);

// The sizes of y's terms: the forward above on magnitudes (callers pass |x| and every parameter's
// magnitude) with every Haar sign +, so that each output is the sum of the magnitudes of the terms
// that the exact y sums (the tests' per-element bound on 16-bit outputs).
void wtconv_reference_forward_magnitudes(const WtconvProblem& problem, const float* x, const WtconvParams& params,
                                         std::vector<double>* y);

struct WtconvReferenceGrads {
  std::vector<double> dx;                        // (B, C, H, W)
  std::vector<double> base_weight;               // (C, k, k)
  std::vector<double> base_bias;                 // (C); filled also when params.base_bias is null
  std::vector<double> base_scale;                // (C)
  std::vector<double> level_weight[kWtconvMaxLevels];  // (4C, k, k)
  std::vector<double> level_scale[kWtconvMaxLevels];   // (4C)
};

void wtconv_reference_backward(const WtconvProblem& problem, const float* dy, const float* x,
                               const WtconvParams& params, WtconvReferenceGrads* grads);

// The sizes of the gradients' terms: the backward above on magnitudes (callers pass |dy|, |x| and
// every parameter's magnitude) with every Haar sign +, so that each output is the sum of the
// magnitudes of the terms that the exact gradient sums. A float sum of terms that cancel is held
// to this size (the tests' check of one-sum-per-channel gradients); dx is returned the same way.
void wtconv_reference_magnitudes(const WtconvProblem& problem, const float* dy, const float* x,
                                 const WtconvParams& params, WtconvReferenceGrads* grads);

}  // namespace winconv
