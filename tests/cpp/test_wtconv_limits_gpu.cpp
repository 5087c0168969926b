// WTConv GPU tests at the 32-bit limits: tensors past 2^31 elements, and a batch or a plane at the
// largest sizes that 32-bit indices inside an image or a plane allow (skipped, saying so, where the
// device lacks the memory).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

#include "cpu/wtconv_reference.h"
#include "gpu_test_util.h"
#include "winconv/wtconv.h"
#include "wtconv_gpu_check.h"

namespace winconv {
namespace {

using namespace winconv::testing;

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

}  // namespace
}  // namespace winconv
