// The WTConv GPU tests' harness: activations rounded to a precision, parameter sets on the
// device with NaN-poisoned gradients, and run_case, which checks one problem's forward and every
// gradient against the float64 oracle and for bit-identical reruns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cpu/wtconv_reference.h"
#include "gpu_test_util.h"
#include "rounding_check.h"
#include "winconv/wtconv.h"

namespace winconv::testing {

// Device bytes (x, dy, y, dx and workspaces are passed as untyped pointers).
using DevBuf = testing::DeviceBuffer<char>;

inline size_t esz(Precision p) { return p == Precision::kFP32 ? 4 : 2; }

// Rounds v to the precision in place and returns the device bytes.
inline std::vector<char> encode(Precision p, std::vector<float>& v) {
  std::vector<char> out(v.size() * esz(p));
  for (size_t i = 0; i < v.size(); ++i) {
    if (p == Precision::kFP32) std::memcpy(&out[4 * i], &v[i], 4);
    else if (p == Precision::kFP16) { __half h = __float2half_rn(v[i]); v[i] = __half2float(h); std::memcpy(&out[2 * i], &h, 2); }
    else { __nv_bfloat16 h = __float2bfloat16_rn(v[i]); v[i] = __bfloat162float(h); std::memcpy(&out[2 * i], &h, 2); }
  }
  return out;
}
// One element of device bytes in precision p.
inline double decode_at(Precision p, const char* at) {
  if (p == Precision::kFP32) { float f; std::memcpy(&f, at, 4); return f; }
  if (p == Precision::kFP16) { __half h; std::memcpy(&h, at, 2); return __half2float(h); }
  __nv_bfloat16 h;
  std::memcpy(&h, at, 2);
  return __bfloat162float(h);
}
inline std::vector<double> decode(Precision p, const std::vector<char>& raw) {
  std::vector<double> out(raw.size() / esz(p));
  for (size_t i = 0; i < out.size(); ++i) out[i] = decode_at(p, &raw[i * esz(p)]);
  return out;
}

// |v|, element by element.
inline std::vector<float> abs_of(std::vector<float> v) {
  for (auto& e : v) e = std::fabs(e);
  return v;
}

inline double l2_norm(const std::vector<double>& v) {
  double s = 0;
  for (double a : v) s += a * a;
  return std::sqrt(s);
}
// L2 norm of got - ref; infinity if got holds anything non-finite (NaN never passes) or its size
// is not the reference's.
inline double l2_error(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double s = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    s += (got[i] - ref[i]) * (got[i] - ref[i]);
  }
  return std::sqrt(s);
}
inline double rel_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  const double err = l2_error(got, ref), norm = l2_norm(ref);
  return norm > 0 ? err / norm : (err == 0 ? 0 : INFINITY);  // a zero reference wants zeros
}

// Every element of a 16-bit output within kRoundings roundings of the size of its terms (`mag`,
// from the oracle on magnitudes; rounding_check.h): the 16-bit inputs are exact, and each rounding
// on the way (a 16-bit chain or staged coefficient, the output itself) is at most u * mag plus,
// below the normal range, half the smallest subnormal, with L + 3 of them at most (the fp32 sums
// add ~1e-6 of mag). The relative L2 bound of 1e-2 alone lets one element of 1e4 be wholly wrong.
// Reports the worst element (NaN: infinity).
inline constexpr double kRoundings = 16;
inline void expect_within_roundings(const std::vector<double>& got, const std::vector<double>& ref,
                             const std::vector<double>& mag, Precision p, const char* name) {
  ASSERT_EQ(got.size(), ref.size()) << name;
  ASSERT_EQ(mag.size(), ref.size()) << name;
  const WorstRounding w = worst_rounding(got, ref, mag, p);
  EXPECT_LE(w.roundings, kRoundings) << name << "[" << w.at << "]: " << got[w.at] << " against " << ref[w.at]
                                     << ", terms of size " << mag[w.at] << " (error in roundings of that size)";
}

// A parameter set is one list: w0, s0, b0, then each level's weight and scale. bind_set fills
// WtconvParams or WtconvParamGrads from entry t's pointer, at(t).
template <typename P, typename At>
P bind_set(At at, int L, bool bias) {
  P h;
  h.base_weight = at(0);
  h.base_scale = at(1);
  h.base_bias = bias ? at(2) : nullptr;
  for (int l = 0; l < L; ++l) {
    h.level_weight[l] = at(3 + 2 * l);
    h.level_scale[l] = at(4 + 2 * l);
  }
  return h;
}
// A host set as WtconvParams (for the oracle).
inline WtconvParams params_of_set(const std::vector<std::vector<float>>& set, int L, bool bias) {
  return bind_set<WtconvParams>([&](size_t t) { return set[t].data(); }, L, bias);
}
// Entry t of the same list in the oracle's gradients.
inline const std::vector<double>& grad_of_set(const WtconvReferenceGrads& g, size_t t) {
  if (t < 3) return t == 0 ? g.base_weight : t == 1 ? g.base_scale : g.base_bias;
  return (t - 3) % 2 == 0 ? g.level_weight[(t - 3) / 2] : g.level_scale[(t - 3) / 2];
}
inline char* bytes_at(const DevBuf& b, size_t offset) { return b.ptr + offset; }

// A parameter set (params_of_set's list, any number of channels) in device memory, with gradient
// buffers of the same sizes poisoned with NaN.
struct DeviceSet {
  std::vector<std::unique_ptr<DevBuf>> values, grads;
  explicit DeviceSet(const std::vector<std::vector<float>>& set) {
    for (const auto& v : set) {
      values.emplace_back(new DevBuf(v.size() * 4));
      EXPECT_EQ(cudaMemcpy(values.back()->ptr, v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
      grads.emplace_back(new DevBuf(v.size() * 4));
    }
    poison_grads();
  }
  void poison_grads() const {
    for (const auto& g : grads) g->poison();
  }
  WtconvParams params(int L, bool bias) const {
    return bind_set<WtconvParams>([&](size_t t) { return value(t); }, L, bias);
  }
  WtconvParamGrads param_grads(int L, bool bias) const {
    return bind_set<WtconvParamGrads>([&](size_t t) { return grad(t); }, L, bias);
  }
  float* value(size_t t) const { return reinterpret_cast<float*>(values[t]->ptr); }
  float* grad(size_t t) const { return reinterpret_cast<float*>(grads[t]->ptr); }
};

// The name of entry t of a set's gradients.
inline std::string grad_name(size_t t) {
  if (t < 3) return t == 0 ? "dW0" : t == 1 ? "ds0" : "db0";
  return ((t - 3) % 2 == 0 ? "dW" : "ds") + std::to_string((t - 3) / 2 + 1);
}

// One forward and one backward of p through the C API with dev's parameters (its gradients, y, dx
// and both workspaces poisoned with NaN first); false, with the reason reported, where one fails.
inline bool run_step(const WtconvProblem& p, const void* x, const void* dy, const DeviceSet& dev, bool bias, DevBuf& y,
              DevBuf& dx) {
  size_t fws = 0, bws = 0;
  if (!wtconv_forward_workspace_size(p, &fws).ok() || !wtconv_backward_workspace_size(p, &bws).ok()) {
    ADD_FAILURE() << "workspace size query failed";
    return false;
  }
  DevBuf fw(fws), bw(bws);
  y.poison(); dx.poison(); fw.poison(); bw.poison(); dev.poison_grads();
  const Status fst = wtconv_forward(p, x, dev.params(p.levels, bias), y.ptr, fw.ptr, fws, nullptr);
  EXPECT_TRUE(fst.ok()) << fst.to_string();
  const Status bst = wtconv_backward(p, dy, x, dev.params(p.levels, bias), dx.ptr, dev.param_grads(p.levels, bias),
                                     bw.ptr, bws, nullptr);
  EXPECT_TRUE(bst.ok()) << bst.to_string();
  const cudaError_t sync = cudaDeviceSynchronize();
  EXPECT_EQ(sync, cudaSuccess) << cudaGetErrorString(sync);
  return fst.ok() && bst.ok() && sync == cudaSuccess;
}

// Checks one problem against the float64 oracle and for bit-identical reruns; returns the outputs
// (y, dx, then every parameter gradient). offset > 0 places x, dy, y and dx that many elements past
// an aligned address, which turns the kernels' vectorised staging and paired output stores off;
// out_offset moves y and dx alone that many elements further (the staging stays vectorised).
// param_grads_by_magnitude: every parameter gradient (each entry one sum per channel, over the
// pixels and the batch) is checked against the float64 sum of its terms' magnitudes instead of its
// own size (wtconv_reference_magnitudes; see FuzzAgainstOracle).
inline std::vector<std::vector<char>> run_case(int B, int C, int H, int W, int k, int L, int s, Precision prec, bool bias,
                                        uint32_t seed, int offset = 0, int out_offset = 0,
                                        bool param_grads_by_magnitude = false) {
  SCOPED_TRACE(::testing::Message() << "B" << B << " C" << C << " " << H << "x" << W << " k" << k << " L" << L
                                    << " s" << s << " prec" << int(prec) << " bias" << bias);
  WtconvProblem p;
  p.batch = B; p.channels = C; p.height = H; p.width = W; p.kernel_size = k; p.levels = L; p.stride = s;
  p.precision = prec;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto randv = [&](size_t n, float sc, float mean) { std::vector<float> v(n); for (auto& e : v) e = mean + sc * nd(rng); return v; };
  const size_t kk = size_t(k) * k;
  std::vector<float> x = randv(p.x_elements(), 1, 0), dy = randv(p.y_elements(), 1, 0);
  const std::vector<char> xb = encode(prec, x), dyb = encode(prec, dy);
  std::vector<float> w0 = randv(C * kk, 1.f / k, 0), b0 = randv(C, 0.5f, 0), s0 = randv(C, 0.3f, 1);
  std::vector<std::vector<float>> set = {std::move(w0), std::move(s0), std::move(b0)};  // drawn w0, b0, s0
  for (int l = 0; l < L; ++l) {
    set.push_back(randv(4 * C * kk, 1.f / k, 0));
    set.push_back(randv(4 * C, 0.3f, 0.5f));
  }
  const WtconvParams hprm = params_of_set(set, L, bias);

  const size_t shift = size_t(offset) * esz(prec), out_shift = size_t(offset + out_offset) * esz(prec);
  DevBuf dx_in(xb.size(), shift), ddy(dyb.size(), shift), dy_out(p.y_elements() * esz(prec), out_shift),
      ddx(xb.size(), out_shift);
  EXPECT_EQ(cudaMemcpy(dx_in.ptr, xb.data(), xb.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(ddy.ptr, dyb.data(), dyb.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const DeviceSet dev(set);
  // y, dx, then every parameter gradient in the set's order.
  auto run = [&]() {
    std::vector<std::vector<char>> out;
    if (!run_step(p, dx_in.ptr, ddy.ptr, dev, bias, dy_out, ddx)) return out;
    out = {dy_out.to_host(), ddx.to_host()};
    for (const auto& g : dev.grads) out.push_back(g->to_host());
    return out;
  };
  const auto first = run();
  if (first.empty()) return first;  // the failed call is reported
  std::vector<double> yref;
  wtconv_reference_forward(p, x.data(), hprm, &yref);
  WtconvReferenceGrads g;
  wtconv_reference_backward(p, dy.data(), x.data(), hprm, &g);
  const double tol = prec == Precision::kFP32 ? 1e-5 : 1e-2;
  auto f32 = [](const std::vector<char>& raw) { return decode(Precision::kFP32, raw); };
  EXPECT_LE(rel_l2(decode(prec, first[0]), yref), tol) << "y";
  EXPECT_LE(rel_l2(decode(prec, first[1]), g.dx), tol) << "dx";
  // With param_grads_by_magnitude, ga holds the oracle's magnitudes (every input and parameter as
  // its magnitude, every Haar sign +): the size of each gradient's terms, e.g. sum(|W0| conv |x| +
  // |b|) |D| for ds0 and |s_l| corr(Y_l, G_l) with Y_l and G_l the sign-free Haar chains of |x| and
  // |D| for dW_l. A sum whose terms cancel has a relative error no float accumulation bounds; its
  // absolute error against the terms' size is what the accumulation order decides.
  WtconvReferenceGrads ga;
  if (param_grads_by_magnitude || prec != Precision::kFP32) {
    const std::vector<float> ax = abs_of(x), ady = abs_of(dy);
    std::vector<std::vector<float>> aset;
    for (const auto& v : set) aset.push_back(abs_of(v));
    const WtconvParams aprm = params_of_set(aset, L, bias);
    wtconv_reference_magnitudes(p, ady.data(), ax.data(), aprm, &ga);
    if (prec != Precision::kFP32) {
      std::vector<double> ymag;
      wtconv_reference_forward_magnitudes(p, ax.data(), aprm, &ymag);
      expect_within_roundings(decode(prec, first[0]), yref, ymag, prec, "y");
      expect_within_roundings(decode(prec, first[1]), g.dx, ga.dx, prec, "dx");
    }
  }
  // Parameter gradient `name` (output `out`) against its reference: relative, or against its terms'
  // size (ga's `size`).
  auto check_grad = [&](const std::string& name, int out, const std::vector<double>& ref,
                        const std::vector<double>& size) {
    if (param_grads_by_magnitude)
      EXPECT_LE(l2_error(f32(first[out]), ref), tol * l2_norm(size)) << name << " against its terms' size";
    else
      EXPECT_LE(rel_l2(f32(first[out]), ref), tol) << name;
  };
  for (size_t t = 0; t < set.size(); ++t)
    if (t != 2 || bias) check_grad(grad_name(t), int(2 + t), grad_of_set(g, t), grad_of_set(ga, t));
  EXPECT_TRUE(run() == first) << "two runs are not bit-identical";
  return first;
}

// A problem of the table-driven tests below, and run_case on it.
struct Shape {
  int B, C, H, W, k, L, s;
};
inline std::vector<std::vector<char>> run_shape(const Shape& sh, Precision prec, bool bias, uint32_t seed, int offset = 0,
                                         int out_offset = 0) {
  return run_case(sh.B, sh.C, sh.H, sh.W, sh.k, sh.L, sh.s, prec, bias, seed, offset, out_offset);
}
// Two runs that must agree bit for bit in every output.
inline void expect_bit_identical(const std::vector<std::vector<char>>& a, const std::vector<std::vector<char>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i] == b[i]) << "output " << i;
}


}  // namespace winconv::testing
