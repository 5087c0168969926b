// winconv-bench's result files: the CSV format of DESIGN.md, the summary's geometric means, which
// count a layer variant (conv4c32 of conv4) out but not conv10 of conv1, and a summary of the CPU
// path, which has no baselines and times differently.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

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

}  // namespace
}  // namespace winconv::bench
