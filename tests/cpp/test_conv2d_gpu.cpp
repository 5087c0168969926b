// GPU conv2d: the im2win transform against the CPU transform, and the FP32 convolution (every
// variant, both layouts) against the FP64 reference on random shapes and on the twelve benchmark
// layers at batch 2. Outputs are poisoned with NaN before each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "conv2d_test_util.h"
#include "cpu/im2win_cpu.h"
#include "cuda/conv2d_forward_tiled.h"
#include "cuda/cuda_status.h"
#include "cuda/im2win/conv_shallow.h"
#include "cuda/im2win/im2win_transform.h"
#include "cuda/im2win/shallow_select.h"
#include "cuda/im2win/tap_mask.h"
#include "gpu_test_util.h"

#ifndef WINCONV_SOURCE_DIR
#error "WINCONV_SOURCE_DIR must point at the repository (set by tests/CMakeLists.txt)"
#endif

namespace winconv {
namespace {

using testing::DeviceBuffer;
using testing::random_config;
using testing::random_vector;

// Runs conv2d_forward on the GPU and returns y (or fails the test). With a tile, runs
// conv2d_forward_tiled with that shape forced instead.
std::vector<float> run_gpu(const Conv2dConfig& cfg, const std::vector<float>& x, const std::vector<float>& w,
                           const im2win::TileShape* tile = nullptr) {
  DeviceBuffer<float> dx(x), dw(w), dy(size_t(cfg.problem.y_elements()));
  dy.poison();
  size_t ws_bytes = 0;
  Status st = tile ? conv2d_forward_tiled_workspace_size(cfg, tile, &ws_bytes)
                   : conv2d_forward_workspace_size(cfg, &ws_bytes);
  EXPECT_TRUE(st.ok()) << st.to_string();
  DeviceBuffer<char> ws(ws_bytes);
  ws.poison();  // no part of the workspace is read before the call writes it
  st = tile ? conv2d_forward_tiled(cfg, dx.ptr, dw.ptr, dy.ptr, ws.ptr, ws_bytes, nullptr, tile)
            : conv2d_forward(cfg, dx.ptr, dw.ptr, dy.ptr, ws.ptr, ws_bytes, nullptr);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return dy.to_host();
}

void expect_matches_reference(const Conv2dConfig& cfg, std::mt19937_64& rng,
                              const im2win::TileShape* tile = nullptr) {
  const Conv2dProblem& pb = cfg.problem;
  auto x = random_vector(size_t(pb.x_elements()), rng);
  auto w = random_vector(size_t(pb.w_elements()), rng);
  std::vector<double> ref(size_t(pb.y_elements()));
  ASSERT_TRUE(conv2d_reference(cfg, x.data(), w.data(), ref.data()).ok());
  const auto y = run_gpu(cfg, x, w, tile);
  EXPECT_LE(testing::relative_l2(y, ref), 1e-5) << testing::describe(cfg);
}

// Two runs on the same inputs write the same bits (split-K adds its splits in a fixed order).
void expect_reruns_bit_identical(const Conv2dConfig& cfg, std::mt19937_64& rng,
                                 const im2win::TileShape* tile = nullptr) {
  const auto x = random_vector(size_t(cfg.problem.x_elements()), rng);
  const auto w = random_vector(size_t(cfg.problem.w_elements()), rng);
  const auto y1 = run_gpu(cfg, x, w, tile), y2 = run_gpu(cfg, x, w, tile);
  ASSERT_EQ(y1.size(), y2.size());
  // Two runs that wrote nothing would leave the same NaN poison.
  EXPECT_EQ(std::count_if(y1.begin(), y1.end(), [](float v) { return !std::isfinite(v); }), 0) << "non-finite outputs";
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0) << "reruns differ";
}

const Conv2dAlgo kAlgos[] = {Conv2dAlgo::kAuto, Conv2dAlgo::kOnChip, Conv2dAlgo::kMaterialized};

// A config from a row {n, c, h, w, k, r, s, stride, pad} (square stride and padding).
Conv2dConfig config_from_row(const int64_t (&row)[9], Layout layout, Conv2dAlgo algo) {
  Conv2dConfig cfg;
  cfg.layout = layout;
  cfg.algo = algo;
  Conv2dProblem& pb = cfg.problem;
  pb.n = row[0]; pb.c = row[1]; pb.h = row[2]; pb.w = row[3];
  pb.k = row[4]; pb.r = row[5]; pb.s = row[6];
  pb.stride_h = pb.stride_w = row[7];
  pb.pad_h = pb.pad_w = row[8];
  return cfg;
}

TEST(Im2winTransformGpu, MatchesCpuTransform) {
  WINCONV_REQUIRE_GPU();
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20; ++i) {
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      const Conv2dConfig cfg = random_config(rng, layout, 31);
      auto x = random_vector(size_t(cfg.problem.x_elements()), rng);
      std::vector<float> want(size_t(im2win_window_elements(cfg.problem)));
      im2win_transform_cpu(cfg, x.data(), want.data());
      DeviceBuffer<float> dx(x), dwin(want.size());
      dwin.poison();
      ASSERT_EQ(im2win::launch_im2win_window(cfg, dx.ptr, dwin.ptr, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(dwin.to_host(), want) << testing::describe(cfg);
    }
  }
}

class Conv2dGpuRandom : public ::testing::TestWithParam<int> {};

TEST_P(Conv2dGpuRandom, MatchesReference) {
  WINCONV_REQUIRE_GPU();
  std::mt19937_64 rng(5000 + GetParam());
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
    for (Conv2dAlgo algo : kAlgos) {
      Conv2dConfig cfg = random_config(rng, layout, 40);
      cfg.algo = algo;
      expect_matches_reference(cfg, rng);
    }
}

INSTANTIATE_TEST_SUITE_P(Seeds, Conv2dGpuRandom, ::testing::Range(0, 30));

TEST_P(Conv2dGpuRandom, UnpaddedMatchesReference) {
  // No padding selects the gathers without bounds tests, which read the reduction table.
  WINCONV_REQUIRE_GPU();
  std::mt19937_64 rng(9000 + GetParam());
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    Conv2dConfig cfg = random_config(rng, layout, 40);
    cfg.problem.pad_h = cfg.problem.pad_w = 0;
    cfg.problem.h = std::max(cfg.problem.h, cfg.problem.r);
    cfg.problem.w = std::max(cfg.problem.w, cfg.problem.s);
    expect_matches_reference(cfg, rng);
  }
}

// Random problems beyond random_config's ranges (fuzz_config, conv2d_test_util.h), both layouts and
// every algorithm: outputs against the FP64 reference, and reruns bit for bit. WINCONV_FUZZ_CASES
// and WINCONV_FUZZ_SEED (fuzz_util.h) run a longer campaign.
TEST(Conv2dGpu, FuzzAgainstReference) {
  WINCONV_REQUIRE_GPU();
  const int64_t cases = testing::fuzz_cases(6);
  const uint64_t seed = testing::fuzz_seed(2026);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < cases; ++i) {
    const Conv2dConfig cfg = testing::fuzz_config(rng, 1.5e8);
    SCOPED_TRACE(::testing::Message() << "fuzz case " << i << " (WINCONV_FUZZ_SEED " << seed << ")");
    expect_matches_reference(cfg, rng);
    if (i % 4 == 0) expect_reruns_bit_identical(cfg, rng);
    if (HasFailure()) break;  // the first failing case is the one to read
  }
}

TEST(Conv2dGpu, LargeTilesAndManyTiles) {
  // Shapes that select each tile shape and leave tails in M, N and K.
  WINCONV_REQUIRE_GPU();
  std::mt19937_64 rng(77);
  const int64_t shapes[][9] = {
      // n, c, h, w, k, r, s, stride, pad
      {3, 37, 33, 35, 130, 3, 3, 1, 1}, {2, 64, 40, 40, 64, 3, 3, 1, 1}, {1, 5, 70, 66, 200, 5, 5, 2, 2},
      {4, 96, 9, 9, 257, 3, 3, 1, 0},   {2, 3, 61, 59, 96, 11, 11, 4, 0}, {1, 130, 6, 7, 33, 1, 1, 1, 0},
  };
  for (const auto& s : shapes)
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (Conv2dAlgo algo : kAlgos) {
        const Conv2dConfig cfg = config_from_row(s, layout, algo);
        expect_matches_reference(cfg, rng);
      }
}

// Each row {n, c, h, w, k, r, s, stride, pad} in both layouts, windows on chip and materialized.
template <size_t N>
std::vector<Conv2dConfig> every_layout_and_window_algo(const int64_t (&rows)[N][9]) {
  std::vector<Conv2dConfig> cfgs;
  for (const auto& row : rows)
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (Conv2dAlgo algo : {Conv2dAlgo::kOnChip, Conv2dAlgo::kMaterialized})
        cfgs.push_back(config_from_row(row, layout, algo));
  return cfgs;
}

// Fills dst with `units` runs of floats, run i a copy of pool[i % pool.size()] (all runs of one
// length): the pool uploaded, the rest copied on the device.
void upload_repeating(float* dst, const std::vector<std::vector<float>>& pool, size_t units) {
  const size_t unit = pool[0].size(), bytes = unit * sizeof(float);
  for (size_t i = 0; i < pool.size(); ++i)
    EXPECT_EQ(cudaMemcpy(dst + i * unit, pool[i].data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  for (size_t i = pool.size(); i < units; ++i)
    EXPECT_EQ(cudaMemcpy(dst + i * unit, dst + (i % pool.size()) * unit, bytes, cudaMemcpyDeviceToDevice),
              cudaSuccess);
}

// Tensors past 2^31 elements. The kernels index inside one image in 32 bits and step between
// images with 64-bit offsets (conv2d_validate.cpp), so only whole tensors may pass 2^31 elements,
// and must. Image i of x is random image i % 3, so image i of y must match the FP64 reference of
// that image: every image of y is read back (poisoned with NaN first) and checked. The first
// problem has x past 2^31 elements (materialized, the window tensor too), the second y; both
// layouts, windows on chip and materialized. Skipped, saying so, where the device lacks memory.
TEST(Conv2dGpu, TensorsPast2To31Elements) {
  WINCONV_REQUIRE_GPU();
  const int64_t shapes[][9] = {
      // n, c, h, w, k, r, s, stride, pad
      {1025, 8, 512, 512, 4, 3, 3, 1, 1},  // x: 2^31 + 2^21 elements
      {1025, 4, 512, 512, 8, 3, 3, 1, 1},  // y: 2^31 + 2^21 elements
  };
  std::vector<Conv2dConfig> cfgs = every_layout_and_window_algo(shapes);
  // y past 2^31 elements from the direct shallow kernel (C*R*S = 27, 8 filters: NCHW, on chip).
  cfgs.push_back(config_from_row({1025, 3, 512, 512, 8, 3, 3, 1, 1}, Layout::kNCHW, Conv2dAlgo::kOnChip));
  constexpr int kImages = 3;
  std::mt19937_64 rng(2031);
  for (const Conv2dConfig& cfg : cfgs) {
    const Conv2dProblem& pb = cfg.problem;
    SCOPED_TRACE(testing::describe(cfg));
    size_t ws_bytes = 0;
    ASSERT_TRUE(conv2d_forward_workspace_size(cfg, &ws_bytes).ok());
    const size_t x_img = size_t(pb.c * pb.h * pb.w), y_img = size_t(pb.k * pb.p() * pb.q());
    WINCONV_REQUIRE_DEVICE_MEMORY(sizeof(float) * size_t(pb.n) * (x_img + y_img) + ws_bytes + (size_t(1) << 30));
    Conv2dConfig one = cfg;
    one.problem.n = 1;
    const auto w = random_vector(size_t(pb.w_elements()), rng);
    DeviceBuffer<float> dx(size_t(pb.x_elements())), dw(w), dy(size_t(pb.y_elements()));
    std::vector<std::vector<float>> xs(kImages);
    std::vector<std::vector<double>> refs(kImages, std::vector<double>(y_img));
    for (int i = 0; i < kImages; ++i) {
      xs[i] = random_vector(x_img, rng);
      ASSERT_TRUE(conv2d_reference(one, xs[i].data(), w.data(), refs[i].data()).ok());
    }
    upload_repeating(dx.ptr, xs, size_t(pb.n));
    dy.poison();
    DeviceBuffer<char> ws(ws_bytes);
    ws.poison();  // no part of the workspace is read before the call writes it
    const Status st = conv2d_forward(cfg, dx.ptr, dw.ptr, dy.ptr, ws.ptr, ws_bytes, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<double> err(size_t(pb.n), 0.0);  // per image; a failed copy counts as NaN
    testing::parallel_ranges(size_t(pb.n), [&](size_t begin, size_t end) {
      std::vector<float> y(y_img);
      for (size_t i = begin; i < end; ++i) {
        const bool copied =
            cudaMemcpy(y.data(), dy.ptr + i * y_img, y_img * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
        err[i] = copied ? testing::relative_l2(y, refs[i % kImages]) : NAN;
      }
    });
    const size_t worst = testing::worst_index(err);
    EXPECT_LE(err[worst], 1e-5) << "worst: image " << worst << " of " << pb.n;
  }
}

// Images at the 32-bit limit: one image's x (1 x 1 filters) or window tensor (3 x 3) just under
// 2^31 elements, the largest the validation admits, and two images, so that the second ends past
// 2^32 elements. Whole x would take minutes on the FP64 reference, so x repeats random planes
// (NCHW: plane n C + c is plane (n C + c) % 7) or rows (NHWC: row n H + h is row (n H + h) % 3),
// and outputs at the corners, edges, centre and random pixels of every filter and image are
// checked against sums evaluated here; every output must be finite (poisoned with NaN first).
TEST(Conv2dGpu, ImagesAtThe32BitLimit) {
  WINCONV_REQUIRE_GPU();
  const int64_t shapes[][9] = {
      // n, c, h, w, k, r, s, stride, pad
      {2, 8192, 511, 512, 8, 1, 1, 1, 0},  // x image: 2^31 - 4 Mi elements
      {2, 2700, 512, 512, 8, 3, 3, 1, 1},  // window image: 2700 x 512 x 514 x 3 = 2.13e9 elements
  };
  std::vector<Conv2dConfig> cfgs = every_layout_and_window_algo(shapes);
  // A y image 7 elements under 2^31 (8 x 16385 x 16383) from the direct shallow kernel (NCHW,
  // windows on chip, 1 x 3 filters padded by 1; 8 planes of x, at least the pool of 7).
  cfgs.push_back(config_from_row({2, 4, 16383, 16383, 8, 1, 3, 1, 1}, Layout::kNCHW, Conv2dAlgo::kOnChip));
  constexpr int kPlanes = 7, kRows = 3;
  std::mt19937_64 rng(2032);
  for (const Conv2dConfig& cfg : cfgs) {
    const Conv2dProblem& pb = cfg.problem;
    SCOPED_TRACE(testing::describe(cfg));
    ASSERT_TRUE(conv2d_validate(cfg).ok());
    size_t ws_bytes = 0;
    ASSERT_TRUE(conv2d_forward_workspace_size(cfg, &ws_bytes).ok());
    WINCONV_REQUIRE_DEVICE_MEMORY(sizeof(float) * size_t(pb.x_elements() + pb.y_elements()) + ws_bytes +
                                  (size_t(1) << 30));
    const bool nchw = cfg.layout == Layout::kNCHW;
    const size_t unit = size_t(nchw ? pb.h * pb.w : pb.w * pb.c);  // a plane or a row, in floats
    const size_t units = size_t(pb.x_elements()) / unit, pool = nchw ? kPlanes : kRows;
    std::vector<std::vector<float>> xs(pool);
    for (auto& v : xs) v = random_vector(unit, rng);
    DeviceBuffer<float> dx(size_t(pb.x_elements())), dy(size_t(pb.y_elements()));
    upload_repeating(dx.ptr, xs, units);
    const auto w = random_vector(size_t(pb.w_elements()), rng);
    DeviceBuffer<float> dw(w);
    dy.poison();
    DeviceBuffer<char> ws(ws_bytes);
    ws.poison();  // no part of the workspace is read before the call writes it
    const Status st = conv2d_forward(cfg, dx.ptr, dw.ptr, dy.ptr, ws.ptr, ws_bytes, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = dy.to_host();
    EXPECT_EQ(std::count_if(y.begin(), y.end(), [](float v) { return !std::isfinite(v); }), 0)
        << "outputs that are not finite";

    auto x_at = [&](int64_t n, int64_t c, int64_t h, int64_t wi) -> double {
      if (h < 0 || h >= pb.h || wi < 0 || wi >= pb.w) return 0.0;  // zero padding
      return nchw ? xs[size_t(n * pb.c + c) % pool][size_t(h * pb.w + wi)]
                  : xs[size_t(n * pb.h + h) % pool][size_t(wi * pb.c + c)];
    };
    auto w_at = [&](int64_t k, int64_t c, int64_t r, int64_t s) -> double {
      return w[size_t(nchw ? ((k * pb.c + c) * pb.r + r) * pb.s + s : ((k * pb.r + r) * pb.s + s) * pb.c + c)];
    };
    const int64_t P = pb.p(), Q = pb.q();
    std::vector<std::pair<int64_t, int64_t>> pixels = {{0, 0}, {0, Q - 1}, {P - 1, 0}, {P - 1, Q - 1},
                                                       {P / 2, Q / 2}};
    for (int i = 0; i < 20; ++i) pixels.emplace_back(int64_t(rng() % P), int64_t(rng() % Q));
    std::vector<double> got, want;
    for (int64_t n = 0; n < pb.n; ++n)
      for (int64_t k = 0; k < pb.k; ++k)
        for (const auto& [p, q] : pixels) {
          double sum = 0;
          for (int64_t c = 0; c < pb.c; ++c)
            for (int64_t r = 0; r < pb.r; ++r)
              for (int64_t s = 0; s < pb.s; ++s)
                sum += x_at(n, c, p * pb.stride_h - pb.pad_h + r, q * pb.stride_w - pb.pad_w + s) *
                       w_at(k, c, r, s);
          want.push_back(sum);
          got.push_back(y[size_t(nchw ? ((n * pb.k + k) * P + p) * Q + q : ((n * P + p) * Q + q) * pb.k + k)]);
        }
    EXPECT_LE(testing::relative_l2(got, want), 1e-5);
  }
}

TEST(Conv2dGpu, EveryTileShapeMatchesReference) {
  // Each tile shape forced on shapes with tails in M, N and K, with and without padding, every
  // gather (NCHW, NHWC with C % 4 == 0 and != 0, on chip and materialized): the selection rule
  // alone would not reach every shape on small test problems.
  WINCONV_REQUIRE_GPU();
  std::mt19937_64 rng(41);
  const int64_t shapes[][9] = {
      // n, c, h, w, k, r, s, stride, pad
      {2, 3, 23, 21, 96, 5, 5, 2, 0}, {1, 8, 17, 19, 100, 3, 3, 1, 1}, {3, 5, 9, 10, 193, 3, 3, 1, 0},
      {2, 12, 15, 18, 13, 3, 3, 1, 1}, {1, 16, 20, 25, 32, 7, 7, 2, 3},  // N within one 32-wide tile
      {1, 5, 14, 13, 40, 3, 5, 1, 2},  // padded, C % 4 != 0: the scalar NHWC gather's tap bits
  };
  for (const auto& s : shapes)
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (Conv2dAlgo algo : {Conv2dAlgo::kOnChip, Conv2dAlgo::kMaterialized})
        for (im2win::TileShape tile : im2win::kAllTileShapes) {
          const Conv2dConfig cfg = config_from_row(s, layout, algo);
          SCOPED_TRACE(testing::describe(cfg) + " tile " + im2win::tile_name(tile));
          expect_matches_reference(cfg, rng, &tile);
        }
}

// Padded windows on chip read the reduction table's tap bits where R and S are at most 15
// (tap_mask.h) and walk the reduction digits past that: filters at the mask's reach and one past
// it, in either dimension, and padding wider than the filter (windows wholly outside the image),
// both layouts (C % 4 != 0: the scalar NHWC gather), against the FP64 reference.
TEST(Conv2dGpu, PaddedFiltersAtAndPastTheTapMaskReach) {
  WINCONV_REQUIRE_GPU();
  std::mt19937_64 rng(43);
  const int64_t shapes[][9] = {
      // n, c, h, w, k, r, s, stride, pad
      {2, 3, 20, 23, 40, 15, 15, 1, 7},  {1, 5, 9, 30, 70, 3, 17, 2, 8},
      {1, 2, 33, 8, 24, 16, 5, 1, 4},    {2, 6, 11, 12, 33, 15, 3, 3, 20},
  };
  for (const auto& s : shapes)
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      const Conv2dConfig cfg = config_from_row(s, layout, Conv2dAlgo::kOnChip);
      SCOPED_TRACE(testing::describe(cfg));
      EXPECT_EQ(conv2d_gemm_plan(cfg, 0, nullptr).table, im2win::tap_mask_fits(s[5], s[6])
                                                                ? ReductionTableKind::kOffsetsAndTapBits
                                                                : ReductionTableKind::kNone);
      expect_matches_reference(cfg, rng);
    }
}

// The direct kernel for shallow reductions (shallow_select.h): random NCHW problems with
// C * R * S <= 64 and up to as many filters as the rule takes for them (both of the kernel's
// channel groupings, with tails), padded and not, strides 1-4, odd sizes, against the FP64
// reference; the plan must choose the kernel, need no workspace, and repeat bit for bit.
TEST(Conv2dGpu, ShallowNarrowLayersTakeTheDirectKernel) {
  WINCONV_REQUIRE_GPU();
  int sms = 0;
  ASSERT_TRUE(cuda_check_device(&sms).ok());
  std::mt19937_64 rng(4242);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 60; ++i) {
    Conv2dConfig cfg;
    cfg.layout = Layout::kNCHW;
    cfg.algo = i % 2 ? Conv2dAlgo::kAuto : Conv2dAlgo::kOnChip;
    Conv2dProblem& pb = cfg.problem;
    int64_t max_filters = 0;
    do {
      pb.c = pick(1, 6);
      pb.r = pick(1, 8);
      pb.s = pick(1, 8);
      pb.stride_h = pick(1, 4);
      pb.stride_w = pick(0, 1) ? pb.stride_h : pick(1, 4);
      max_filters = im2win::shallow_max_filters(pb.c, pb.r, pb.s, pb.stride_w);
    } while (max_filters == 0);
    pb.n = pick(1, 3);
    pb.k = i % 3 == 0 ? pick(1, 8) : pick(9, max_filters);
    pb.h = pick(1, 90);
    pb.w = pick(1, 90);
    pb.pad_h = pick(0, pb.r - 1);
    pb.pad_w = pick(0, pb.s - 1);
    pb.h = std::max(pb.h, pb.r - 2 * pb.pad_h);
    pb.w = std::max(pb.w, pb.s - 2 * pb.pad_w);
    SCOPED_TRACE(testing::describe(cfg));
    EXPECT_TRUE(conv2d_gemm_plan(cfg, sms, nullptr).shallow);
    size_t ws_bytes = 1;
    ASSERT_TRUE(conv2d_forward_workspace_size(cfg, &ws_bytes).ok());
    EXPECT_EQ(ws_bytes, 0u);
    expect_matches_reference(cfg, rng);
    if (i % 10 == 0) expect_reruns_bit_identical(cfg, rng);
  }
  // Not taken: NHWC, materialized windows, a forced tile, one filter more, a reduction one deeper.
  Conv2dConfig cfg = config_from_row({2, 3, 20, 20, 32, 3, 3, 1, 1}, Layout::kNCHW, Conv2dAlgo::kAuto);
  EXPECT_TRUE(conv2d_gemm_plan(cfg, sms, nullptr).shallow);
  const im2win::TileShape tile = im2win::TileShape::k128x32;
  EXPECT_FALSE(conv2d_gemm_plan(cfg, sms, &tile).shallow);
  cfg.layout = Layout::kNHWC;
  EXPECT_FALSE(conv2d_gemm_plan(cfg, sms, nullptr).shallow);
  cfg.layout = Layout::kNCHW;
  cfg.algo = Conv2dAlgo::kMaterialized;
  EXPECT_FALSE(conv2d_gemm_plan(cfg, sms, nullptr).shallow);
  cfg.algo = Conv2dAlgo::kAuto;
  cfg.problem.k = im2win::shallow_max_filters(3, 3, 3, 1) + 1;
  EXPECT_FALSE(conv2d_gemm_plan(cfg, sms, nullptr).shallow);
  cfg.problem.k = 32;
  cfg.problem.c = 5;  // 5 x 13 x 1 = 65
  cfg.problem.r = 13;
  cfg.problem.s = 1;
  EXPECT_FALSE(conv2d_gemm_plan(cfg, sms, nullptr).shallow);
}

// conv2d_forward_shallow on cfg into a poisoned y, checked for its status, for finite outputs and
// against the FP64 reference; returns y.
std::vector<float> forced_shallow_output(const Conv2dConfig& cfg, const std::vector<float>& x,
                                         const std::vector<float>& w) {
  const Conv2dProblem& pb = cfg.problem;
  std::vector<double> ref(size_t(pb.y_elements()));
  EXPECT_TRUE(conv2d_reference(cfg, x.data(), w.data(), ref.data()).ok());
  DeviceBuffer<float> dx(x), dw(w), dy(size_t(pb.y_elements()));
  dy.poison();
  const Status st = conv2d_forward_shallow(cfg, dx.ptr, dw.ptr, dy.ptr, nullptr);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = dy.to_host();
  EXPECT_EQ(std::count_if(y.begin(), y.end(), [](float v) { return !std::isfinite(v); }), 0);
  EXPECT_LE(testing::relative_l2(y, ref), 1e-5);
  return y;
}

// conv2d_forward_shallow (the tile sweep's entry): the kernel forced on 36- to 64-deep reductions
// of 9 to 70 filters (70: past the rule, which leaves it to the GEMM), against the reference;
// refused, launching nothing, on reductions past its depth or in NHWC.
TEST(Conv2dGpu, ShallowKernelForcedUpToItsDepth) {
  WINCONV_REQUIRE_GPU();
  std::mt19937_64 rng(4343);
  const int64_t shapes[][9] = {
      // n, c, h, w, k, r, s, stride, pad
      {2, 4, 19, 23, 40, 3, 3, 1, 1},  // 36
      {1, 3, 30, 17, 17, 4, 4, 2, 1},  // 48
      {3, 1, 21, 22, 9, 8, 8, 1, 3},   // 64
      {2, 16, 9, 13, 70, 2, 2, 1, 0},  // 64
  };
  for (const auto& row : shapes) {
    const Conv2dConfig cfg = config_from_row(row, Layout::kNCHW, Conv2dAlgo::kOnChip);
    const Conv2dProblem& pb = cfg.problem;
    SCOPED_TRACE(testing::describe(cfg));
    const auto x = random_vector(size_t(pb.x_elements()), rng), w = random_vector(size_t(pb.w_elements()), rng);
    forced_shallow_output(cfg, x, w);
  }
  for (const Conv2dConfig& cfg : {config_from_row({1, 5, 9, 9, 8, 4, 4, 1, 0}, Layout::kNCHW, Conv2dAlgo::kOnChip),
                                  config_from_row({1, 3, 9, 9, 8, 3, 3, 1, 0}, Layout::kNHWC, Conv2dAlgo::kOnChip)}) {
    const Conv2dProblem& pb = cfg.problem;
    DeviceBuffer<float> dx(size_t(pb.x_elements())), dw(size_t(pb.w_elements())), dy(size_t(pb.y_elements()));
    dy.poison();
    EXPECT_EQ(conv2d_forward_shallow(cfg, dx.ptr, dw.ptr, dy.ptr, nullptr).code(), StatusCode::kUnsupported)
        << testing::describe(cfg);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto y = dy.to_host();
    EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return std::isnan(v); })) << "something was written";
  }
}

// The direct kernel walks the window rows of unpadded warps with the filter width at compile time
// (1-5, 7, 8; others at run time). Forced on problems of every width from 1 to 10, unpadded (every
// warp's windows inside x) and padded in height only (both paths in one launch), it writes the
// GEMM's bits (the same reduction order, c, r, s) and meets the FP64 reference.
TEST(Conv2dGpu, ShallowKernelForcedAtEveryFilterWidthWritesTheGemmsBits) {
  WINCONV_REQUIRE_GPU();
  std::mt19937_64 rng(4444);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const im2win::TileShape tile = im2win::TileShape::k128x32;
  for (int64_t s = 1; s <= 10; ++s) {
    for (int64_t pad_h : {0, 1}) {
      Conv2dConfig cfg;
      cfg.layout = Layout::kNCHW;
      cfg.algo = Conv2dAlgo::kOnChip;
      Conv2dProblem& pb = cfg.problem;
      pb.s = s;
      pb.r = pick(1, std::min<int64_t>(8, im2win::kShallowMaxDepth / s));
      pb.c = pick(1, im2win::kShallowMaxDepth / (pb.r * pb.s));
      pb.n = 2;
      pb.k = pick(0, 2) == 0 ? pick(1, 8) : pick(9, 40);
      pb.h = pb.r + pick(4, 40);
      pb.w = pb.s + pick(20, 150);
      pb.stride_h = pick(1, 2);
      pb.stride_w = pick(1, 2);
      pb.pad_h = std::min(pad_h, pb.r - 1);
      SCOPED_TRACE(testing::describe(cfg));
      const auto x = random_vector(size_t(pb.x_elements()), rng), w = random_vector(size_t(pb.w_elements()), rng);
      const auto direct = forced_shallow_output(cfg, x, w), gemm = run_gpu(cfg, x, w, &tile);
      ASSERT_EQ(direct.size(), gemm.size());
      EXPECT_EQ(std::memcmp(direct.data(), gemm.data(), direct.size() * sizeof(float)), 0) << "direct and GEMM differ";
    }
  }
}

// The direct kernel's channel groups of 16, 8 and 4 (shallow_filters_per_thread, by the warps
// its grid gives each SM): a 3-channel 3 x 3 layer of 37 filters (a tail in every grouping) at the
// smallest batch that takes each, and 3 filters (fewer than one group of 4), forced, write the
// GEMM's bits (every grouping sums the taps of an output in the same order) and meet the
// reference.
TEST(Conv2dGpu, ShallowKernelChannelGroupsWriteTheGemmsBits) {
  WINCONV_REQUIRE_GPU();
  int sms = 0;
  ASSERT_TRUE(cuda_check_device(&sms).ok());
  std::mt19937_64 rng(4545);
  const im2win::TileShape tile = im2win::TileShape::k128x32;
  auto config = [](int64_t n, int64_t k) {
    return config_from_row({n, 3, 38, 38, k, 3, 3, 1, 1}, Layout::kNCHW, Conv2dAlgo::kOnChip);
  };
  const Conv2dProblem image = config(1, 37).problem;
  const int64_t jobs_per_image = (image.p() * image.q() + im2win::kShallowJobPixels - 1) / im2win::kShallowJobPixels;
  std::vector<std::pair<int64_t, int64_t>> runs;  // (batch, filters)
  for (const int kt : {16, 8, 4}) {
    int64_t n = 1;
    while (im2win::shallow_filters_per_thread(n * jobs_per_image, 37, sms) != kt) ++n;
    runs.emplace_back(n, 37);
  }
  runs.emplace_back(runs.front().first, 3);
  ASSERT_GT(runs[1].first, runs[2].first);  // 8 takes more warps than 4, 16 more than 8
  ASSERT_GT(runs[0].first, runs[1].first);
  for (const auto& [n, k] : runs) {
    const Conv2dConfig cfg = config(n, k);
    const Conv2dProblem& pb = cfg.problem;
    SCOPED_TRACE(testing::describe(cfg));
    const auto x = random_vector(size_t(pb.x_elements()), rng), w = random_vector(size_t(pb.w_elements()), rng);
    const auto direct = forced_shallow_output(cfg, x, w), gemm = run_gpu(cfg, x, w, &tile);
    ASSERT_EQ(direct.size(), gemm.size());
    EXPECT_EQ(std::memcmp(direct.data(), gemm.data(), direct.size() * sizeof(float)), 0) << "direct and GEMM differ";
  }
}

TEST(Conv2dGpu, SplitKMatchesReferenceAndRepeatsBitForBit) {
  // Small M, deep reduction: the tiles leave SMs idle, so the GEMM splits the reduction and a
  // second pass adds the partial tiles. K_gemm is a multiple of neither BK nor the split, the
  // last split is shorter, and a tail pixel or channel sits in every tile. The last shape runs
  // again in 128x128 tiles (71 of them on 132 SMs), which the rule no longer picks.
  WINCONV_REQUIRE_GPU();
  int sms = 0;
  ASSERT_TRUE(cuda_check_device(&sms).ok());
  std::mt19937_64 rng(29);
  const int64_t shapes[][9] = {
      // n, c, h, w, k, r, s, stride, pad
      {1, 67, 9, 11, 37, 3, 3, 1, 1}, {2, 129, 7, 7, 130, 3, 3, 1, 0},
      {1, 61, 5, 6, 5, 5, 5, 1, 2},   {3, 520, 4, 4, 64, 1, 1, 1, 0},
      {1, 64, 95, 95, 128, 3, 3, 1, 1},
  };
  int split_runs = 0, runs = 0;
  for (const auto& s : shapes)
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (Conv2dAlgo algo : kAlgos) {
        const Conv2dConfig cfg = config_from_row(s, layout, algo);
        const Conv2dGemmPlan plan = conv2d_gemm_plan(cfg, sms, nullptr);
        SCOPED_TRACE(testing::describe(cfg) + " tile " + im2win::tile_name(plan.tile) + ", " +
                     std::to_string(plan.ksplit.splits) + " splits");
        ++runs;
        split_runs += plan.ksplit.splits > 1;
        expect_matches_reference(cfg, rng);
        expect_reruns_bit_identical(cfg, rng);
      }
  // On 132 SMs every run splits; a GPU with other SM counts splits at least the one-tile shapes.
  EXPECT_GE(split_runs, sms == 132 ? runs : 1) << split_runs << " of " << runs << " runs split the reduction";
  const im2win::TileShape wide = im2win::TileShape::k128x128;
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    const Conv2dConfig cfg = config_from_row(shapes[4], layout, Conv2dAlgo::kOnChip);
    const Conv2dGemmPlan plan = conv2d_gemm_plan(cfg, sms, &wide);
    SCOPED_TRACE(testing::describe(cfg) + " tile 128x128, " + std::to_string(plan.ksplit.splits) + " splits");
    if (sms == 132) EXPECT_GT(plan.ksplit.splits, 1);
    expect_matches_reference(cfg, rng, &wide);
    expect_reruns_bit_identical(cfg, rng, &wide);
  }
}

TEST(Conv2dGpu, SplitKTailOfTheLastRoundMatchesReferenceAndRepeatsBitForBit) {
  // A GEMM a few tiles past whole rounds on every SM: the head runs unsplit, then only the
  // tail's tiles are split and reduced into their rows of y (tile_select.h). The shape is searched
  // for this device's SM count; odd C takes the scalar NHWC gather, C = 48 the vector one (with
  // K = 200: two tile columns, the second with a tail), and the odd width puts an image boundary
  // inside tiles.
  WINCONV_REQUIRE_GPU();
  int sms = 0;
  ASSERT_TRUE(cuda_check_device(&sms).ok());
  std::mt19937_64 rng(31);
  int runs = 0;
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
    for (int64_t c : {47, 48})
      for (int64_t pad : {0, 1}) {
        const Conv2dAlgo algo = pad == 0 ? Conv2dAlgo::kOnChip : Conv2dAlgo::kMaterialized;
        bool found = false;
        for (int64_t n = 1; n <= 16 && !found; ++n)
          for (int64_t h = 8; h <= 64 && !found; ++h) {
            const int64_t row[9] = {n, c, h, h + 1, c == 48 ? 200 : 64, 3, 3, 1, pad};
            const Conv2dConfig cfg = config_from_row(row, layout, algo);
            const Conv2dGemmPlan plan = conv2d_gemm_plan(cfg, sms, nullptr);
            if (plan.ksplit.splits < 2 || plan.ksplit.head_tiles == 0) continue;
            found = true;
            ++runs;
            SCOPED_TRACE(testing::describe(cfg) + " tile " + im2win::tile_name(plan.tile) + ", " +
                         std::to_string(plan.ksplit.splits) + " splits after " +
                         std::to_string(plan.ksplit.head_tiles) + " unsplit tiles");
            expect_matches_reference(cfg, rng);
            expect_reruns_bit_identical(cfg, rng);
          }
      }
  EXPECT_GT(runs, 0) << "no shape of the search takes a tail split on " << sms << " SMs";
}

TEST(Conv2dGpu, BenchmarkLayersAtBatch2) {
  WINCONV_REQUIRE_GPU();
  std::ifstream in(std::string(WINCONV_SOURCE_DIR) + "/bench/layers.csv");
  ASSERT_TRUE(in) << "bench/layers.csv not found";
  std::mt19937_64 rng(99);
  std::string line;
  int layers = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("name,", 0) == 0) continue;
    std::stringstream ss(line);
    std::string f[9];
    for (auto& v : f) std::getline(ss, v, ',');
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (Conv2dAlgo algo : {Conv2dAlgo::kOnChip, Conv2dAlgo::kMaterialized}) {
        Conv2dConfig cfg;
        cfg.layout = layout;
        cfg.algo = algo;
        cfg.problem.n = 2; cfg.problem.c = std::stoll(f[1]); cfg.problem.h = std::stoll(f[2]);
        cfg.problem.w = std::stoll(f[3]); cfg.problem.k = std::stoll(f[4]); cfg.problem.r = std::stoll(f[5]);
        cfg.problem.s = std::stoll(f[6]);
        cfg.problem.stride_h = cfg.problem.stride_w = std::stoll(f[7]);
        cfg.problem.pad_h = cfg.problem.pad_w = std::stoll(f[8]);
        SCOPED_TRACE(f[0]);
        expect_matches_reference(cfg, rng);
      }
    ++layers;
  }
  EXPECT_EQ(layers, 13);
}

// Runs check(cfg, shallow) on the rejection tests' problems (8 x 8 inputs, 3 x 3 filters, tensors
// within 2048 floats) on both paths: 8 channels (a reduction of 72, past any filter count the direct
// kernel takes) run the window GEMM, 4 channels with 4 filters the direct kernel.
template <typename Check>
void on_both_paths(Check check) {
  int sms = 0;
  ASSERT_TRUE(cuda_check_device(&sms).ok());
  for (int64_t c : {8, 4}) {
    Conv2dConfig cfg;
    cfg.problem.n = 1; cfg.problem.c = c; cfg.problem.h = 8; cfg.problem.w = 8; cfg.problem.k = 4;
    cfg.problem.r = 3; cfg.problem.s = 3;
    SCOPED_TRACE(testing::describe(cfg));
    const bool shallow = conv2d_gemm_plan(cfg, sms, nullptr).shallow;
    EXPECT_EQ(shallow, c == 4);
    check(cfg, shallow);
  }
}

TEST(Conv2dGpu, BadPointersLaunchNothing) {
  WINCONV_REQUIRE_GPU();
  on_both_paths([](const Conv2dConfig& cfg, bool shallow) {
    DeviceBuffer<float> x(2048), w(2048), y(2048);
    y.poison();
    size_t ws_bytes = 0;
    ASSERT_TRUE(conv2d_forward_workspace_size(cfg, &ws_bytes).ok());
    EXPECT_EQ(ws_bytes == 0, shallow);
    DeviceBuffer<char> ws(ws_bytes + 16);
    EXPECT_EQ(conv2d_forward(cfg, nullptr, w.ptr, y.ptr, ws.ptr, ws_bytes, nullptr).code(), StatusCode::kNullPointer);
    EXPECT_EQ(conv2d_forward(cfg, x.ptr, nullptr, y.ptr, ws.ptr, ws_bytes, nullptr).code(), StatusCode::kNullPointer);
    EXPECT_EQ(conv2d_forward(cfg, x.ptr, w.ptr, nullptr, ws.ptr, ws_bytes, nullptr).code(), StatusCode::kNullPointer);
    EXPECT_EQ(conv2d_forward(cfg, x.ptr + 1, w.ptr, y.ptr, ws.ptr, ws_bytes, nullptr).code(),
              StatusCode::kMisalignedPointer);
    EXPECT_EQ(conv2d_forward(cfg, x.ptr, w.ptr + 1, y.ptr, ws.ptr, ws_bytes, nullptr).code(),
              StatusCode::kMisalignedPointer);
    EXPECT_EQ(conv2d_forward(cfg, x.ptr, w.ptr, y.ptr + 2, ws.ptr, ws_bytes, nullptr).code(),
              StatusCode::kMisalignedPointer);
    if (!shallow) {
      EXPECT_EQ(conv2d_forward(cfg, x.ptr, w.ptr, y.ptr, ws.ptr + 4, ws_bytes, nullptr).code(),
                StatusCode::kMisalignedPointer);
      EXPECT_EQ(conv2d_forward(cfg, x.ptr, w.ptr, y.ptr, ws.ptr, ws_bytes - 1, nullptr).code(),
                StatusCode::kWorkspaceTooSmall);
      EXPECT_EQ(conv2d_forward(cfg, x.ptr, w.ptr, y.ptr, nullptr, ws_bytes, nullptr).code(), StatusCode::kNullPointer);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (float v : y.to_host()) EXPECT_TRUE(std::isnan(v)) << "a rejected call wrote y";
  });
}

// An error the caller left pending is refused by name, on both paths, and left for the caller to
// read: a launch would have reported it as its own.
TEST(Conv2dGpu, PendingErrorLaunchesNothing) {
  WINCONV_REQUIRE_GPU();
  on_both_paths([](const Conv2dConfig& cfg, bool shallow) {
    DeviceBuffer<float> x(2048), w(2048), y(2048);
    x.poison(); w.poison(); y.poison();
    size_t ws_bytes = 0;
    ASSERT_TRUE(conv2d_forward_workspace_size(cfg, &ws_bytes).ok());
    DeviceBuffer<char> ws(ws_bytes + 16);
    const cudaError_t pending = testing::leave_pending_error();
    ASSERT_NE(pending, cudaSuccess);
    size_t ws_while_pending = 0;
    EXPECT_TRUE(conv2d_forward_workspace_size(cfg, &ws_while_pending).ok()) << "the query launches nothing";
    EXPECT_EQ(ws_while_pending, ws_bytes);
    const Status st = conv2d_forward(cfg, x.ptr, w.ptr, y.ptr, ws.ptr, ws_bytes, nullptr);
    EXPECT_EQ(st.code(), StatusCode::kCudaError);
    EXPECT_NE(st.message().find("pending"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(cudaGetErrorName(pending)), std::string::npos) << st.message();
    if (shallow) EXPECT_EQ(conv2d_forward_shallow(cfg, x.ptr, w.ptr, y.ptr, nullptr).code(), StatusCode::kCudaError);
    EXPECT_EQ(cudaGetLastError(), pending) << "the caller's error was not left for the caller";
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (float v : y.to_host()) ASSERT_TRUE(std::isnan(v)) << "a refused call wrote y";
    // Read and cleared, the same call runs (NaN inputs give NaN outputs: only that it ran is checked).
    EXPECT_TRUE(conv2d_forward(cfg, x.ptr, w.ptr, y.ptr, ws.ptr, ws_bytes, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
}

}  // namespace
}  // namespace winconv
