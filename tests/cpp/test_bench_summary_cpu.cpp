// winconv-bench's result files: the CSV format of DESIGN.md, the summary's geometric means, which
// count a layer variant (conv4c32 of conv4) out but not conv10 of conv1, and a summary of the CPU
// path, which has no baselines and times differently.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"

namespace winconv::bench {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ResultRow row(const std::string& layer, const std::string& impl, double tflops, size_t extra = 0) {
  ResultRow r{layer, "fp32", "nchw", impl};
  r.ms = 1.0 / tflops;
  r.tflops = tflops;
  r.extra_bytes = extra;
  r.rel_err = 1e-7;
  return r;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string l; std::getline(is, l);) out.push_back(l);
  return out;
}

// parse_options on winconv-bench's arguments `args`.
bool parse(std::vector<std::string> args, Options* opt, int* code) {
  args.insert(args.begin(), "winconv-bench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_options(int(argv.size()), argv.data(), opt, code);
}

TEST(BenchSummary, CsvHeaderAndGeomeanOverNonVariants) {
  Options opt;
  opt.out_dir = ::testing::TempDir() + "winconv_bench_summary";
  std::vector<ResultRow> rows = {
      row("conv1", "winconv", 20), row("conv1", "cudnn_best", 10),    // 2x
      row("conv10", "winconv", 40), row("conv10", "cudnn_best", 5),   // 8x: counts
      row("conv4", "winconv", 30), row("conv4", "cudnn_best", 30),    // 1x
      row("conv4c32", "winconv", 1), row("conv4c32", "cudnn_best", 100),  // variant: excluded
  };
  ResultRow skipped = row("conv1", "im2col_cublas", 1);
  skipped.skipped = "not built";
  rows.push_back(skipped);
  std::string error;
  ASSERT_TRUE(write_results(opt, {"test device", "median of 30 launches (test timing)"}, rows, &error)) << error;

  const std::string csv = read(opt.out_dir + "/conv2d.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "layer,precision,layout,impl,ms,tflops,extra_bytes,rel_err");
  EXPECT_EQ(csv.find("im2col_cublas"), std::string::npos) << "skipped rows stay out of conv2d.csv";

  const std::string md = read(opt.out_dir + "/conv2d_summary.md");
  EXPECT_NE(md.find("| conv4c32 (variant) |"), std::string::npos);
  EXPECT_EQ(md.find("conv10 (variant)"), std::string::npos);
  // geomean of 2, 8 and 1 = 2.52
  char want[64];
  std::snprintf(want, sizeof want, "cudnn_best %.3f (3 layers)", std::cbrt(16.0));
  EXPECT_NE(md.find(want), std::string::npos) << md;
  EXPECT_NE(md.find("conv1 fp32 nchw im2col_cublas: not built"), std::string::npos);
  EXPECT_NE(md.find("test device  \ncommit unknown, batch default, median of 30 launches (test timing), TFLOPS"),
            std::string::npos)
      << md;
  // cudnn_best ran; cudnn_implicit never did, and im2col_cublas only as a skipped row: no columns.
  EXPECT_NE(md.find("| winconv/cudnn_best |"), std::string::npos);
  EXPECT_EQ(md.find("winconv/cudnn_implicit"), std::string::npos) << md;
  EXPECT_EQ(md.find("winconv/im2col"), std::string::npos) << md;
}

TEST(BenchSummary, CpuPathWithoutBaselines) {
  Options opt;
  opt.out_dir = ::testing::TempDir() + "winconv_bench_summary_cpu";
  std::vector<ResultRow> rows = {row("conv1", "winconv", 0.012345), row("conv2", "winconv", 0.0008)};
  std::string error;
  ASSERT_TRUE(write_results(opt, {"CPU path (2 hardware threads)", "median of 3 runs (host steady clock)"}, rows,
                            &error))
      << error;
  const std::string md = read(opt.out_dir + "/conv2d_summary.md");
  EXPECT_NE(md.find("median of 3 runs (host steady clock)"), std::string::npos) << md;
  EXPECT_EQ(md.find("CUDA events"), std::string::npos) << md;
  EXPECT_EQ(md.find("nan"), std::string::npos) << md;
  EXPECT_EQ(md.find("Geometric means"), std::string::npos) << md;
  EXPECT_NE(md.find("No baseline ran in this group"), std::string::npos) << md;
  EXPECT_NE(md.find("| conv1 | 0.01235 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| conv2 | 0.0008 |"), std::string::npos) << md;
  const std::string csv = read(opt.out_dir + "/conv2d.csv");
  EXPECT_NE(csv.find(",winconv,81.0045,0.01235,0,"), std::string::npos) << csv;
}

TEST(BenchSummary, RateText) {
  EXPECT_EQ(tflops_text(40.544), "40.54");
  EXPECT_EQ(tflops_text(1.0), "1.00");
  EXPECT_EQ(tflops_text(0.98765), "0.9877");
  EXPECT_EQ(tflops_text(0.00123456), "0.001235");
}

TEST(BenchSummary, RelativeL2FailsOnNaN) {
  EXPECT_TRUE(std::isinf(relative_l2({1.0, std::nan("")}, {1.0, 2.0})));
  EXPECT_NEAR(relative_l2({1.0, 2.0}, {1.0, 2.0}), 0.0, 0.0);
}

// The median of an unsorted sample, and of an even one (the mean of the middle two).
TEST(BenchSummary, MedianOfUnsortedAndEvenSamples) {
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({5.0}), 5.0);
  EXPECT_TRUE(std::isnan(median({})));
}

// The ratio of L2 norms; an all-zero reference never passes.
TEST(BenchSummary, RelativeL2IsTheL2NormRatio) {
  EXPECT_NEAR(relative_l2({3.3, 4.4}, {3.0, 4.0}), 0.1, 1e-12);
  EXPECT_TRUE(std::isinf(relative_l2({0.0, 0.0}, {0.0, 0.0})));
  EXPECT_TRUE(std::isinf(relative_l2({1.0}, {0.0})));
}

// The exact rows of both CSV files (rel_err in %.3e, extra and peak bytes in their columns).
TEST(BenchSummary, CsvRowsCarryEveryColumnInOrder) {
  Options opt;
  opt.out_dir = ::testing::TempDir() + "winconv_bench_gap_csv";
  ResultRow r = row("conv1", "winconv", 20.0, 123);
  r.peak_bytes = 456;
  r.rel_err = 2.5e-7;
  r.detail = "onchip 128x128";
  std::string error;
  ASSERT_TRUE(write_results(opt, {"dev", "timing"}, {r}, &error)) << error;
  const auto csv = lines(read(opt.out_dir + "/conv2d.csv"));
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_EQ(csv[1], "conv1,fp32,nchw,winconv,0.0500,20.00,123,2.500e-07");
  const auto detail = lines(read(opt.out_dir + "/conv2d_detail.csv"));
  ASSERT_EQ(detail.size(), 2u);
  EXPECT_EQ(detail[0], "layer,precision,layout,impl,ms,tflops,extra_bytes,peak_bytes,rel_err,detail,skipped");
  EXPECT_EQ(detail[1], "conv1,fp32,nchw,winconv,0.0500,20.00,123,456,2.500e-07,\"onchip 128x128\",\"\"");
}

// The summary table with im2col + cuBLAS: the extra-bytes ratio winconv / im2col (none where
// im2col reports no extra bytes), the separator row's columns, and '-' for skipped rows.
TEST(BenchSummary, Im2colColumnsAndSkippedCells) {
  Options opt;
  opt.out_dir = ::testing::TempDir() + "winconv_bench_gap_im2col";
  std::vector<ResultRow> rows = {row("conv1", "winconv", 20, 100), row("conv1", "cudnn_best", 10),
                                 row("conv1", "im2col_cublas", 5, 400), row("conv2", "winconv", 8, 100),
                                 row("conv2", "cudnn_best", 8), row("conv2", "im2col_cublas", 4, 0)};
  ResultRow skipped = row("conv3", "cudnn_best", 3);
  skipped.skipped = "no algorithm";
  rows.push_back(row("conv3", "winconv", 6, 100));
  rows.push_back(skipped);
  std::string error;
  ASSERT_TRUE(write_results(opt, {"dev", "timing"}, rows, &error)) << error;
  const std::string md = read(opt.out_dir + "/conv2d_summary.md");
  // 3 implementations, 2 ratio columns, 1 extra-bytes column.
  EXPECT_NE(md.find("| layer | winconv | cudnn_best | im2col_cublas | winconv/cudnn_best | winconv/im2col_cublas |"
                    " extra bytes winconv/im2col |\n|---|---|---|---|---|---|---|\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| conv1 | 20.00 | 10.00 | 5.00 | 2.00x | 4.00x | 0.250 |\n"), std::string::npos) << md;
  // im2col_cublas with no extra bytes: no ratio.
  EXPECT_NE(md.find("| conv2 | 8.00 | 8.00 | 4.00 | 1.00x | 2.00x | - |\n"), std::string::npos) << md;
  // A skipped row shows '-' and gives no ratio.
  EXPECT_NE(md.find("| conv3 | 6.00 | - | - | - | - | - |\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("inf"), std::string::npos) << md;
}

// A given batch is printed, 1 included (the CPU path's).
TEST(BenchSummary, SummaryHeaderNamesAGivenBatch) {
  Options opt;
  opt.out_dir = ::testing::TempDir() + "winconv_bench_gap_batch";
  opt.batch = 1;
  opt.commit = "abc123";
  std::string error;
  ASSERT_TRUE(write_results(opt, {"dev", "t"}, {row("conv1", "winconv", 1)}, &error)) << error;
  EXPECT_NE(read(opt.out_dir + "/conv2d_summary.md").find("commit abc123, batch 1, t,"), std::string::npos);
}

// The options' limits are exact: --reps 20 accepted, 19 refused; a batch < 1 refused.
TEST(BenchSummary, OptionLimitsAreExact) {
  Options opt;
  int code = -1;
  EXPECT_TRUE(parse({}, &opt, &code));
  EXPECT_EQ(code, 0);
  EXPECT_EQ(opt.batch, -1);
  opt = Options();
  EXPECT_TRUE(parse({"--reps", "20", "--batch", "1", "--check-pixels", "1"}, &opt, &code));
  EXPECT_EQ(opt.reps, 20);
  EXPECT_TRUE(opt.reps_given);
  EXPECT_EQ(opt.batch, 1);
  opt = Options();
  EXPECT_FALSE(parse({"--reps", "19"}, &opt, &code));
  EXPECT_EQ(code, 2);
  opt = Options();
  EXPECT_FALSE(parse({"--batch", "0"}, &opt, &code));
  EXPECT_EQ(code, 2);
  opt = Options();
  EXPECT_FALSE(parse({"--batch", "-2"}, &opt, &code));
  EXPECT_EQ(code, 2);
}

// A layer table row maps to the problem field by field; a row with a tenth field is refused.
TEST(BenchSummary, LayerTableRowsMapToProblems) {
  const std::string path = ::testing::TempDir() + "winconv_bench_gap_layers.csv";
  {
    std::ofstream f(path);
    f << "# comment\nname,C,H,W,K,R,S,stride,pad\nconvA,3,224,225,64,7,5,2,3\n";
  }
  Options opt;
  opt.layers_file = path;
  std::string error;
  const auto layers = load_layers(opt, &error);
  ASSERT_EQ(layers.size(), 1u) << error;
  const Conv2dConfig cfg = make_config(layers[0], 8, Precision::kFP32, Layout::kNHWC);
  const Conv2dProblem& pb = cfg.problem;
  // n, c, h, w, k, r, s, stride h and w, pad h and w
  EXPECT_EQ(std::vector<int64_t>({pb.n, pb.c, pb.h, pb.w, pb.k, pb.r, pb.s, pb.stride_h, pb.stride_w, pb.pad_h, pb.pad_w}),
            std::vector<int64_t>({8, 3, 224, 225, 64, 7, 5, 2, 2, 3, 3}));
  EXPECT_EQ(cfg.layout, Layout::kNHWC);
  {
    std::ofstream f(path);
    f << "convA,3,224,224,64,7,7,2,3,9\n";  // ten fields
  }
  error.clear();
  EXPECT_TRUE(load_layers(opt, &error).empty());
  EXPECT_NE(error.find("bad line"), std::string::npos) << error;
}

}  // namespace
}  // namespace winconv::bench
