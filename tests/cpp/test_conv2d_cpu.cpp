// The CPU path: the im2win transform against its definition, and the CPU im2win convolution
// against the FP64 reference on random shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <thread>
#include <vector>

#include "conv2d_test_util.h"
#include "cpu/im2win_cpu.h"
#include "cpu/start_thread.h"
#include "fuzz_util.h"
#include "no_room_for_threads.h"

namespace winconv {
namespace {

using testing::random_config;
using testing::random_vector;

TEST(Im2winTransformCpu, MatchesDefinitionNchw) {
  // n=1, c=2, h=5, w=4, r=3, stride 2, pad 1: check every element by the formula.
  Conv2dConfig cfg;
  cfg.problem.n = 1; cfg.problem.c = 2; cfg.problem.h = 5; cfg.problem.w = 4;
  cfg.problem.k = 1; cfg.problem.r = 3; cfg.problem.s = 2;
  cfg.problem.stride_h = 2; cfg.problem.pad_h = 1; cfg.problem.pad_w = 1;
  std::vector<float> x(40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i + 1);
  std::vector<float> win(size_t(im2win_window_elements(cfg.problem)), -1.f);
  im2win_transform_cpu(cfg, x.data(), win.data());
  const int64_t P = cfg.problem.p(), Wp = 6, R = 3;
  ASSERT_EQ(P, 3);
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t w = 0; w < Wp; ++w)
        for (int64_t u = 0; u < R; ++u) {
          const int64_t h = p * 2 + u - 1, ww = w - 1;
          const float want = (h < 0 || h >= 5 || ww < 0 || ww >= 4) ? 0.f : x[size_t((c * 5 + h) * 4 + ww)];
          EXPECT_EQ(win[size_t((c * P + p) * Wp * R + w * R + u)], want) << c << ' ' << p << ' ' << w << ' ' << u;
        }
}

// NHWC, every element by the formula, poisoned first, for channel counts on each of the
// transform's copy paths (C = 1 to 4 moved inline, wider pixels by a copy), with padding on both
// axes (top rows wholly padding) and strides 1 and 3.
TEST(Im2winTransformCpu, MatchesDefinitionNhwcForEveryChannelCount) {
  for (int64_t C : {1, 2, 3, 4, 5, 9})
    for (int64_t stride : {1, 3}) {
      Conv2dConfig cfg;
      cfg.layout = Layout::kNHWC;
      Conv2dProblem& pb = cfg.problem;
      pb.n = 2; pb.c = C; pb.h = 6; pb.w = 5; pb.k = 1; pb.r = 4; pb.s = 2;
      pb.stride_h = stride; pb.stride_w = stride; pb.pad_h = 2; pb.pad_w = 1;
      std::vector<float> x(size_t(pb.x_elements()));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(i + 1);
      std::vector<float> win(size_t(im2win_window_elements(pb)), std::numeric_limits<float>::quiet_NaN());
      im2win_transform_cpu(cfg, x.data(), win.data());
      const int64_t P = pb.p(), Wp = pb.w + 2 * pb.pad_w, R = pb.r;
      for (int64_t n = 0; n < pb.n; ++n)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t w = 0; w < Wp; ++w)
            for (int64_t u = 0; u < R; ++u)
              for (int64_t c = 0; c < C; ++c) {
                const int64_t h = p * stride + u - pb.pad_h, ww = w - pb.pad_w;
                const float want = (h < 0 || h >= pb.h || ww < 0 || ww >= pb.w)
                                       ? 0.f
                                       : x[size_t(((n * pb.h + h) * pb.w + ww) * C + c)];
                ASSERT_EQ(win[size_t(((((n * P + p) * Wp + w) * R + u) * C) + c)], want)
                    << "C " << C << " stride " << stride << " at " << n << ' ' << p << ' ' << w << ' ' << u << ' ' << c;
              }
    }
}

// The window of (p, q) is one contiguous run per group: NCHW, S*R elements per channel c at
// ((n*C + c)*P + p)*W'*R + q*s_w*R; NHWC, S*R*C elements at ((n*P + p)*W' + q*s_w)*R*C. Dotting the
// runs with the packed filter's rows of the same groups (pack_filter_cpu: filter k in block k / 32,
// lane k % 32) gives the convolution, in double, to the reference's rounding.
TEST(Im2winTransformCpu, WindowOfEachPixelIsOneRunPerGroup) {
  std::mt19937_64 rng(7);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    for (int draw = 0; draw < 4; ++draw) {
      const Conv2dConfig cfg = random_config(rng, layout, 9);
      const Conv2dProblem& pb = cfg.problem;
      auto x = random_vector(size_t(pb.x_elements()), rng);
      auto w = random_vector(size_t(pb.w_elements()), rng);
      // Poisoned first: every element of both must be written.
      std::vector<float> win(size_t(im2win_window_elements(pb)), std::numeric_limits<float>::quiet_NaN());
      std::vector<float> packed(size_t(packed_filter_elements(pb)), std::numeric_limits<float>::quiet_NaN());
      im2win_transform_cpu(cfg, x.data(), win.data());
      pack_filter_cpu(cfg, w.data(), packed.data());
      std::vector<double> ref(size_t(pb.y_elements()));
      ASSERT_TRUE(conv2d_reference(cfg, x.data(), w.data(), ref.data()).ok());
      const bool nchw = layout == Layout::kNCHW;
      const int64_t P = pb.p(), Q = pb.q(), Wp = pb.w + 2 * pb.pad_w, R = pb.r, C = pb.c, K = pb.k;
      const int64_t groups = nchw ? C : 1, len = nchw ? pb.s * R : pb.s * R * C;
      const int64_t k_padded = packed_filter_k(pb), rows = C * R * pb.s;
      auto packed_at = [&](int64_t row, int64_t k) {
        return packed[size_t(((k / kCpuFilterBlock) * rows + row) * kCpuFilterBlock + k % kCpuFilterBlock)];
      };
      for (int64_t n = 0; n < pb.n; ++n)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q)
            for (int64_t k = 0; k < K; ++k) {
              double acc = 0;
              for (int64_t g = 0; g < groups; ++g) {
                const float* run = nchw ? win.data() + ((n * C + g) * P + p) * Wp * R + q * pb.stride_w * R
                                        : win.data() + ((n * P + p) * Wp + q * pb.stride_w) * R * C;
                for (int64_t j = 0; j < len; ++j) acc += double(run[j]) * packed_at(g * len + j, k);
              }
              const int64_t y = nchw ? ((n * K + k) * P + p) * Q + q : ((n * P + p) * Q + q) * K + k;
              ASSERT_NEAR(acc, ref[size_t(y)], 1e-9) << testing::describe(cfg);
            }
      // The padding past K is zeros.
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t k = K; k < k_padded; ++k) ASSERT_EQ(packed_at(row, k), 0.f);
    }
  }
}

// Every instruction set packs the same bits: AVX-512 transposes whole tiles of 16 weights x 16
// filters in registers, the others (and a last partial tile) move one float at a time. Weights per
// filter C*R*S around multiples of 16, K around the block halves, both layouts, poisoned buffers.
TEST(PackFilterCpu, EveryInstructionSetPacksTheSameBits) {
  std::mt19937_64 rng(23);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
    for (int64_t c : {1, 3, 5, 16, 11})
      for (int64_t k : {1, 15, 16, 17, 32, 40, 70}) {
        Conv2dConfig cfg;
        cfg.layout = layout;
        Conv2dProblem& pb = cfg.problem;
        pb.n = 1; pb.c = c; pb.h = 4; pb.w = 4; pb.k = k; pb.r = 1 + c % 3; pb.s = 3;
        const auto w = random_vector(size_t(pb.w_elements()), rng);
        std::vector<float> expected(size_t(packed_block_elements(pb)));
        for (int64_t block = 0; block < packed_filter_k(pb) / kCpuFilterBlock; ++block) {
          std::fill(expected.begin(), expected.end(), std::numeric_limits<float>::quiet_NaN());
          pack_filter_block_cpu(cfg, w.data(), expected.data(), block, CpuVectorIsa::kSse42);
          for (float v : expected) ASSERT_FALSE(std::isnan(v)) << testing::describe(cfg);  // every element written
          for (CpuVectorIsa isa : {CpuVectorIsa::kAvx2, CpuVectorIsa::kAvx512}) {
            if (!cpu_runs(isa)) continue;
            std::vector<float> got(expected.size(), std::numeric_limits<float>::quiet_NaN());
            pack_filter_block_cpu(cfg, w.data(), got.data(), block, isa);
            ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
                << testing::describe(cfg) << " block " << block << " " << cpu_isa_name(isa);
          }
        }
      }
}

class Conv2dCpuRandom : public ::testing::TestWithParam<int> {};

// Every row GEMM this CPU runs (SSE4.2, AVX2, AVX-512: register blocks of up to 6, 6 and 12 output
// columns and 8, 16 or 32 filters), on random K and output widths, so every column and filter tail
// is met.
TEST_P(Conv2dCpuRandom, MatchesReference) {
  std::mt19937_64 rng(1000 + GetParam());
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    const Conv2dConfig cfg = random_config(rng, layout);
    const Conv2dProblem& pb = cfg.problem;
    auto x = random_vector(size_t(pb.x_elements()), rng);
    auto w = random_vector(size_t(pb.w_elements()), rng);
    std::vector<double> ref(size_t(pb.y_elements()));
    ASSERT_TRUE(conv2d_reference(cfg, x.data(), w.data(), ref.data()).ok());
    for (CpuVectorIsa isa : {CpuVectorIsa::kSse42, CpuVectorIsa::kAvx2, CpuVectorIsa::kAvx512, CpuVectorIsa::kAuto}) {
      if (!cpu_runs(isa)) continue;
      std::vector<float> y(ref.size(), std::numeric_limits<float>::quiet_NaN());
      const Status st = conv2d_forward_cpu_isa(cfg, x.data(), w.data(), y.data(), 2, isa);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_LE(testing::relative_l2(y, ref), 1e-5) << testing::describe(cfg) << " " << cpu_isa_name(isa);
    }
  }
}

// cfg on every instruction set this CPU runs, each thread count and the task order given, against
// the FP64 reference, on random x and w, outputs poisoned.
void expect_every_isa_matches(const Conv2dConfig& cfg, std::mt19937_64& rng, std::initializer_list<int> thread_counts,
                              CpuTaskOrder order = CpuTaskOrder::kAuto) {
  const Conv2dProblem& pb = cfg.problem;
  const auto x = random_vector(size_t(pb.x_elements()), rng);
  const auto w = random_vector(size_t(pb.w_elements()), rng);
  std::vector<double> ref(size_t(pb.y_elements()));
  ASSERT_TRUE(conv2d_reference(cfg, x.data(), w.data(), ref.data()).ok());
  for (CpuVectorIsa isa : {CpuVectorIsa::kSse42, CpuVectorIsa::kAvx2, CpuVectorIsa::kAvx512}) {
    if (!cpu_runs(isa)) continue;
    for (int threads : thread_counts) {
      std::vector<float> y(ref.size(), std::numeric_limits<float>::quiet_NaN());
      ASSERT_TRUE(conv2d_forward_cpu_isa(cfg, x.data(), w.data(), y.data(), threads, isa, order).ok());
      EXPECT_LE(testing::relative_l2(y, ref), 1e-5) << testing::describe(cfg) << " " << cpu_isa_name(isa) << ", "
                                                    << threads << " threads, order " << int(order);
    }
  }
}

// A row of Q output columns runs as whole register blocks and a rest, which below half a block
// joins the last whole block and splits with it into two halves. Every Q from 1 to 40 (0 to 3
// whole blocks of 12, every rest of 12 and of 6), every instruction set, K = 40 (a partial last
// register block of filters for each set), both layouts.
TEST(Conv2dCpu, EveryRowWidthMatchesTheReference) {
  std::mt19937_64 rng(13);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
    for (int64_t q = 1; q <= 40; ++q) {
      Conv2dConfig cfg;
      cfg.layout = layout;
      Conv2dProblem& pb = cfg.problem;
      pb.n = 1; pb.c = 3; pb.h = 3; pb.w = q + 1; pb.k = 40; pb.r = 2; pb.s = 2;
      expect_every_isa_matches(cfg, rng, {1});
    }
}

constexpr CpuTaskOrder kEveryTaskOrder[] = {CpuTaskOrder::kFilterBlocksOuter, CpuTaskOrder::kRowsOuter,
                                            CpuTaskOrder::kRowsOuterWorkerWindows};

// Every task order (filter blocks or rows outermost, the latter also with the workers' own
// windows) with several filter blocks, every instruction set, on 1, 2 and 5 threads (with blocks
// outermost a thread packs each block its tasks meet, so a block split between two threads is
// packed by both; with own windows both build the row's window).
TEST(Conv2dCpu, BothTaskOrdersMatchTheReference) {
  std::mt19937_64 rng(11);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
    for (int64_t width : {20, 70})
      for (CpuTaskOrder order : kEveryTaskOrder) {
        Conv2dConfig cfg;
        cfg.layout = layout;
        Conv2dProblem& pb = cfg.problem;
        pb.n = 2; pb.c = 3; pb.h = 6; pb.w = width; pb.k = 70; pb.r = 3; pb.s = 2;
        expect_every_isa_matches(cfg, rng, {1, 2, 5}, order);
      }
}

// Rows of fewer than kCpuGroupedRowColumns columns run in groups of consecutive rows, a group's
// pixels taken as one row (register blocks then span row ends). Q = 1 to 9 (7 to 9 around the
// limit), P up to 9, stride 1 and 2, padding, both layouts, every task order (with own windows a
// worker's window holds a group's rows: groups of unequal row counts), 1, 2 and 3 threads.
TEST(Conv2dCpu, GroupedRowsMatchTheReference) {
  std::mt19937_64 rng(19);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
    for (int64_t q = 1; q <= 9; ++q)
      for (CpuTaskOrder order : kEveryTaskOrder) {
        Conv2dConfig cfg;
        cfg.layout = layout;
        Conv2dProblem& pb = cfg.problem;
        const int64_t stride = 1 + q % 2;
        pb.n = 2; pb.c = 5; pb.k = 40; pb.r = 3; pb.s = 2; pb.pad_h = 1; pb.pad_w = q % 3 == 0;
        pb.stride_h = pb.stride_w = stride;
        pb.w = (q - 1) * stride + pb.s - 2 * pb.pad_w;                   // Q = q
        pb.h = (2 + q) * stride + pb.r - 2 * pb.pad_h;                   // P = q + 3
        ASSERT_EQ(pb.q(), q);
        expect_every_isa_matches(cfg, rng, {1, 2, 3}, order);
      }
}

// Groups of about kCpuGroupPixels pixels below kCpuGroupedRowColumns columns, at least two tasks
// per thread where the rows allow, never more groups than rows.
TEST(Conv2dCpu, RowGroupRule) {
  Conv2dProblem pb;
  pb.n = 1; pb.c = 512; pb.h = 7; pb.w = 7; pb.k = 512; pb.r = 3; pb.s = 3;  // P = Q = 5, 16 blocks
  EXPECT_EQ(cpu_row_groups(pb, 2), 2);    // 25 pixels: two groups (2 and 3 rows)
  EXPECT_EQ(cpu_row_groups(pb, 16), 2);   // 16 blocks x 2 groups = 32 tasks for 16 threads
  EXPECT_EQ(cpu_row_groups(pb, 24), 3);   // 48 tasks wanted: 3 groups
  EXPECT_EQ(cpu_row_groups(pb, 1000), 5);  // never more than the rows
  pb.k = 32;
  EXPECT_EQ(cpu_row_groups(pb, 2), 4);    // one block: 4 tasks for two threads
  pb.w = 10;                              // Q = 8: a group per row
  EXPECT_EQ(cpu_row_groups(pb, 2), 5);
  pb.w = 9; pb.h = 30; pb.k = 512;        // Q = 7, P = 28: 196 pixels, 9 groups of about 24
  EXPECT_EQ(cpu_row_groups(pb, 2), 9);
}

// Rows outermost when the packed filter fits the budget, whatever W'; above it, filter blocks
// outermost while W' < 32 S.
TEST(Conv2dCpu, TaskOrderRule) {
  Conv2dProblem pb;
  pb.n = 1; pb.c = 3; pb.h = 10; pb.w = 9; pb.k = 40; pb.r = 3; pb.s = 3; pb.pad_w = 1;  // W' = 11 < 96
  const int64_t filter_bytes = 4 * 64 * 3 * 3 * 3;  // K padded to two blocks of 32
  EXPECT_EQ(cpu_task_order(pb, filter_bytes), CpuTaskOrder::kRowsOuter);
  EXPECT_EQ(cpu_task_order(pb, filter_bytes - 1), CpuTaskOrder::kFilterBlocksOuter);
  pb.w = 94;  // W' = 96 = 32 S
  EXPECT_EQ(cpu_task_order(pb, filter_bytes - 1), CpuTaskOrder::kRowsOuter);
  pb.w = 93;
  EXPECT_EQ(cpu_task_order(pb, filter_bytes - 1), CpuTaskOrder::kFilterBlocksOuter);
  EXPECT_GT(cpu_filter_cache_budget(), 0);
}

// Rows outermost takes the workers' own windows exactly where the whole window tensor would be
// larger than kCpuWorkerWindowsAboveBytes; filter blocks outermost keeps the tensor at any size.
TEST(Conv2dCpu, WorkerWindowsRule) {
  Conv2dProblem pb;
  pb.n = 1; pb.c = 1; pb.k = 1; pb.r = 4; pb.s = 1; pb.w = 1 << 10;
  const int64_t row_bytes = 4 * pb.w * pb.r;  // the window of one output row of the one channel
  pb.h = kCpuWorkerWindowsAboveBytes / row_bytes + pb.r - 1;  // P rows: exactly the limit
  ASSERT_EQ(4 * im2win_window_elements(pb), kCpuWorkerWindowsAboveBytes);
  EXPECT_EQ(cpu_task_order(pb, int64_t(1) << 20), CpuTaskOrder::kRowsOuter);
  pb.h += 1;
  EXPECT_EQ(cpu_task_order(pb, int64_t(1) << 20), CpuTaskOrder::kRowsOuterWorkerWindows);
  pb.w = 31;  // W' < 32 S and a filter over the budget: blocks outermost
  pb.h = kCpuWorkerWindowsAboveBytes;
  EXPECT_GT(4 * im2win_window_elements(pb), kCpuWorkerWindowsAboveBytes);
  EXPECT_EQ(cpu_task_order(pb, 0), CpuTaskOrder::kFilterBlocksOuter);
}

// The forward's own order past the window limit (19 MB of window, 0.3 MB extra in its place),
// both layouts, every instruction set, 1 and 2 threads, against the reference.
TEST(Conv2dCpu, AutoOrderPastTheWindowLimit) {
  std::mt19937_64 rng(23);
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    Conv2dConfig cfg;
    cfg.layout = layout;
    Conv2dProblem& pb = cfg.problem;
    pb.n = 1; pb.c = 2; pb.h = 1100; pb.w = 1100; pb.k = 3; pb.r = 2; pb.s = 1; pb.pad_w = 1;
    ASSERT_EQ(cpu_task_order(pb, cpu_filter_cache_budget()), CpuTaskOrder::kRowsOuterWorkerWindows);
    size_t bytes = 0;
    ASSERT_TRUE(conv2d_forward_cpu_extra_bytes(cfg, &bytes, 2).ok());
    EXPECT_LT(bytes, size_t(4 * im2win_window_elements(pb)) / 16);
    expect_every_isa_matches(cfg, rng, {1, 2});
  }
}

// The forward's own order (kAuto) on both sides of this CPU's budget: K = 96 (three blocks of
// packed filter) and C sized so that the filter just fits it, then just does not (W' < 32 S, so
// filter blocks outermost there), on two threads.
TEST(Conv2dCpu, AutoOrderOnBothSidesOfTheBudget) {
  std::mt19937_64 rng(17);
  const int64_t per_channel = 4 * 96 * 3 * 3;  // packed filter bytes per input channel
  const int64_t fitting = cpu_filter_cache_budget() / per_channel;
  for (int64_t c : {fitting, fitting + 1}) {
    Conv2dConfig cfg;
    cfg.layout = Layout::kNHWC;
    Conv2dProblem& pb = cfg.problem;
    pb.n = 1; pb.c = c; pb.h = 5; pb.w = 6; pb.k = 96; pb.r = 3; pb.s = 3;
    EXPECT_EQ(cpu_task_order(pb, cpu_filter_cache_budget()),
              c == fitting ? CpuTaskOrder::kRowsOuter : CpuTaskOrder::kFilterBlocksOuter);
    expect_every_isa_matches(cfg, rng, {2});
  }
}

TEST(Conv2dCpu, AutoTakesTheWidestInstructionSetTheCpuRuns) {
  const CpuVectorIsa widest = widest_cpu_isa();
  EXPECT_TRUE(cpu_runs(widest));
  EXPECT_NE(widest, CpuVectorIsa::kAuto);
  if (cpu_runs(CpuVectorIsa::kAvx512)) EXPECT_EQ(widest, CpuVectorIsa::kAvx512);
  else if (cpu_runs(CpuVectorIsa::kAvx2)) EXPECT_EQ(widest, CpuVectorIsa::kAvx2);
  else EXPECT_EQ(widest, CpuVectorIsa::kSse42);
  EXPECT_TRUE(cpu_runs(CpuVectorIsa::kSse42));  // the build's baseline
}

INSTANTIATE_TEST_SUITE_P(Seeds, Conv2dCpuRandom, ::testing::Range(0, 40));

// The GPU fuzz test's problem families (fuzz_config) on the CPU path, outputs poisoned with NaN,
// against the FP64 reference. WINCONV_FUZZ_CASES and WINCONV_FUZZ_SEED run a longer campaign.
TEST(Conv2dCpu, FuzzAgainstReference) {
  const int64_t cases = testing::fuzz_cases(6);
  const uint64_t seed = testing::fuzz_seed(2026);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < cases; ++i) {
    const Conv2dConfig cfg = testing::fuzz_config(rng, 2e7);
    const Conv2dProblem& pb = cfg.problem;
    const auto x = random_vector(size_t(pb.x_elements()), rng);
    const auto w = random_vector(size_t(pb.w_elements()), rng);
    std::vector<float> y(size_t(pb.y_elements()), std::numeric_limits<float>::quiet_NaN());
    std::vector<double> ref(y.size());
    ASSERT_TRUE(conv2d_reference(cfg, x.data(), w.data(), ref.data()).ok());
    const Status st = conv2d_forward_cpu(cfg, x.data(), w.data(), y.data(), 2);
    ASSERT_TRUE(st.ok()) << st.to_string() << " " << testing::describe(cfg);
    EXPECT_LE(testing::relative_l2(y, ref), 1e-5)
        << testing::describe(cfg) << " (fuzz case " << i << ", WINCONV_FUZZ_SEED " << seed << ")";
    if (HasFailure()) break;  // the first failing case is the one to read
  }
}

TEST(Conv2dCpu, PoisonedOutputIsDetected) {
  // The metric must fail on a NaN: a test that cannot fail proves nothing.
  std::vector<float> got = {1.f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<double> ref = {1.0, 2.0};
  EXPECT_FALSE(testing::relative_l2(got, ref) <= 1e-5);
}

// The oracle sums in double: 2^24 + 1 - 2^24 is 1 there and 0 in float.
TEST(Conv2dReference, AccumulatesInDouble) {
  Conv2dConfig cfg;
  cfg.problem.c = 3;
  const std::vector<float> x = {16777216.f, 1.f, -16777216.f}, w = {1.f, 1.f, 1.f};
  double y = 0;
  ASSERT_TRUE(conv2d_reference(cfg, x.data(), w.data(), &y).ok());
  EXPECT_EQ(y, 1.0);
}

// conv2d_reference_pixel (the big tests' spot checks) gives the full reference's values, exactly,
// and refuses pixels outside the output and null pointers.
TEST(Conv2dReference, PixelMatchesTheFullReference) {
  Conv2dConfig cfg;
  cfg.problem.n = 2; cfg.problem.c = 3; cfg.problem.h = 11; cfg.problem.w = 13; cfg.problem.k = 5;
  cfg.problem.r = 3; cfg.problem.s = 5; cfg.problem.stride_h = 2; cfg.problem.pad_h = 1; cfg.problem.pad_w = 2;
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    cfg.layout = layout;
    const Conv2dProblem& pb = cfg.problem;
    std::mt19937_64 rng(3);
    const auto x = random_vector(size_t(pb.x_elements()), rng), w = random_vector(size_t(pb.w_elements()), rng);
    std::vector<double> y(size_t(pb.y_elements())), yk(size_t(pb.k));
    ASSERT_TRUE(conv2d_reference(cfg, x.data(), w.data(), y.data()).ok());
    const int64_t P = pb.p(), Q = pb.q(), K = pb.k;
    for (int64_t n = 0; n < pb.n; ++n)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          ASSERT_TRUE(conv2d_reference_pixel(cfg, x.data(), w.data(), n, p, q, yk.data()).ok());
          for (int64_t k = 0; k < K; ++k) {
            const int64_t at = layout == Layout::kNCHW ? ((n * K + k) * P + p) * Q + q : ((n * P + p) * Q + q) * K + k;
            ASSERT_EQ(yk[size_t(k)], y[size_t(at)]) << n << " " << p << " " << q << " " << k;
          }
        }
    const int64_t outside[][3] = {{pb.n, 0, 0}, {0, P, 0}, {0, 0, Q}, {-1, 0, 0}, {0, -1, 0}, {0, 0, -1}};
    for (const auto& o : outside)
      EXPECT_EQ(conv2d_reference_pixel(cfg, x.data(), w.data(), o[0], o[1], o[2], yk.data()).code(),
                StatusCode::kInvalidArgument);
    EXPECT_EQ(conv2d_reference_pixel(cfg, x.data(), w.data(), 0, 0, 0, nullptr).code(), StatusCode::kNullPointer);
    EXPECT_EQ(conv2d_reference(cfg, x.data(), w.data(), nullptr).code(), StatusCode::kNullPointer);
    EXPECT_EQ(conv2d_reference(cfg, nullptr, w.data(), y.data()).code(), StatusCode::kNullPointer);
  }
}

// In a child process: the CPU path and the reference under an address-space limit that leaves no
// room for a thread stack, so every std::thread they start throws. They run before any thread of
// the process has been joined (no_room_for_threads.h; with the unlimited reference first, the
// reference's threads started on its cached stacks and its inline fallback went untested). Exit
// status 0 when both limited calls return Ok with the unlimited reference's results.
int run_without_room_for_threads(const Conv2dConfig& cfg) {
  std::mt19937_64 rng(5);
  const auto x = random_vector(size_t(cfg.problem.x_elements()), rng);
  const auto w = random_vector(size_t(cfg.problem.w_elements()), rng);
  std::vector<double> ref(size_t(cfg.problem.y_elements())), ref_limited(ref.size());
  std::vector<float> y(ref.size(), std::numeric_limits<float>::quiet_NaN());
  bool ok = false;
  {
    const testing::NoRoomForThreads limit;
    if (!limit.ok()) return 3;
    ok = conv2d_forward_cpu(cfg, x.data(), w.data(), y.data(), 64).ok() &&
         conv2d_reference(cfg, x.data(), w.data(), ref_limited.data()).ok();
  }
  if (!conv2d_reference(cfg, x.data(), w.data(), ref.data()).ok()) return 2;
  return ok && ref_limited == ref && testing::relative_l2(y, ref) <= 1e-5 ? 0 : 1;
}

// A thread that cannot be started (address space, process limits) must not end the process:
// its share of the work runs on the calling thread.
TEST(Conv2dCpuDeathTest, ThreadsThatCannotStartRunInline) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Conv2dConfig cfg;
  cfg.problem.n = 64; cfg.problem.c = 3; cfg.problem.h = 5; cfg.problem.w = 4;
  cfg.problem.k = 2; cfg.problem.r = 3; cfg.problem.s = 3; cfg.problem.pad_h = cfg.problem.pad_w = 1;
  EXPECT_EXIT(std::_Exit(run_without_room_for_threads(cfg)), ::testing::ExitedWithCode(0), "");
}

// Where a thread can start, the work runs on it (not inline, which would make the CPU paths
// serial without a word).
TEST(Conv2dCpu, StartOrRunInlineStartsAThreadWhenItCan) {
  std::vector<std::thread> pool;
  std::thread::id ran_on;
  start_or_run_inline(pool, [&] { ran_on = std::this_thread::get_id(); });
  ASSERT_EQ(pool.size(), 1u);
  for (auto& t : pool) t.join();
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

// The caller's workspace: sized by the extra-bytes query with the same threads, poisoned and
// reused across problems of both layouts and both task orders (one workspace for all, sized for the
// largest), the same bits as the call that allocates.
TEST(Conv2dCpu, CallerWorkspaceGivesTheAllocatingCallsBits) {
  std::mt19937_64 rng(11);
  std::vector<Conv2dConfig> configs;
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
    for (int draw = 0; draw < 4; ++draw) configs.push_back(random_config(rng, layout));
  Conv2dConfig deep;  // filter blocks outermost on any L2 (9.4 MB of filter, W' < 32 S)
  deep.problem.n = 1; deep.problem.c = 512; deep.problem.h = 7; deep.problem.w = 7;
  deep.problem.k = 512; deep.problem.r = 3; deep.problem.s = 3; deep.problem.pad_h = 1; deep.problem.pad_w = 1;
  configs.push_back(deep);
  Conv2dConfig wide;  // past the window limit: the workers' own windows in the caller's workspace
  wide.problem.n = 1; wide.problem.c = 2; wide.problem.h = 1100; wide.problem.w = 1100;
  wide.problem.k = 3; wide.problem.r = 2; wide.problem.s = 1;
  configs.push_back(wide);
  for (int threads : {1, 2, 3}) {
    size_t most = 0;
    for (const Conv2dConfig& cfg : configs) {
      size_t bytes = 0;
      ASSERT_TRUE(conv2d_forward_cpu_extra_bytes(cfg, &bytes, threads).ok());
      most = std::max(most, bytes);
    }
    std::vector<float> workspace(most / sizeof(float) + kCpuWorkspaceAlignment / sizeof(float),
                                 std::numeric_limits<float>::quiet_NaN());
    void* aligned = workspace.data();
    size_t space = workspace.size() * sizeof(float);
    ASSERT_NE(std::align(kCpuWorkspaceAlignment, most, aligned, space), nullptr);
    for (const Conv2dConfig& cfg : configs) {
      const Conv2dProblem& pb = cfg.problem;
      const auto x = random_vector(size_t(pb.x_elements()), rng);
      const auto w = random_vector(size_t(pb.w_elements()), rng);
      std::vector<float> want(size_t(pb.y_elements()), std::numeric_limits<float>::quiet_NaN()), got(want);
      ASSERT_TRUE(conv2d_forward_cpu(cfg, x.data(), w.data(), want.data(), threads).ok());
      size_t bytes = 0;
      ASSERT_TRUE(conv2d_forward_cpu_extra_bytes(cfg, &bytes, threads).ok());
      const Status st = conv2d_forward_cpu(cfg, x.data(), w.data(), got.data(), aligned, bytes, threads);
      ASSERT_TRUE(st.ok()) << st.to_string() << " " << testing::describe(cfg);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
          << testing::describe(cfg) << " threads " << threads;
      for (float v : got) ASSERT_FALSE(std::isnan(v)) << testing::describe(cfg);
    }
  }
}

// A workspace that is too small (by one byte, or sized for fewer threads than the call uses),
// null or misaligned is refused with its own code, and y is left as it was.
TEST(Conv2dCpu, CallerWorkspaceErrorsLeaveTheOutputUntouched) {
  Conv2dConfig cfg;  // filter blocks outermost: the packed filter held grows with the threads
  cfg.problem.n = 1; cfg.problem.c = 512; cfg.problem.h = 7; cfg.problem.w = 7;
  cfg.problem.k = 512; cfg.problem.r = 3; cfg.problem.s = 3; cfg.problem.pad_h = 1; cfg.problem.pad_w = 1;
  const Conv2dProblem& pb = cfg.problem;
  std::vector<float> x(size_t(pb.x_elements()), 1.f), w(size_t(pb.w_elements()), 1.f);
  std::vector<float> y(size_t(pb.y_elements()), -7.f);
  size_t one = 0, two = 0;
  ASSERT_TRUE(conv2d_forward_cpu_extra_bytes(cfg, &one, 1).ok());
  ASSERT_TRUE(conv2d_forward_cpu_extra_bytes(cfg, &two, 2).ok());
  ASSERT_GT(two, one);
  std::vector<float> storage(two / sizeof(float) + 2 * kCpuWorkspaceAlignment / sizeof(float));
  void* aligned = storage.data();
  size_t space = storage.size() * sizeof(float);
  ASSERT_NE(std::align(kCpuWorkspaceAlignment, two + kCpuWorkspaceAlignment, aligned, space), nullptr);
  auto call = [&](void* ws, size_t bytes, int threads) {
    return conv2d_forward_cpu(cfg, x.data(), w.data(), y.data(), ws, bytes, threads).code();
  };
  EXPECT_EQ(call(aligned, one - 1, 1), StatusCode::kWorkspaceTooSmall);
  EXPECT_EQ(call(aligned, one, 2), StatusCode::kWorkspaceTooSmall);
  EXPECT_EQ(call(nullptr, one, 1), StatusCode::kNullPointer);
  EXPECT_EQ(call(static_cast<char*>(aligned) + 16, one, 1), StatusCode::kMisalignedPointer);
  EXPECT_EQ(call(aligned, one, -1), StatusCode::kInvalidArgument);
  EXPECT_EQ(conv2d_forward_cpu(cfg, x.data(), w.data(), nullptr, aligned, one, 1).code(), StatusCode::kNullPointer);
  for (float v : y) ASSERT_EQ(v, -7.f);
  EXPECT_EQ(call(aligned, one, 1), StatusCode::kOk);
  EXPECT_EQ(y[0], float(512 * 4));  // the corner pixel: 2 x 2 of the window inside x, 512 channels
}

TEST(Conv2dCpu, ExtraBytesCountWindowAndFilter) {
  Conv2dConfig cfg;
  cfg.problem.n = 2; cfg.problem.c = 3; cfg.problem.h = 10; cfg.problem.w = 9;
  cfg.problem.k = 40; cfg.problem.r = 3; cfg.problem.s = 3; cfg.problem.pad_w = 1;
  const size_t window = 2 * 3 * 8 * 11 * 3, block = 32 * 3 * 3 * 3;  // K = 40: two blocks of 32
  size_t bytes = 0;
  // Filter blocks outermost: one block buffer per thread, at most one per task (2 blocks x 16
  // output rows).
  for (int threads : {1, 3, 32, 40}) {
    ASSERT_TRUE(conv2d_forward_cpu_extra_bytes_order(cfg, &bytes, threads, CpuTaskOrder::kFilterBlocksOuter).ok());
    EXPECT_EQ(bytes, 4u * (window + size_t(std::min(threads, 32)) * block)) << threads;
  }
  // Rows outermost: the whole packed filter whatever the threads.
  for (int threads : {1, 3}) {
    ASSERT_TRUE(conv2d_forward_cpu_extra_bytes_order(cfg, &bytes, threads, CpuTaskOrder::kRowsOuter).ok());
    EXPECT_EQ(bytes, 4u * (window + 2 * block)) << threads;
  }
  // With the workers' own windows: instead of the window tensor, one window of a GEMM row (one
  // output row here, Q = 9: C*W'*R = 99 floats, 396 bytes, 448 in whole 64-byte lines) per worker
  // with tasks (32 tasks: 2 blocks x 2 images x 8 rows).
  for (int threads : {1, 3, 40}) {
    ASSERT_TRUE(
        conv2d_forward_cpu_extra_bytes_order(cfg, &bytes, threads, CpuTaskOrder::kRowsOuterWorkerWindows).ok());
    EXPECT_EQ(bytes, 448u * size_t(std::min(threads, 32)) + 4u * 2 * block) << threads;
  }
  // The public count is that of the order the forward takes.
  for (int64_t width : {9, 95}) {
    cfg.problem.w = width;
    size_t by_order = 0;
    const CpuTaskOrder order = cpu_task_order(cfg.problem, cpu_filter_cache_budget());
    ASSERT_TRUE(conv2d_forward_cpu_extra_bytes(cfg, &bytes, 3).ok());
    ASSERT_TRUE(conv2d_forward_cpu_extra_bytes_order(cfg, &by_order, 3, order).ok());
    EXPECT_EQ(bytes, by_order) << width;
  }
  // The packed filter starts at the 64-byte boundary after the window: a window of 9 floats
  // (36 bytes) is followed by 28 bytes of padding.
  Conv2dConfig small;
  small.problem.n = 1; small.problem.c = 1; small.problem.h = 3; small.problem.w = 3;
  small.problem.k = 1; small.problem.r = 3; small.problem.s = 3;
  ASSERT_TRUE(conv2d_forward_cpu_extra_bytes_order(small, &bytes, 1, CpuTaskOrder::kRowsOuter).ok());
  EXPECT_EQ(bytes, 64u + 4u * 32 * 9);
  EXPECT_EQ(conv2d_forward_cpu_extra_bytes(cfg, &bytes, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(conv2d_forward_cpu_extra_bytes(cfg, nullptr).code(), StatusCode::kNullPointer);
}

}  // namespace
}  // namespace winconv
