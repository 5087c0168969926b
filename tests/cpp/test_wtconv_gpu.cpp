// WTConv GPU tests: forward and every gradient against the float64 oracle (FP32 rel L2 <= 1e-5,
// FP16/BF16 <= 1e-2), outputs poisoned with NaN first, NaN never passes, two runs bit-identical.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cpu/wtconv_reference.h"
#include "fuzz_util.h"
#include "gpu_test_util.h"
#include "cuda/wtconv/wtconv_plan.h"
#include "winconv/wtconv.h"

namespace winconv {
namespace {

// Device bytes (x, dy, y, dx and workspaces are passed as untyped pointers).
using DevBuf = testing::DeviceBuffer<char>;

size_t esz(Precision p) { return p == Precision::kFP32 ? 4 : 2; }

// Rounds v to the precision in place and returns the device bytes.
std::vector<char> encode(Precision p, std::vector<float>& v) {
  std::vector<char> out(v.size() * esz(p));
  for (size_t i = 0; i < v.size(); ++i) {
    if (p == Precision::kFP32) std::memcpy(&out[4 * i], &v[i], 4);
    else if (p == Precision::kFP16) { __half h = __float2half_rn(v[i]); v[i] = __half2float(h); std::memcpy(&out[2 * i], &h, 2); }
    else { __nv_bfloat16 h = __float2bfloat16_rn(v[i]); v[i] = __bfloat162float(h); std::memcpy(&out[2 * i], &h, 2); }
  }
  return out;
}
// One element of device bytes in precision p.
double decode_at(Precision p, const char* at) {
  if (p == Precision::kFP32) { float f; std::memcpy(&f, at, 4); return f; }
  if (p == Precision::kFP16) { __half h; std::memcpy(&h, at, 2); return __half2float(h); }
  __nv_bfloat16 h;
  std::memcpy(&h, at, 2);
  return __bfloat162float(h);
}
std::vector<double> decode(Precision p, const std::vector<char>& raw) {
  std::vector<double> out(raw.size() / esz(p));
  for (size_t i = 0; i < out.size(); ++i) out[i] = decode_at(p, &raw[i * esz(p)]);
  return out;
}

// |v|, element by element.
std::vector<float> abs_of(std::vector<float> v) {
  for (auto& e : v) e = std::fabs(e);
  return v;
}

double l2_norm(const std::vector<double>& v) {
  double s = 0;
  for (double a : v) s += a * a;
  return std::sqrt(s);
}
// L2 norm of got - ref; infinity if got holds anything non-finite (NaN never passes) or its size
// is not the reference's.
double l2_error(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double s = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    s += (got[i] - ref[i]) * (got[i] - ref[i]);
  }
  return std::sqrt(s);
}
double rel_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  const double err = l2_error(got, ref), norm = l2_norm(ref);
  return norm > 0 ? err / norm : (err == 0 ? 0 : INFINITY);  // a zero reference wants zeros
}

// Unit roundoff of a 16-bit precision (round to nearest).
double unit_roundoff(Precision p) { return p == Precision::kFP16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8); }

// Every element of a 16-bit output within kRoundings roundings of the size of its terms (`mag`,
// from the oracle on magnitudes): the 16-bit inputs are exact, and each rounding on the way (a
// 16-bit chain or staged coefficient, the output itself) is at most u * mag, with L + 3 of them at
// most (the fp32 sums add ~1e-6 of mag). The relative L2 bound of 1e-2 alone lets one element of
// 1e4 be wholly wrong. Reports the worst element (NaN: infinity).
constexpr double kRoundings = 16;
void expect_within_roundings(const std::vector<double>& got, const std::vector<double>& ref,
                             const std::vector<double>& mag, Precision p, const char* name) {
  ASSERT_EQ(got.size(), ref.size()) << name;
  ASSERT_EQ(mag.size(), ref.size()) << name;
  const double u = unit_roundoff(p);
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - ref[i]);
    const double r = err == 0 ? 0 : std::isfinite(err) && mag[i] > 0 ? err / (u * mag[i]) : INFINITY;
    if (r > worst) {
      worst = r;
      at = i;
      if (std::isinf(r)) break;
    }
  }
  EXPECT_LE(worst, kRoundings) << name << "[" << at << "]: " << got[at] << " against " << ref[at]
                               << ", terms of size " << mag[at] << " (error in units of u * size)";
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
WtconvParams params_of_set(const std::vector<std::vector<float>>& set, int L, bool bias) {
  return bind_set<WtconvParams>([&](size_t t) { return set[t].data(); }, L, bias);
}
// Entry t of the same list in the oracle's gradients.
const std::vector<double>& grad_of_set(const WtconvReferenceGrads& g, size_t t) {
  if (t < 3) return t == 0 ? g.base_weight : t == 1 ? g.base_scale : g.base_bias;
  return (t - 3) % 2 == 0 ? g.level_weight[(t - 3) / 2] : g.level_scale[(t - 3) / 2];
}
char* bytes_at(const DevBuf& b, size_t offset) { return b.ptr + offset; }

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
std::string grad_name(size_t t) {
  if (t < 3) return t == 0 ? "dW0" : t == 1 ? "ds0" : "db0";
  return ((t - 3) % 2 == 0 ? "dW" : "ds") + std::to_string((t - 3) / 2 + 1);
}

// One forward and one backward of p through the C API with dev's parameters (its gradients, y, dx
// and both workspaces poisoned with NaN first); false, with the reason reported, where one fails.
bool run_step(const WtconvProblem& p, const void* x, const void* dy, const DeviceSet& dev, bool bias, DevBuf& y,
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
std::vector<std::vector<char>> run_case(int B, int C, int H, int W, int k, int L, int s, Precision prec, bool bias,
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
std::vector<std::vector<char>> run_shape(const Shape& sh, Precision prec, bool bias, uint32_t seed, int offset = 0,
                                         int out_offset = 0) {
  return run_case(sh.B, sh.C, sh.H, sh.W, sh.k, sh.L, sh.s, prec, bias, seed, offset, out_offset);
}
// Two runs that must agree bit for bit in every output.
void expect_bit_identical(const std::vector<std::vector<char>>& a, const std::vector<std::vector<char>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i] == b[i]) << "output " << i;
}

TEST(WtconvGpu, OddSizesEveryOption) {
  WINCONV_REQUIRE_GPU();
  const int sizes[][2] = {{1, 6}, {5, 3}, {7, 10}, {13, 9}, {2, 2}, {1, 1}, {17, 33}};
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  int i = 0;
  for (auto& hw : sizes)
    for (int k : {1, 3, 5, 7}) {
      run_case(2, 3, hw[0], hw[1], k, 1 + i % 5, 1 + i % 3, P[i % 3], i % 4 != 3, 10 + i);
      ++i;
    }
}

TEST(WtconvGpu, LevelTwoReadsActivations) {
  // L = 2: level 2 forms X_1 and G_1 from x and dy on chip (plan.h, level2_reads_activations).
  // Rows of a multiple of 4 take the 4-element loads, other widths the scalar ones; at stride 2
  // the forward and the backward run on the full grid (the backward on dy spread onto it).
  WINCONV_REQUIRE_GPU();
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  int i = 0;
  for (Precision prec : P) {
    run_case(2, 3, 20, 24, 5, 2, 1, prec, true, 300 + i++);
    run_case(1, 2, 13, 16, 3, 2, 1, prec, false, 300 + i++);
    run_case(2, 2, 9, 11, 7, 2, 1, prec, true, 300 + i++);
    run_case(1, 2, 12, 20, 9, 2, 2, prec, true, 300 + i++);
  }
  // 16-bit at stride > 1 and any L >= 2: the backward runs on dy spread onto the full grid, where
  // level 2 reads x and the spread dy; odd grids and strides that leave one output per plane
  // included. The shapes are those of the fuzz problems whose bf16 ds_2 the stored 16-bit chains
  // put above 1e-2 (docs/wtconv.md, note 57).
  for (Precision prec : {Precision::kFP16, Precision::kBF16}) {
    run_case(35, 1, 4, 4, 1, 2, 4, prec, true, 320 + i++);
    run_case(34, 1, 10, 4, 7, 4, 2, prec, false, 320 + i++);
    run_case(3, 2, 23, 17, 5, 3, 3, prec, true, 320 + i++);
    run_case(2, 2, 40, 36, 3, 5, 2, prec, true, 320 + i++);
  }
}

// The fused kernels' compile-time tile instances (L = 2, k = 5, stride 1, planes that take the
// 32 x 64 forward and 16 x 32 backward tiles): every phase full and one job per thread in the
// tile, so planes that end inside a tile (37 x 80, 67 x 100) must still come out right, as must
// planes of whole tiles (64 x 128). Small enough for compute-sanitizer (scripts/gpu-check).
TEST(WtconvGpu, FusedFixedTiles) {
  WINCONV_REQUIRE_GPU();
  struct Case { int H, W; Precision prec; };
  const Case cases[] = {{37, 80, Precision::kFP32}, {37, 80, Precision::kFP16}, {37, 80, Precision::kBF16},
                        {67, 100, Precision::kFP32}, {64, 128, Precision::kFP32}, {64, 128, Precision::kBF16}};
  int seed = 500;
  for (const Case& c : cases) {
    WtconvProblem p;
    p.batch = 2; p.channels = 2; p.height = c.H; p.width = c.W; p.kernel_size = 5; p.levels = 2; p.stride = 1;
    p.precision = c.prec;
    const wtconv_detail::WtconvPlan plan = wtconv_detail::make_wtconv_plan(p);
    SCOPED_TRACE(::testing::Message() << c.H << "x" << c.W << " prec " << int(c.prec));
    // The plan takes the fixed tiles, fused (the case covers those instances).
    EXPECT_GT(plan.fwd_fused_smem, 0u);
    EXPECT_GT(plan.bwd_fused_smem, 0u);
    EXPECT_EQ(plan.fwd_base.th, wtconv_detail::kFusedFwdTileH);
    EXPECT_EQ(plan.fwd_base.tw, wtconv_detail::kFusedFwdTileW);
    EXPECT_EQ(plan.bwd_base.th, wtconv_detail::kFusedBwdTileH);
    EXPECT_EQ(plan.bwd_base.tw, wtconv_detail::kFusedBwdTileW);
    run_case(2, 2, c.H, c.W, 5, 2, 1, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// Planes that the power-of-two base tiles cover poorly take tiles sized to them (plan.h:
// fitted_tile_extent; docs/wtconv.md, perf note 78): 24 x 40 outputs and 12 x 20 coefficients on
// 69 x 73 planes, tiles of 20 to 48 columns elsewhere, on planes that end inside a tile, every
// precision and k = 3, 5 and 7 against the oracle; the runtime-k backward (k = 9, 11) in rows of 2
// coefficients (14 and 6 rows), or the power-of-two tile where the sized width would put its rows
// 32 floats apart (perf notes 92 and 94).
// Widths 1, 2 and 3 past a multiple of 4 stage their quads with element loads, the last quad of a
// row partly outside the plane. Sized tiles with several planes per item, the last item short.
TEST(WtconvGpu, FittedTilesOnPoorlyCoveredPlanes) {
  WINCONV_REQUIRE_GPU();
  struct Case { int H, W, k, L; Precision prec; int fwd_th, fwd_tw, bwd_th, bwd_tw; };
  const Case cases[] = {
      {69, 73, 3, 2, Precision::kFP32, 24, 40, 12, 20},  {69, 73, 3, 2, Precision::kFP16, 24, 40, 12, 20},
      {69, 73, 3, 2, Precision::kBF16, 24, 40, 12, 20},  {37, 82, 5, 2, Precision::kFP32, 24, 48, 12, 24},
      {99, 66, 3, 3, Precision::kFP16, 32, 40, 16, 20},  {40, 130, 7, 1, Precision::kBF16, 24, 48, 12, 24},
      {69, 74, 3, 2, Precision::kFP16, 24, 40, 12, 20},  {69, 75, 5, 2, Precision::kFP32, 24, 40, 12, 20},
      {69, 76, 3, 2, Precision::kFP32, 24, 40, 12, 20},  // forward staged by TMA
      {69, 73, 9, 2, Precision::kFP32, 24, 40, 12, 20},  {100, 75, 11, 3, Precision::kFP16, 32, 40, 14, 20},
      {11, 195, 9, 5, Precision::kBF16, 16, 56, 6, 28},  // runtime k: backward sized in rows of 2
      {143, 42, 9, 1, Precision::kFP32, 32, 48, 16, 32}};  // runtime k: 16 x 24 would conflict, kept
  int seed = 560;
  for (const Case& c : cases) {
    WtconvProblem p;
    p.batch = 2; p.channels = 2; p.height = c.H; p.width = c.W; p.kernel_size = c.k; p.levels = c.L; p.stride = 1;
    p.precision = c.prec;
    const wtconv_detail::WtconvPlan plan = wtconv_detail::make_wtconv_plan(p);
    SCOPED_TRACE(::testing::Message() << c.H << "x" << c.W << " k" << c.k << " prec " << int(c.prec));
    EXPECT_EQ(plan.fwd_base.th, c.fwd_th);
    EXPECT_EQ(plan.fwd_base.tw, c.fwd_tw);
    EXPECT_EQ(plan.bwd_base.th, c.bwd_th);
    EXPECT_EQ(plan.bwd_base.tw, c.bwd_tw);
    if (c.W == 76) EXPECT_GT(plan.fwd_base_tma_smem, 0u);
    run_case(2, 2, c.H, c.W, c.k, c.L, 1, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
  // Sized tiles take more planes per item (ItemPlanes::kScaled): 9 x 65 runs items of 3 planes, at
  // batch 5 the last one of 2; 36 x 30 (L = 5) items of 2, at batch 3 the last one of 1.
  struct Group { int B, H, W, L; Precision prec; int np; };
  const Group groups[] = {{5, 9, 65, 1, Precision::kFP32, 3}, {5, 9, 65, 2, Precision::kBF16, 3},
                          {3, 36, 30, 5, Precision::kFP16, 2}};
  for (const Group& g : groups) {
    WtconvProblem p;
    p.batch = g.B; p.channels = 3; p.height = g.H; p.width = g.W; p.kernel_size = 5; p.levels = g.L; p.stride = 1;
    p.precision = g.prec;
    const wtconv_detail::WtconvPlan plan = wtconv_detail::make_wtconv_plan(p);
    SCOPED_TRACE(::testing::Message() << "B" << g.B << " " << g.H << "x" << g.W << " L" << g.L);
    EXPECT_EQ(plan.fwd_base.np, g.np);
    EXPECT_EQ(plan.bwd_base.np, g.np);
    run_case(g.B, 3, g.H, g.W, 5, g.L, 1, g.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// The quad-staged k = 3 forward has two instances that differ only in their launch bound: 5 blocks
// per SM (48 registers) where the plan's shared memory holds 5, else 4 (64 registers; the strided
// schedule's larger tiles). Odd widths, so both take the quad staging; each against the oracle.
TEST(WtconvGpu, QuadStagedThreeByThreeForwardAtBothBounds) {
  WINCONV_REQUIRE_GPU();
  struct Case { int H, W, s; Precision prec; int blocks; };
  const Case cases[] = {{69, 73, 1, Precision::kFP32, 5}, {69, 73, 1, Precision::kBF16, 5},
                        {61, 75, 3, Precision::kFP32, 4}, {40, 37, 4, Precision::kFP16, 4}};
  int seed = 580;
  for (const Case& c : cases) {
    WtconvProblem p;
    p.batch = 2; p.channels = 3; p.height = c.H; p.width = c.W; p.kernel_size = 3; p.levels = 2; p.stride = c.s;
    p.precision = c.prec;
    SCOPED_TRACE(::testing::Message() << c.H << "x" << c.W << " s" << c.s << " prec " << int(c.prec));
    const wtconv_detail::WtconvRun run = wtconv_detail::make_wtconv_run(p, false);
    EXPECT_EQ(run.plan.fwd_base_tma_smem, 0u);
    EXPECT_EQ(wtconv_detail::fwd_base_quad_blocks(3, run.plan.fwd_base.smem), c.blocks);
    run_case(2, 3, c.H, c.W, 3, 2, c.s, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// The runtime-k backward base at every runtime size: 2 blocks per SM and paired dx jobs (two
// level-1 coefficients each), k = 13 and 15 on their 16 x 32 tiles too (perf note 97). Each on a
// plane of several tiles with an odd width (a pair's second coefficient past the plane at the
// right edge) and on a one-tile plane (the kPlane instances), against the oracle.
TEST(WtconvGpu, RuntimeKBackwardPairedDxJobs) {
  WINCONV_REQUIRE_GPU();
  struct Case { int H, W, k, L; Precision prec; };
  const Case cases[] = {{45, 71, 1, 2, Precision::kFP32},  {45, 71, 9, 2, Precision::kFP16},
                        {37, 29, 11, 1, Precision::kBF16}, {45, 71, 13, 2, Precision::kFP32},
                        {45, 71, 15, 2, Precision::kFP32}, {11, 13, 15, 1, Precision::kFP16},
                        {11, 13, 9, 1, Precision::kFP32},  {70, 99, 15, 3, Precision::kBF16},
                        {41, 67, 13, 1, Precision::kFP16}};
  int seed = 620;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.H << "x" << c.W << " k" << c.k << " L" << c.L << " prec " << int(c.prec));
    EXPECT_EQ(wtconv_detail::bwd_base_blocks_per_sm(c.k), c.k == 1 ? 4 : 2);
    run_case(2, 3, c.H, c.W, c.k, c.L, 1, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// The runtime-k backward base with its dx jobs in halves on lane pairs (bwd_dx_half_jobs: items of
// at most 128 jobs), in the whole-plane instance (odd widths) and the tiled one (widths of whole
// quads), against the oracle: odd heights (a pair's second pixel row past the plane), a batch
// that leaves the last item's second plane empty, L >= 2 (dX_1 added at LL), odd widths (a job's
// second coefficient past the plane), and a plane of more jobs that keeps whole ones.
TEST(WtconvGpu, RuntimeKBackwardHalfJobs) {
  WINCONV_REQUIRE_GPU();
  struct Case { int B, C, H, W, k, L; Precision prec; bool halves; };
  const Case cases[] = {{3, 2, 13, 11, 9, 2, Precision::kFP32, true},  {5, 3, 12, 12, 13, 3, Precision::kFP16, true},
                        {1, 2, 21, 17, 11, 2, Precision::kBF16, true}, {4, 2, 14, 14, 15, 1, Precision::kFP32, true},
                        {3, 2, 9, 7, 11, 3, Precision::kFP32, true},   {2, 2, 31, 61, 9, 2, Precision::kFP32, false}};
  int seed = 640;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.B << "x" << c.C << "x" << c.H << "x" << c.W << " k" << c.k << " L" << c.L);
    WtconvProblem p;
    p.batch = c.B; p.channels = c.C; p.height = c.H; p.width = c.W; p.kernel_size = c.k; p.levels = c.L;
    p.precision = c.prec;
    const wtconv_detail::WtconvTile t = wtconv_detail::make_wtconv_run(p, true).plan.bwd_base;
    EXPECT_EQ(wtconv_detail::bwd_dx_half_jobs(c.k, t.th, t.tw, t.np), c.halves);
    run_case(c.B, c.C, c.H, c.W, c.k, c.L, 1, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// Levels whose grids are smaller than the kernel run at their central taps (plan.h,
// level_kernel_size; the rest meet only padding and get zero gradients), against the oracle that
// convolves the whole filter: every dtype, kernel sizes whose cropped size is specialised (7, 5,
// 3) or not, a cropped level in the middle of the chain and at its end, 1 x 1 levels, and a
// strided problem.
TEST(WtconvGpu, LevelsAtTheirCentralTaps) {
  WINCONV_REQUIRE_GPU();
  struct Case { int B, C, H, W, k, L, s; Precision prec; };
  const Case cases[] = {{3, 4, 14, 14, 11, 2, 1, Precision::kFP32}, {2, 3, 13, 9, 15, 4, 1, Precision::kFP16},
                        {2, 5, 14, 14, 5, 3, 1, Precision::kBF16},  {1, 3, 16, 16, 7, 5, 1, Precision::kFP32},
                        {2, 2, 9, 40, 13, 4, 1, Precision::kFP32},  {3, 2, 11, 11, 9, 3, 2, Precision::kFP16},
                        {1, 2, 6, 5, 3, 4, 1, Precision::kFP32}};
  int seed = 660;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.B << "x" << c.C << "x" << c.H << "x" << c.W << " k" << c.k << " L" << c.L
                                      << " s" << c.s);
    WtconvProblem p;
    p.batch = c.B; p.channels = c.C; p.height = c.H; p.width = c.W; p.kernel_size = c.k; p.levels = c.L;
    p.precision = c.prec;
    const wtconv_detail::WtconvPlan plan = wtconv_detail::make_wtconv_plan(p);
    EXPECT_LT(plan.kl[plan.L], c.k);  // the deepest level at least is cropped
    run_case(c.B, c.C, c.H, c.W, c.k, c.L, c.s, c.prec, seed % 2 == 0, seed);
    ++seed;
  }
}

// The fixed tiles' 4 x 4 epilogues store a row of four outputs in one write when y (dx) is
// 4-element aligned, as two pair writes when only 2-element aligned, and element by element
// otherwise: y and dx one and two elements off (x and dy aligned, so the fused instances still
// run) must give the same bits as the aligned run, in every output.
TEST(WtconvGpu, FusedFixedTilesUnalignedOutputs) {
  WINCONV_REQUIRE_GPU();
  for (Precision prec : {Precision::kFP32, Precision::kFP16}) {
    const Shape sh{2, 2, 37, 80, 5, 2, 1};
    const auto aligned = run_shape(sh, prec, true, 600);
    for (int out_offset : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "y and dx " << out_offset << " elements off");
      expect_bit_identical(aligned, run_shape(sh, prec, true, 600, 0, out_offset));
    }
  }
}

TEST(WtconvGpu, RandomShapes) {
  WINCONV_REQUIRE_GPU();
  std::mt19937 rng(4321);
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  for (int i = 0; i < 24; ++i) {
    const int k = 1 + 2 * int(rng() % 8), L = 1 + int(rng() % 8), s = 1 + int(rng() % 3);
    const int lim = k > 9 ? 24 : 64;
    run_case(1 + int(rng() % 3), 1 + int(rng() % 4), 1 + int(rng() % lim), 1 + int(rng() % lim), k, L, s, P[rng() % 3],
             rng() % 4 != 0, 100 + i);
  }
}

// Random problems from families that reach every kernel path: tiny planes many to a block (the
// kPlane instances), medium planes over several tiles, the fused L = 2 / k = 5 planes with rows of
// whole 16 bytes (TMA boxes, the fixed tiles, partial last tiles), the runtime-k kernels (k >= 9),
// and flat planes (one side 1-4); any precision, bias or none, activations one element off
// alignment and y / dx one or two elements off. Every output against the float64 oracle and two
// runs bit-identical (run_case). ds0 and db0 are one sum per channel, so with one channel their
// relative error measures the cancellation of the data rather than the kernels (WINCONV_FUZZ_SEED
// 11, case 256: sum dY = -5.5e-4 over terms of total size 1.26e4, where a sequential float sum is
// 11% off and the kernels were 6%): they are held to the tolerance times the size of their terms
// (run_case's param_grads_by_magnitude). So are the other parameter gradients, whose entries are
// per-channel sums over the pixels as well: dW0, one sum at k = 1 (WINCONV_FUZZ_SEED 9105, case
// 289: B1 C1 54 x 48, k = 1, fp32, dW0 1.09e-5 off), and the level weights and scales, one sum
// where a level's grid is 1 x 1 (WINCONV_FUZZ_SEED 9301, case 234: B33 C1 16 x 4, k = 7, L = 6,
// fp32, dW5 to ds6 1.42e-5 off). WINCONV_FUZZ_CASES and WINCONV_FUZZ_SEED
// (fuzz_util.h) run a longer campaign.
TEST(WtconvGpu, FuzzAgainstOracle) {
  WINCONV_REQUIRE_GPU();
  const int64_t cases = winconv::testing::fuzz_cases(6);
  const uint64_t seed = winconv::testing::fuzz_seed(2026);
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  for (int64_t i = 0; i < cases; ++i) {
    int B = 1, C = 1, H = 1, W = 1, k = 2 * pick(0, 3) + 1, L = pick(1, 5), s = pick(1, 3) == 1 ? pick(1, 4) : 1;
    switch (pick(0, 4)) {
      case 0:  // tiny planes, many per block
        B = pick(1, 40); C = pick(1, 6); H = pick(1, 16); W = pick(1, 16); L = pick(1, 6);
        break;
      case 1:  // medium planes over several tiles
        B = pick(1, 4); C = pick(1, 4); H = pick(17, 90); W = pick(17, 90);
        break;
      case 2:  // the fused L = 2, k = 5 path: rows of whole 16 bytes in fp32 and 16-bit
        B = pick(1, 3); C = pick(1, 3); H = pick(20, 140); W = 8 * pick(3, 25); k = 5; L = 2; s = 1;
        break;
      case 3:  // the runtime-k kernels
        B = pick(1, 3); C = pick(1, 3); H = pick(9, 60); W = pick(9, 60); k = 2 * pick(4, 7) + 1;
        break;
      default:  // flat planes
        B = pick(1, 3); C = pick(1, 3);
        H = pick(1, 4); W = pick(40, 300);
        if (pick(0, 1)) std::swap(H, W);
        break;
    }
    // Keep the float64 oracle to a few seconds: about B C H W k^2 (L + 1) multiply-adds per pass.
    while (double(B) * C * H * W * k * k * (L + 1) > 4e7 && (B > 1 || C > 1)) (B > 1 ? B : C) /= 2;
    const Precision prec = P[pick(0, 2)];
    const bool bias = pick(0, 3) != 0;
    const int offset = pick(0, 6) == 0 ? 1 : 0, out_offset = pick(0, 6) == 0 ? pick(1, 2) : 0;
    SCOPED_TRACE(::testing::Message() << "fuzz case " << i << " (WINCONV_FUZZ_SEED " << seed << ") offset " << offset
                                    << " out_offset " << out_offset);
    run_case(B, C, H, W, k, L, s, prec, bias, uint32_t(seed * 1000 + i), offset, out_offset, true);
    if (HasFailure()) break;  // the first failing case is the one to read
  }
}

TEST(WtconvGpu, ManyPlanesPerBlockAndSplits) {
  WINCONV_REQUIRE_GPU();
  run_case(64, 8, 7, 7, 5, 2, 1, Precision::kFP32, true, 1);
  run_case(16, 6, 14, 14, 5, 3, 1, Precision::kFP32, true, 2);
  run_case(3, 2, 64, 96, 7, 4, 1, Precision::kFP32, true, 3);
  run_case(2, 2, 130, 70, 3, 8, 1, Precision::kFP32, false, 4);
  run_case(2, 2, 50, 45, 15, 3, 2, Precision::kFP32, true, 5);
  // Runtime-k planes over several tiles at stride 1: the vector-read windows of the base kernels
  // (paired dx jobs at k = 11 and 13) at every tile edge.
  run_case(2, 3, 70, 90, 11, 2, 1, Precision::kFP32, true, 6);
  run_case(1, 2, 40, 75, 13, 2, 1, Precision::kFP32, false, 7);
}

// A random parameter set for one channel (params_of_set's list), with run_case's distributions.
std::vector<std::vector<float>> random_set(std::mt19937& rng, int k, int L) {
  std::normal_distribution<float> nd(0.f, 1.f);
  auto randv = [&](size_t n, float sc, float mean) {
    std::vector<float> v(n);
    for (auto& x : v) x = mean + sc * nd(rng);
    return v;
  };
  const size_t kk = size_t(k) * k;
  std::vector<std::vector<float>> set = {randv(kk, 1.f / k, 0), randv(1, 0.3f, 1), randv(1, 0.5f, 0)};
  for (int l = 0; l < L; ++l) {
    set.push_back(randv(4 * kk, 1.f / k, 0));
    set.push_back(randv(4, 0.3f, 0.5f));
  }
  return set;
}

// Tensors past 2^31 elements (the API takes up to 2^40): the kernels index inside a plane in 32
// bits and between planes with 64-bit offsets. Plane (n, c) of x and dy is random plane c % 3 and
// channel c takes parameter set c % 3, so plane (n, c) of y and dx must match the float64 oracle
// of a one-plane problem with that set, and channel c's parameter gradients B times the oracle's
// (held, as in FuzzAgainstOracle, to the tolerance times the size of their terms). Every plane of
// y and dx is read back, poisoned with NaN first. The problems: the fused fixed-tile path (fp32,
// k = 5, L = 2) with a plane starting at element 2^31; fp16 at k = 7, L = 3, no bias, with a plane
// across 2^31; the runtime-k kernels (bf16, k = 9) at stride 2 on odd planes, where x and dx pass
// 2^31 and y does not. Skipped, saying so, where the device lacks the memory.
TEST(WtconvGpu, TensorsPast2To31Elements) {
  WINCONV_REQUIRE_GPU();
  struct Case {
    Shape sh;
    Precision prec;
    bool bias;
  };
  const Case cases[] = {{{2, 1025, 1024, 1024, 5, 2, 1}, Precision::kFP32, true},
                        {{1, 2053, 1023, 1028, 7, 3, 1}, Precision::kFP16, false},
                        {{3, 700, 1021, 1003, 9, 2, 2}, Precision::kBF16, true}};
  constexpr int kSets = 3;
  for (const Case& cs : cases) {
    const Shape& sh = cs.sh;
    SCOPED_TRACE(::testing::Message() << "B" << sh.B << " C" << sh.C << " " << sh.H << "x" << sh.W << " k" << sh.k
                                      << " L" << sh.L << " s" << sh.s << " prec" << int(cs.prec));
    WtconvProblem p;
    p.batch = sh.B; p.channels = sh.C; p.height = sh.H; p.width = sh.W; p.kernel_size = sh.k; p.levels = sh.L;
    p.stride = sh.s; p.precision = cs.prec;
    ASSERT_GT(p.x_elements(), int64_t(1) << 31);
    size_t fws = 0, bws = 0;
    ASSERT_TRUE(wtconv_forward_workspace_size(p, &fws).ok());
    ASSERT_TRUE(wtconv_backward_workspace_size(p, &bws).ok());
    const size_t e = esz(cs.prec), planes = size_t(sh.B) * sh.C, kk = size_t(sh.k) * sh.k;
    const size_t xplane = size_t(sh.H) * sh.W * e, yplane = size_t(p.out_height() * p.out_width()) * e;  // bytes
    WINCONV_REQUIRE_DEVICE_MEMORY(2 * planes * (xplane + yplane) + fws + bws + (size_t(1) << 30));
    DevBuf dx_in(planes * xplane), ddy(planes * yplane), dy_out(planes * yplane), ddx(planes * xplane);

    // kSets planes of x and dy, uploaded as planes 0 .. kSets - 1, and kSets parameter sets, with
    // their oracles (one-plane problems). len: the per-channel lengths of a set's entries.
    std::mt19937 rng(9000 + sh.k);
    std::normal_distribution<float> nd(0.f, 1.f);
    auto randv = [&](size_t n, float sc, float mean) {
      std::vector<float> v(n);
      for (auto& x : v) x = mean + sc * nd(rng);
      return v;
    };
    WtconvProblem one = p;
    one.batch = one.channels = 1;
    std::vector<size_t> len = {kk, 1, 1};
    for (int l = 0; l < sh.L; ++l) len.insert(len.end(), {4 * kk, 4});
    std::vector<std::vector<float>> sets[kSets], xs(kSets), dys(kSets);
    for (int j = 0; j < kSets; ++j) {
      xs[j] = randv(xplane / e, 1, 0);
      dys[j] = randv(yplane / e, 1, 0);
      const std::vector<char> xb = encode(cs.prec, xs[j]), dyb = encode(cs.prec, dys[j]);  // x, dy rounded
      ASSERT_EQ(cudaMemcpy(bytes_at(dx_in, j * xplane), xb.data(), xplane, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(bytes_at(ddy, j * yplane), dyb.data(), yplane, cudaMemcpyHostToDevice), cudaSuccess);
      sets[j] = random_set(rng, sh.k, sh.L);
    }
    std::vector<double> yref[kSets];
    WtconvReferenceGrads g[kSets], ga[kSets];
    winconv::testing::parallel_ranges(kSets, [&](size_t begin, size_t end) {
      for (size_t j = begin; j < end; ++j) {
        const std::vector<float>& x = xs[j];
        const std::vector<float>& dy = dys[j];
        wtconv_reference_forward(one, x.data(), params_of_set(sets[j], sh.L, cs.bias), &yref[j]);
        wtconv_reference_backward(one, dy.data(), x.data(), params_of_set(sets[j], sh.L, cs.bias), &g[j]);
        std::vector<std::vector<float>> abs_set;
        for (const auto& v : sets[j]) abs_set.push_back(abs_of(v));
        const std::vector<float> ax = abs_of(x), ady = abs_of(dy);
        wtconv_reference_magnitudes(one, ady.data(), ax.data(), params_of_set(abs_set, sh.L, cs.bias), &ga[j]);
      }
    });
    // Plane n C + c copies plane c % kSets.
    for (size_t i = kSets; i < planes; ++i) {
      const size_t src = (i % sh.C) % kSets;
      const auto d2d = cudaMemcpyDeviceToDevice;
      ASSERT_EQ(cudaMemcpy(bytes_at(dx_in, i * xplane), bytes_at(dx_in, src * xplane), xplane, d2d), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(bytes_at(ddy, i * yplane), bytes_at(ddy, src * yplane), yplane, d2d), cudaSuccess);
    }
    // Channel c takes set c % kSets; its gradients and their terms' sizes are B times the set's.
    std::vector<std::vector<float>> all(len.size());
    std::vector<std::vector<double>> want(len.size()), terms(len.size());
    for (size_t t = 0; t < len.size(); ++t) {
      for (int c = 0; c < sh.C; ++c) {
        const int j = c % kSets;
        all[t].insert(all[t].end(), sets[j][t].begin(), sets[j][t].end());
        ASSERT_EQ(grad_of_set(g[j], t).size(), len[t]);
        for (size_t i = 0; i < len[t]; ++i) {
          want[t].push_back(sh.B * grad_of_set(g[j], t)[i]);
          terms[t].push_back(sh.B * grad_of_set(ga[j], t)[i]);
        }
      }
    }
    const DeviceSet dev(all);
    ASSERT_TRUE(run_step(p, dx_in.ptr, ddy.ptr, dev, cs.bias, dy_out, ddx));

    const double tol = cs.prec == Precision::kFP32 ? 1e-5 : 1e-2;
    // Every plane of y and dx against its oracle; the worst plane reported (NaN: infinity).
    auto check_planes = [&](const char* name, const DevBuf& buf, size_t plane_bytes, auto ref_of_set) {
      std::vector<double> err(planes, 0.0);  // a failed copy counts as NaN
      winconv::testing::parallel_ranges(planes, [&](size_t begin, size_t end) {
        std::vector<char> raw(plane_bytes);
        for (size_t i = begin; i < end; ++i) {
          const auto d2h = cudaMemcpyDeviceToHost;
          const bool copied = cudaMemcpy(raw.data(), bytes_at(buf, i * plane_bytes), plane_bytes, d2h) == cudaSuccess;
          err[i] = copied ? rel_l2(decode(cs.prec, raw), ref_of_set((i % sh.C) % kSets)) : NAN;
        }
      });
      const size_t worst = winconv::testing::worst_index(err);
      EXPECT_LE(err[worst], tol) << name << ": worst plane " << worst << " of " << planes;
    };
    check_planes("y", dy_out, yplane, [&](size_t j) -> const std::vector<double>& { return yref[j]; });
    check_planes("dx", ddx, xplane, [&](size_t j) -> const std::vector<double>& { return g[j].dx; });
    for (size_t t = 0; t < len.size(); ++t) {
      if (t == 2 && !cs.bias) continue;
      EXPECT_LE(l2_error(decode(Precision::kFP32, dev.grads[t]->to_host()), want[t]), tol * l2_norm(terms[t]))
          << grad_name(t) << " against its terms' size";
    }
  }
}

// Batches at the 32-bit limit (batch * channels <= 2^31 - 1): tiny planes, so that the items'
// plane groups (np planes per item, np not always a power of two) end at the last plane index
// the kernels can form in int; a group past B once wrapped negative there and read and wrote
// 2^31 planes before the buffers. Every plane of x and dy is the same random plane (uploaded
// once, then doubled by device copies), so every plane of y and dx must match the float64 oracle
// of that one plane, and the parameter gradients B times its (to the tolerance times the size of
// their terms). y and dx are poisoned first and read back whole. Skipped, saying so, where the
// device lacks the memory.
TEST(WtconvGpu, BatchAtThe32BitLimit) {
  WINCONV_REQUIRE_GPU();
  struct Case {
    Shape sh;
    Precision prec;
    bool bias;
  };
  const Case cases[] = {{{INT32_MAX, 1, 1, 1, 3, 1, 1}, Precision::kFP16, true},
                        {{INT32_MAX - 37, 1, 1, 2, 5, 2, 1}, Precision::kBF16, false}};
  for (const Case& cs : cases) {
    const Shape& sh = cs.sh;
    SCOPED_TRACE(::testing::Message() << "B" << sh.B << " " << sh.H << "x" << sh.W << " k" << sh.k << " L" << sh.L);
    WtconvProblem p;
    p.batch = sh.B; p.channels = sh.C; p.height = sh.H; p.width = sh.W; p.kernel_size = sh.k; p.levels = sh.L;
    p.stride = sh.s; p.precision = cs.prec;
    ASSERT_TRUE(wtconv_validate(p).ok());
    size_t fws = 0, bws = 0;
    ASSERT_TRUE(wtconv_forward_workspace_size(p, &fws).ok());
    ASSERT_TRUE(wtconv_backward_workspace_size(p, &bws).ok());
    const size_t e = esz(cs.prec), planes = size_t(sh.B), n = size_t(sh.H) * sh.W, plane = n * e;  // bytes
    WINCONV_REQUIRE_DEVICE_MEMORY(4 * planes * plane + fws + bws + (size_t(1) << 30));
    DevBuf dx_in(planes * plane), ddy(planes * plane), dy_out(planes * plane), ddx(planes * plane);

    std::mt19937 rng(9100 + sh.k);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(n), dy(n);
    for (auto& v : x) v = nd(rng);
    for (auto& v : dy) v = nd(rng);
    const DevBuf* inputs[2] = {&dx_in, &ddy};
    const std::vector<char> raw[2] = {encode(cs.prec, x), encode(cs.prec, dy)};  // x, dy rounded
    for (int t = 0; t < 2; ++t) {
      ASSERT_EQ(cudaMemcpy(inputs[t]->ptr, raw[t].data(), plane, cudaMemcpyHostToDevice), cudaSuccess);
      for (size_t have = 1; have < planes; have *= 2)
        ASSERT_EQ(cudaMemcpy(bytes_at(*inputs[t], have * plane), inputs[t]->ptr, std::min(have, planes - have) * plane,
                             cudaMemcpyDeviceToDevice),
                  cudaSuccess);
    }
    const std::vector<std::vector<float>> set = random_set(rng, sh.k, sh.L);
    WtconvProblem one = p;
    one.batch = 1;
    std::vector<double> yref;
    WtconvReferenceGrads g, ga;
    wtconv_reference_forward(one, x.data(), params_of_set(set, sh.L, cs.bias), &yref);
    wtconv_reference_backward(one, dy.data(), x.data(), params_of_set(set, sh.L, cs.bias), &g);
    std::vector<std::vector<float>> abs_set;
    for (const auto& v : set) abs_set.push_back(abs_of(v));
    const std::vector<float> ax = abs_of(x), ady = abs_of(dy);
    wtconv_reference_magnitudes(one, ady.data(), ax.data(), params_of_set(abs_set, sh.L, cs.bias), &ga);

    const DeviceSet dev(set);
    ASSERT_TRUE(run_step(p, dx_in.ptr, ddy.ptr, dev, cs.bias, dy_out, ddx));
    const double tol = cs.prec == Precision::kFP32 ? 1e-5 : 1e-2;
    // Every plane against the one oracle plane; the worst plane reported (NaN: infinity).
    auto check_planes = [&](const char* name, const DevBuf& buf, const std::vector<double>& ref) {
      std::vector<char> host(planes * plane);
      ASSERT_EQ(cudaMemcpy(host.data(), buf.ptr, host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      const double norm = l2_norm(ref);
      double worst = 0;
      size_t where = 0;
      std::mutex mu;
      winconv::testing::parallel_ranges(planes, [&](size_t begin, size_t end) {
        double range_worst = 0;
        size_t range_where = begin;
        for (size_t i = begin; i < end; ++i) {
          double sq = 0;
          for (size_t j = 0; j < n; ++j) {
            const double d = decode_at(cs.prec, &host[(i * n + j) * e]) - ref[j];
            sq += d * d;  // NaN stays NaN
          }
          // A zero reference plane wants zeros.
          const double err = sq == 0 ? 0 : std::isfinite(sq) && norm > 0 ? std::sqrt(sq) / norm : INFINITY;
          if (err > range_worst) {
            range_worst = err;
            range_where = i;
          }
        }
        const std::lock_guard<std::mutex> lock(mu);
        if (range_worst > worst) {
          worst = range_worst;
          where = range_where;
        }
      });
      EXPECT_LE(worst, tol) << name << ": worst plane " << where << " of " << planes;
    };
    check_planes("y", dy_out, yref);
    check_planes("dx", ddx, g.dx);
    for (size_t t = 0; t < set.size(); ++t) {
      if (t == 2 && !cs.bias) continue;
      std::vector<double> want, terms;
      for (size_t i = 0; i < set[t].size(); ++i) {
        want.push_back(double(sh.B) * grad_of_set(g, t)[i]);
        terms.push_back(double(sh.B) * grad_of_set(ga, t)[i]);
      }
      EXPECT_LE(l2_error(decode(Precision::kFP32, dev.grads[t]->to_host()), want), tol * l2_norm(terms))
          << grad_name(t) << " against its terms' size";
    }
  }
}

// Planes at the 32-bit limit: one plane of up to 2^29 elements, the largest the validation admits
// (inside a plane the kernels index in 32 bits, with room for the four subbands). x and dy repeat
// one random T x T tile (T = 64, a multiple of 2^L), and an output depends on inputs within a
// bounded reach, so every output of the large plane equals one of a small plane with the same
// tile: rows and columns within m of an edge (m, a multiple of T, above the reach) keep their
// distance from that edge, inner ones map into [m, m + T), the same phase. The small plane
// (2 m + T + d on a side, d making the sizes agree mod T) goes through the float64 oracle; every
// element of y and dx of the large plane is checked against it, NaN-poisoned first, and the
// parameter gradients (sums over the whole plane) must be finite.
TEST(WtconvGpu, PlanesAtThe32BitLimit) {
  WINCONV_REQUIRE_GPU();
  struct Case {
    int H, W, k, L;
    Precision prec;
  };
  const Case cases[] = {{16384, 32764, 5, 2, Precision::kFP32},   // the fused fixed tiles
                        {23169, 23171, 7, 3, Precision::kBF16},   // odd sizes
                        {23167, 23173, 9, 1, Precision::kFP16}};  // the runtime-k kernels
  constexpr int T = 64;
  for (const Case& cs : cases) {
    SCOPED_TRACE(::testing::Message() << cs.H << "x" << cs.W << " k" << cs.k << " L" << cs.L << " prec"
                                      << int(cs.prec));
    WtconvProblem p;
    p.height = cs.H; p.width = cs.W; p.kernel_size = cs.k; p.levels = cs.L; p.precision = cs.prec;
    ASSERT_TRUE(wtconv_validate(p).ok());
    size_t fws = 0, bws = 0;
    ASSERT_TRUE(wtconv_forward_workspace_size(p, &fws).ok());
    ASSERT_TRUE(wtconv_backward_workspace_size(p, &bws).ok());
    const size_t e = esz(cs.prec), plane = size_t(cs.H) * cs.W, row = size_t(cs.W) * e;  // row in bytes
    WINCONV_REQUIRE_DEVICE_MEMORY(4 * plane * e + fws + bws + (size_t(1) << 30));

    const int reach = (1 << (cs.L + 1)) * (cs.k / 2 + 1) + cs.k, m = (reach + T - 1) / T * T;
    auto small_size = [&](int n) { return 2 * m + T + ((n - 2 * m - T) % T + T) % T; };
    auto to_small = [&](int i, int n, int ns) { return i < m ? i : i >= n - m ? i - n + ns : m + (i - m) % T; };
    WtconvProblem ps = p;
    ps.height = small_size(cs.H);
    ps.width = small_size(cs.W);
    std::mt19937 rng(7000 + cs.k);
    std::normal_distribution<float> nd(0.f, 1.f);
    // The tiles, rounded to the precision; the large planes from T-row bands; the small ones.
    std::vector<float> tiles[2];  // x, dy
    std::vector<float> small[2];
    DevBuf dx_in(plane * e), ddy(plane * e), dy_out(plane * e), ddx(plane * e);
    const DevBuf* large[2] = {&dx_in, &ddy};
    for (int t = 0; t < 2; ++t) {
      tiles[t].resize(T * T);
      for (auto& v : tiles[t]) v = nd(rng);
      encode(cs.prec, tiles[t]);
      std::vector<float> band(size_t(T) * cs.W);
      for (int r = 0; r < T; ++r)
        for (int c = 0; c < cs.W; ++c) band[size_t(r) * cs.W + c] = tiles[t][r * T + c % T];
      const std::vector<char> band_bytes = encode(cs.prec, band);
      ASSERT_EQ(cudaMemcpy(large[t]->ptr, band_bytes.data(), band_bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
      for (int r0 = T; r0 < cs.H; r0 += T)
        ASSERT_EQ(cudaMemcpy(bytes_at(*large[t], r0 * row), large[t]->ptr, std::min(T, cs.H - r0) * row,
                             cudaMemcpyDeviceToDevice),
                  cudaSuccess);
      small[t].resize(size_t(ps.height) * ps.width);
      for (int r = 0; r < ps.height; ++r)
        for (int c = 0; c < ps.width; ++c) small[t][size_t(r) * ps.width + c] = tiles[t][(r % T) * T + c % T];
    }
    const auto set = random_set(rng, cs.k, cs.L);
    std::vector<double> yref;
    WtconvReferenceGrads g;
    wtconv_reference_forward(ps, small[0].data(), params_of_set(set, cs.L, true), &yref);
    wtconv_reference_backward(ps, small[1].data(), small[0].data(), params_of_set(set, cs.L, true), &g);

    const DeviceSet dev(set);
    ASSERT_TRUE(run_step(p, dx_in.ptr, ddy.ptr, dev, true, dy_out, ddx));

    const double tol = cs.prec == Precision::kFP32 ? 1e-5 : 1e-2;
    std::vector<int> small_col(cs.W);  // to_small of every column
    for (int c = 0; c < cs.W; ++c) small_col[c] = to_small(c, cs.W, ps.width);
    // Relative L2 error of a large plane against the small plane's oracle, mapped (NaN: infinity).
    auto check_plane = [&](const char* name, const DevBuf& buf, const std::vector<double>& ref) {
      const std::vector<char> raw = buf.to_host();
      std::vector<double> num(cs.H), den(cs.H);
      winconv::testing::parallel_ranges(size_t(cs.H), [&](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) {
          const std::vector<double> got =
              decode(cs.prec, std::vector<char>(raw.begin() + r * row, raw.begin() + (r + 1) * row));
          const double* want = ref.data() + size_t(to_small(int(r), cs.H, ps.height)) * ps.width;
          for (int c = 0; c < cs.W; ++c) {
            const double expected = want[small_col[c]], d = got[c] - expected;
            num[r] += std::isfinite(got[c]) ? d * d : INFINITY;
            den[r] += expected * expected;
          }
        }
      });
      double n2 = 0, d2 = 0;
      for (int r = 0; r < cs.H; ++r) n2 += num[r], d2 += den[r];
      EXPECT_LE(std::sqrt(n2 / d2), tol) << name;
    };
    check_plane("y", dy_out, yref);
    check_plane("dx", ddx, g.dx);
    for (size_t t = 0; t < set.size(); ++t)
      for (double v : decode(Precision::kFP32, dev.grads[t]->to_host())) ASSERT_TRUE(std::isfinite(v)) << grad_name(t);
  }
}

// A plane that one tile holds, with rows that are not 4-element loads (odd widths, or the
// activations one element off alignment), takes the base kernels' kPlane instances: the tile is
// zeroed once per block and each item stages the plane's pixels alone (StagedRegion). The zeros
// must hold for every item of a block: many planes per item, the last item past the batch, kernel
// sizes 1 (the plane at tile offset 0) to 15, strides 1-3, one to five levels. At L >= 3 the Haar
// cascade's kPlane instance stages such planes too and writes each level's grid rounded up to even
// (the last level exactly: 1 x 1 grids included).
TEST(WtconvGpu, PlaneTilesStageThePlaneAlone) {
  WINCONV_REQUIRE_GPU();
  const Shape shapes[] = {{37, 3, 7, 7, 1, 3, 1},  {37, 3, 7, 7, 5, 2, 1},   {20, 2, 14, 14, 3, 3, 2},
                          {9, 2, 15, 11, 15, 2, 1}, {50, 2, 6, 5, 7, 5, 3},   {5, 2, 1, 3, 9, 1, 1},
                          {33, 2, 13, 9, 5, 4, 1},  {17, 2, 12, 12, 11, 2, 1}, {9, 2, 14, 14, 5, 3, 1},
                          {5, 3, 3, 5, 3, 5, 1},    {6, 2, 28, 28, 5, 4, 1},   {4, 2, 28, 28, 9, 3, 1},
                          {11, 2, 20, 20, 7, 3, 1}, {3, 2, 1, 1, 5, 4, 1}};
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  int i = 0;
  for (const Shape& sh : shapes) {
    run_shape(sh, P[i % 3], i % 2 == 0, 700 + i);
    ++i;
  }
  // 12 x 12 rows are 4-element loads (and TMA boxes); one element off alignment the same problem
  // takes kPlane, with the same bits (L = 3: no fused level 2, whose sums are grouped otherwise).
  const Shape sh{17, 2, 12, 12, 5, 3, 1};
  for (Precision prec : P) expect_bit_identical(run_shape(sh, prec, true, 790), run_shape(sh, prec, true, 790, 1));
}

// Rows of whole 16 bytes with aligned x and dy take the TMA staging of the base kernels (the
// forward always where its plan allows, in place or copied; the backward for fp32 with even r) and
// the 4-element (16-byte fp32, 8-byte fp16) staging with the Haar analysis on the fly elsewhere
// (2-element loads on even widths that are not multiples of 4);
// the same problem one element off alignment takes the quad staging with element loads (and an
// L = 2 forward that fuses level 2 into the base kernel then runs the level kernel) and stores y
// and dx one element at a time instead of in column pairs (even widths). All compute the same sums in the
// same order, so every output must be bit-identical. The shapes cover in-place and copied boxes
// (even and odd r), box origins off 16-byte alignment, boxes wider than the plane, 16-bit rows
// that fail the 16-byte rule, strides 2 and 3, and fused forwards and backwards with one and many
// planes per block. A fused backward (L = 2, k = 5: wtconv_layouts.h, bwd_fused_smem; at stride > 1 on the
// full grid, WtconvRun) sums the level-1 and level-2 weight-gradient correlations over other row
// groups and tiles than the two unfused kernels, so dW_1, ds_1, dW_2 and ds_2 may differ in the last
// bits there (checked to 1e-6 relative); every other output must be bit-identical.
TEST(WtconvGpu, VectorisedAndTmaStagingMatchScalar) {
  WINCONV_REQUIRE_GPU();
  const Shape shapes[] = {{2, 3, 20, 24, 5, 2, 1}, {1, 2, 33, 68, 3, 3, 1}, {3, 2, 9, 4, 7, 1, 1},
                          {2, 2, 70, 132, 5, 1, 1}, {2, 2, 21, 40, 3, 2, 1}, {1, 2, 26, 64, 9, 2, 1},
                          {2, 2, 30, 48, 5, 2, 2}, {1, 3, 17, 40, 3, 1, 3}, {16, 3, 8, 8, 5, 2, 1},
                          {2, 2, 37, 80, 5, 2, 1}, {16, 3, 16, 16, 5, 2, 1}, {2, 2, 67, 100, 5, 2, 1},
                          // the cascade's band path: 2-element rows, 4 and 5 levels a launch
                          // (shuffles 1, 2 and 4 lanes apart), a second launch from a float chain
                          {2, 2, 45, 70, 5, 3, 1}, {1, 2, 40, 36, 3, 5, 1}, {1, 2, 70, 100, 3, 6, 1},
                          {1, 1, 260, 300, 3, 8, 1},
                          // base kernels' 2-element rows (even widths, not multiples of 4) against
                          // element loads, tiles of odd r (stored as 8-byte pairs) and of even r,
                          // the runtime-k (k = 9) and k = 1 instances, a strided forward
                          {1, 2, 40, 102, 3, 2, 1}, {2, 2, 35, 78, 7, 3, 1}, {1, 2, 37, 90, 9, 2, 1},
                          {2, 2, 20, 66, 1, 2, 1}, {1, 2, 33, 150, 5, 1, 2}, {2, 2, 50, 134, 5, 4, 1}};
  for (Precision prec : {Precision::kFP32, Precision::kFP16, Precision::kBF16})
    for (const Shape& sh : shapes) {
      const auto aligned = run_shape(sh, prec, true, 77);
      const auto scalar = run_shape(sh, prec, true, 77, 1);
      ASSERT_EQ(aligned.size(), scalar.size());
      EXPECT_FALSE(aligned.empty());
      const bool regrouped = sh.L == 2 && sh.k == 5;
      for (size_t i = 0; i < aligned.size(); ++i) {
        const bool level_grad = i >= 5;  // y, dx, dW0, ds0, db0, then dW_l, ds_l per level
        if (regrouped && level_grad)
          EXPECT_LE(rel_l2(decode(Precision::kFP32, aligned[i]), decode(Precision::kFP32, scalar[i])), 1e-6)
              << "output " << i;
        else
          EXPECT_TRUE(aligned[i] == scalar[i])
              << "vectorised/TMA and scalar staging differ in output " << i << ": B" << sh.B << " C" << sh.C << " "
              << sh.H << "x" << sh.W << " k" << sh.k << " L" << sh.L << " s" << sh.s << " prec" << int(prec);
      }
    }
}

// Levels 6 to 8 on planes small enough for the sanitizers: the Haar cascade's band instances take
// at most 5 levels a launch, so these cascades launch again from a float chain.
TEST(WtconvGpu, DeepCascadesSmall) {
  WINCONV_REQUIRE_GPU();
  const Shape shapes[] = {{1, 2, 70, 100, 3, 6, 1}, {1, 1, 130, 70, 3, 8, 1}, {2, 1, 33, 47, 5, 7, 2}};
  for (Precision prec : {Precision::kFP32, Precision::kBF16})
    for (const Shape& sh : shapes) EXPECT_FALSE(run_shape(sh, prec, true, 91).empty());
}

// Every rejected call returns its status and launches nothing: outputs, gradients and workspaces
// poisoned beforehand are still NaN after the device has finished everything queued.
TEST(WtconvGpu, BadInputsLaunchNothing) {
  WINCONV_REQUIRE_GPU();
  WtconvProblem p;
  p.batch = 2; p.channels = 3; p.height = 9; p.width = 11; p.kernel_size = 5; p.levels = 2;
  const int L = int(p.levels);
  const size_t kk = size_t(p.kernel_size) * p.kernel_size;
  std::vector<std::vector<float>> set = {std::vector<float>(p.channels * kk, 0.1f), std::vector<float>(p.channels, 1.f),
                                         std::vector<float>(p.channels, 0.f)};
  for (int l = 0; l < L; ++l) {
    set.push_back(std::vector<float>(4 * p.channels * kk, 0.1f));
    set.push_back(std::vector<float>(4 * p.channels, 1.f));
  }
  const DeviceSet dev(set);
  const size_t n = size_t(p.x_elements()) * 4;
  DevBuf x(n), dy(n), y(n), dx(n);
  size_t fws = 0, bws = 0;
  ASSERT_TRUE(wtconv_forward_workspace_size(p, &fws).ok());
  ASSERT_TRUE(wtconv_backward_workspace_size(p, &bws).ok());
  DevBuf fw(fws + 16), bw(bws + 16);
  x.poison(); dy.poison();
  y.poison(); dx.poison(); fw.poison(); bw.poison(); dev.poison_grads();
  const WtconvParams prm = dev.params(L, true);
  const WtconvParamGrads grads = dev.param_grads(L, true);
  auto fwd = [&](const WtconvProblem& q, const void* xp, const WtconvParams& pp, void* yp, void* ws, size_t bytes) {
    return wtconv_forward(q, xp, pp, yp, ws, bytes, nullptr).code();
  };
  auto bwd = [&](const WtconvProblem& q, const void* dyp, const void* xp, const WtconvParams& pp, void* dxp,
                 const WtconvParamGrads& gg, void* ws, size_t bytes) {
    return wtconv_backward(q, dyp, xp, pp, dxp, gg, ws, bytes, nullptr).code();
  };
  EXPECT_EQ(fwd(p, nullptr, prm, y.ptr, fw.ptr, fws), StatusCode::kNullPointer);
  EXPECT_EQ(fwd(p, x.ptr, prm, nullptr, fw.ptr, fws), StatusCode::kNullPointer);
  EXPECT_EQ(fwd(p, x.ptr + 2, prm, y.ptr, fw.ptr, fws), StatusCode::kMisalignedPointer);
  EXPECT_EQ(fwd(p, x.ptr, prm, y.ptr + 2, fw.ptr, fws), StatusCode::kMisalignedPointer);
  EXPECT_EQ(fwd(p, x.ptr, prm, y.ptr, fw.ptr, fws - 1), StatusCode::kWorkspaceTooSmall);
  EXPECT_EQ(fwd(p, x.ptr, prm, y.ptr, fw.ptr + 4, fws), StatusCode::kMisalignedPointer);
  WtconvParams no_scale = prm;
  no_scale.level_scale[L - 1] = nullptr;
  EXPECT_EQ(fwd(p, x.ptr, no_scale, y.ptr, fw.ptr, fws), StatusCode::kNullPointer);
  WtconvParams odd_weight = prm;
  odd_weight.base_weight = reinterpret_cast<const float*>(reinterpret_cast<const char*>(prm.base_weight) + 2);
  EXPECT_EQ(fwd(p, x.ptr, odd_weight, y.ptr, fw.ptr, fws), StatusCode::kMisalignedPointer);
  WtconvProblem even = p, deep = p, still = p;
  even.kernel_size = 4;
  deep.levels = kWtconvMaxLevels + 1;
  still.stride = 0;
  for (const WtconvProblem& bad : {even, deep, still}) {
    EXPECT_EQ(fwd(bad, x.ptr, prm, y.ptr, fw.ptr, fws), StatusCode::kInvalidArgument);
    EXPECT_EQ(bwd(bad, dy.ptr, x.ptr, prm, dx.ptr, grads, bw.ptr, bws), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(bwd(p, nullptr, x.ptr, prm, dx.ptr, grads, bw.ptr, bws), StatusCode::kNullPointer);
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, nullptr, grads, bw.ptr, bws), StatusCode::kNullPointer);
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, dx.ptr + 2, grads, bw.ptr, bws), StatusCode::kMisalignedPointer);
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, dx.ptr, grads, bw.ptr, bws - 1), StatusCode::kWorkspaceTooSmall);
  WtconvParamGrads no_grad = grads;
  no_grad.level_weight[0] = nullptr;
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, dx.ptr, no_grad, bw.ptr, bws), StatusCode::kNullPointer);
  WtconvParamGrads odd_grad = grads;
  odd_grad.base_scale = reinterpret_cast<float*>(reinterpret_cast<char*>(grads.base_scale) + 2);
  EXPECT_EQ(bwd(p, dy.ptr, x.ptr, prm, dx.ptr, odd_grad, bw.ptr, bws), StatusCode::kMisalignedPointer);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto all_poison = [](const DevBuf& b) {
    const std::vector<char> h = b.to_host();
    return std::all_of(h.begin(), h.end(), [](char c) { return c == char(0xFF); });
  };
  EXPECT_TRUE(all_poison(y)) << "a rejected call wrote y";
  EXPECT_TRUE(all_poison(dx)) << "a rejected call wrote dx";
  EXPECT_TRUE(all_poison(fw)) << "a rejected call wrote the forward workspace";
  EXPECT_TRUE(all_poison(bw)) << "a rejected call wrote the backward workspace";
  for (size_t t = 0; t < dev.grads.size(); ++t) EXPECT_TRUE(all_poison(*dev.grads[t])) << grad_name(t);
}

}  // namespace
}  // namespace winconv
