// Shape math and every bad-input case of the conv2d API: each returns a precise Status.
#include <gtest/gtest.h>

#include <utility>

#include "winconv/conv2d.h"
#include "winconv/status.h"

namespace winconv {
namespace {

Conv2dConfig good() {
  Conv2dConfig cfg;
  cfg.problem = {};
  cfg.problem.n = 2; cfg.problem.c = 3; cfg.problem.h = 11; cfg.problem.w = 13;
  cfg.problem.k = 5; cfg.problem.r = 3; cfg.problem.s = 5;
  cfg.problem.stride_h = 2; cfg.problem.stride_w = 1; cfg.problem.pad_h = 1; cfg.problem.pad_w = 2;
  return cfg;
}

TEST(Conv2dShape, OutputSizes) {
  const Conv2dConfig cfg = good();
  EXPECT_EQ(cfg.problem.p(), (11 + 2 - 3) / 2 + 1);
  EXPECT_EQ(cfg.problem.q(), (13 + 4 - 5) / 1 + 1);
  EXPECT_DOUBLE_EQ(cfg.problem.flops(), 2.0 * 2 * 5 * 6 * 13 * 3 * 3 * 5);
  EXPECT_TRUE(conv2d_validate(cfg).ok());
}

struct BadCase {
  const char* what;
  void (*mutate)(Conv2dConfig&);
  StatusCode code;
  const char* message_part;
};

class Conv2dBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(Conv2dBadInput, RejectedWithPreciseError) {
  Conv2dConfig cfg = good();
  GetParam().mutate(cfg);
  const Status st = conv2d_validate(cfg);
  EXPECT_EQ(st.code(), GetParam().code) << st.to_string();
  EXPECT_NE(st.message().find(GetParam().message_part), std::string::npos) << st.to_string();
  size_t bytes = 0;
  EXPECT_EQ(conv2d_forward_workspace_size(cfg, &bytes).code(), GetParam().code);
  float dummy[4] = {};
  EXPECT_EQ(conv2d_forward(cfg, dummy, dummy, dummy, nullptr, 0, nullptr).code(), GetParam().code);
  EXPECT_EQ(conv2d_forward_cpu(cfg, dummy, dummy, dummy).code(), GetParam().code);
}

const BadCase kBadCases[] = {
    {"zero batch", [](Conv2dConfig& c) { c.problem.n = 0; }, StatusCode::kInvalidArgument, "n (batch) must be >= 1, got 0"},
    {"negative channels", [](Conv2dConfig& c) { c.problem.c = -3; }, StatusCode::kInvalidArgument, "c (input channels)"},
    {"zero height", [](Conv2dConfig& c) { c.problem.h = 0; }, StatusCode::kInvalidArgument, "h (input height)"},
    {"zero k", [](Conv2dConfig& c) { c.problem.k = 0; }, StatusCode::kInvalidArgument, "k (output channels)"},
    {"zero filter", [](Conv2dConfig& c) { c.problem.s = 0; }, StatusCode::kInvalidArgument, "s (filter width)"},
    {"zero stride", [](Conv2dConfig& c) { c.problem.stride_h = 0; }, StatusCode::kInvalidArgument, "stride_h must be >= 1, got 0"},
    {"negative pad", [](Conv2dConfig& c) { c.problem.pad_w = -1; }, StatusCode::kInvalidArgument, "padding must be >= 0"},
    {"negative pad_h", [](Conv2dConfig& c) { c.problem.pad_h = -1; }, StatusCode::kInvalidArgument, "padding must be >= 0"},
    {"filter taller than input", [](Conv2dConfig& c) { c.problem.r = 14; }, StatusCode::kInvalidArgument, "output height would be < 1"},
    {"filter wider than input", [](Conv2dConfig& c) { c.problem.s = 18; }, StatusCode::kInvalidArgument, "output width would be < 1"},
    {"dilation", [](Conv2dConfig& c) { c.problem.dilation_h = 2; }, StatusCode::kUnsupported, "dilation other than 1"},
    {"dilation_w", [](Conv2dConfig& c) { c.problem.dilation_w = 2; }, StatusCode::kUnsupported, "dilation other than 1"},
    {"groups", [](Conv2dConfig& c) { c.problem.groups = 3; }, StatusCode::kUnsupported, "groups other than 1"},
    {"fp16", [](Conv2dConfig& c) { c.precision = Precision::kFP16; }, StatusCode::kUnsupported, "precision fp16"},
    // Out-of-range enum values (a cast int): NHWC was assumed for any layout but NCHW, and an unknown
    // algorithm reached a GPU kernel with no reduction table.
    {"layout out of range", [](Conv2dConfig& c) { c.layout = static_cast<Layout>(7); }, StatusCode::kInvalidArgument,
     "layout must be kNCHW or kNHWC, got 7"},
    {"algo out of range", [](Conv2dConfig& c) { c.algo = static_cast<Conv2dAlgo>(9); }, StatusCode::kInvalidArgument,
     "algo must be kAuto, kMaterialized or kOnChip, got 9"},
    {"huge image", [](Conv2dConfig& c) { c.problem.c = 1 << 16; c.problem.h = 1 << 8; c.problem.w = 1 << 8; },
     StatusCode::kIndexOverflow, "one input image c*h*w exceeds 2^31-1"},
    {"huge gemm M", [](Conv2dConfig& c) { c.problem.n = int64_t(1) << 28; }, StatusCode::kIndexOverflow, "GEMM M"},
    {"gemm K at the int32 limit", [](Conv2dConfig& c) { c.problem.c = (int64_t(1) << 31) - 2; c.problem.h = 1; c.problem.w = 1;
                                                         c.problem.r = 1; c.problem.s = 1; c.problem.k = 1;
                                                         c.problem.pad_h = 0; c.problem.pad_w = 0; },
     StatusCode::kIndexOverflow, "exceeds 2^31-16"},
    {"k at the int32 limit", [](Conv2dConfig& c) { c.problem = {}; c.problem.k = (int64_t(1) << 31) - 3; },
     StatusCode::kIndexOverflow, "exceeds 2^31-4"},
    {"padding past the int32 range", [](Conv2dConfig& c) { c.problem = {}; c.problem.pad_h = int64_t(1) << 30;
                                                            c.problem.stride_h = int64_t(1) << 30; },
     StatusCode::kIndexOverflow, "the padded input h+2*pad_h"},
    {"huge dimension", [](Conv2dConfig& c) { c.problem.w = int64_t(1) << 40; }, StatusCode::kIndexOverflow, "exceeds the supported maximum"},
    {"stride one past int32", [](Conv2dConfig& c) { c.problem.stride_w = int64_t(1) << 31; }, StatusCode::kIndexOverflow,
     "exceeds the supported maximum"},
    // c*h*w exactly 2^31 (the tightest image the bound must refuse; c*p*w'*r is smaller at stride 2).
    {"image of 2^31 elements", [](Conv2dConfig& c) { c.problem = {}; c.problem.c = 1 << 15; c.problem.h = 2;
                                                      c.problem.w = 1 << 15; c.problem.stride_h = 2;
                                                      c.problem.stride_w = 1 << 15; },
     StatusCode::kIndexOverflow, "one input image c*h*w"},
    {"gemm K one past its limit", [](Conv2dConfig& c) { c.problem = {}; c.problem.c = (int64_t(1) << 31) - 15; },
     StatusCode::kIndexOverflow, "exceeds 2^31-16"},
    {"x bytes overflowing int64", [](Conv2dConfig& c) { c.problem = {}; c.problem.n = (int64_t(1) << 31) - 1;
                                                         c.problem.h = (int64_t(1) << 31) - 1;
                                                         c.problem.stride_h = (int64_t(1) << 31) - 1; },
     StatusCode::kIndexOverflow, "the byte size of x overflows 64 bits"},
    {"product overflowing int64", [](Conv2dConfig& c) { c.problem.n = (int64_t(1) << 31) - 1; c.problem.c = (int64_t(1) << 31) - 1; },
     StatusCode::kIndexOverflow, "exceeds 2^31-1"},
};

INSTANTIATE_TEST_SUITE_P(AllCases, Conv2dBadInput, ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           std::string name = info.param.what;
                           for (char& ch : name)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

TEST(Conv2dBadPointers, CpuPathRejectsNulls) {
  const Conv2dConfig cfg = good();
  float buf[8] = {};
  EXPECT_EQ(conv2d_forward_cpu(cfg, nullptr, buf, buf).code(), StatusCode::kNullPointer);
  EXPECT_EQ(conv2d_forward_cpu(cfg, buf, nullptr, buf).code(), StatusCode::kNullPointer);
  EXPECT_EQ(conv2d_forward_cpu(cfg, buf, buf, nullptr).code(), StatusCode::kNullPointer);
  EXPECT_EQ(conv2d_forward_cpu(cfg, buf, buf, buf, -1).code(), StatusCode::kInvalidArgument);
  size_t* null_bytes = nullptr;
  EXPECT_EQ(conv2d_forward_workspace_size(cfg, null_bytes).code(), StatusCode::kNullPointer);
  // The GPU entry point checks its pointers before it looks for a device, in every build.
  EXPECT_EQ(conv2d_forward(cfg, nullptr, buf, buf, nullptr, 0, nullptr).code(), StatusCode::kNullPointer);
  EXPECT_EQ(conv2d_forward(cfg, buf, buf, nullptr, nullptr, 0, nullptr).code(), StatusCode::kNullPointer);
}

// The limits above are exact: one step inside each is valid.
TEST(Conv2dShape, LimitsAreExact) {
  Conv2dConfig c = good();
  c.problem.stride_w = (int64_t(1) << 31) - 1;
  EXPECT_TRUE(conv2d_validate(c).ok()) << conv2d_validate(c).to_string();
  c.problem = {};
  c.problem.c = (1 << 15) - 1; c.problem.h = 2; c.problem.w = 1 << 15; c.problem.stride_h = 2; c.problem.stride_w = 1 << 15;
  EXPECT_TRUE(conv2d_validate(c).ok()) << conv2d_validate(c).to_string();
  c.problem = {};
  c.problem.c = (int64_t(1) << 31) - 16;
  EXPECT_TRUE(conv2d_validate(c).ok()) << conv2d_validate(c).to_string();
}

// Pointer alignment is checked before a device is looked for, in every build.
TEST(Conv2dBadPointers, MisalignedRejectedBeforeTheDevice) {
  const Conv2dConfig cfg = good();
  alignas(16) static float buf[16];
  Status st = conv2d_forward(cfg, buf + 1, buf, buf, nullptr, 0, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kMisalignedPointer) << st.to_string();
  EXPECT_NE(st.message().find("x must be aligned to 16 bytes"), std::string::npos) << st.to_string();
  EXPECT_EQ(conv2d_forward(cfg, buf, buf + 2, buf, nullptr, 0, nullptr).code(), StatusCode::kMisalignedPointer);
  EXPECT_EQ(conv2d_forward(cfg, buf, buf, buf + 2, nullptr, 0, nullptr).code(), StatusCode::kMisalignedPointer);
}

TEST(Conv2dAlgoChoice, AutoResolvesToOnChip) {
  Conv2dConfig cfg = good();
  Conv2dAlgo a = Conv2dAlgo::kMaterialized;
  ASSERT_TRUE(conv2d_select_algo(cfg, &a).ok());
  EXPECT_EQ(a, Conv2dAlgo::kOnChip);
  cfg.algo = Conv2dAlgo::kMaterialized;
  a = Conv2dAlgo::kAuto;
  ASSERT_TRUE(conv2d_select_algo(cfg, &a).ok());
  EXPECT_EQ(a, Conv2dAlgo::kMaterialized);
  EXPECT_EQ(conv2d_select_algo(cfg, nullptr).code(), StatusCode::kNullPointer);
}

// Every name of every enum value (the names are the result files' and the C surface's).
TEST(Conv2dNames, EveryEnumValueHasItsName) {
  EXPECT_STREQ(layout_name(Layout::kNCHW), "nchw");
  EXPECT_STREQ(layout_name(Layout::kNHWC), "nhwc");
  EXPECT_STREQ(precision_name(Precision::kFP32), "fp32");
  EXPECT_STREQ(precision_name(Precision::kFP16), "fp16");
  EXPECT_STREQ(precision_name(Precision::kBF16), "bf16");
  EXPECT_STREQ(algo_name(Conv2dAlgo::kAuto), "auto");
  EXPECT_STREQ(algo_name(Conv2dAlgo::kMaterialized), "materialized");
  EXPECT_STREQ(algo_name(Conv2dAlgo::kOnChip), "onchip");
  EXPECT_EQ(precision_bytes(Precision::kFP32), 4u);
  EXPECT_EQ(precision_bytes(Precision::kFP16), 2u);
  EXPECT_EQ(precision_bytes(Precision::kBF16), 2u);
}

// Every status code's name, and the texts of an Ok and an error status.
TEST(Conv2dNames, EveryStatusCodeHasItsName) {
  const std::pair<StatusCode, const char*> names[] = {
      {StatusCode::kOk, "Ok"},
      {StatusCode::kInvalidArgument, "InvalidArgument"},
      {StatusCode::kUnsupported, "Unsupported"},
      {StatusCode::kNullPointer, "NullPointer"},
      {StatusCode::kMisalignedPointer, "MisalignedPointer"},
      {StatusCode::kWorkspaceTooSmall, "WorkspaceTooSmall"},
      {StatusCode::kIndexOverflow, "IndexOverflow"},
      {StatusCode::kNoDevice, "NoDevice"},
      {StatusCode::kCudaError, "CudaError"},
      {StatusCode::kOutOfMemory, "OutOfMemory"},
  };
  for (const auto& [code, name] : names) EXPECT_STREQ(status_code_name(code), name);
  EXPECT_EQ(Status().to_string(), "Ok");
  EXPECT_EQ(Status::Ok().to_string(), "Ok");
  EXPECT_EQ(Status(StatusCode::kNullPointer, "x is null").to_string(), "NullPointer: x is null");
}

// Valid arguments in a build without CUDA: kNoDevice from both entry points (test_wtconv_cpu
// takes whatever code conv2d reports there, so it cannot tell).
TEST(Conv2dNoCuda, ValidCallsReportNoDevice) {
#if WINCONV_HAVE_CUDA
  GTEST_SKIP() << "CUDA build";
#else
  Conv2dConfig cfg;
  cfg.problem.n = 1; cfg.problem.c = 3; cfg.problem.h = 8; cfg.problem.w = 8;
  cfg.problem.k = 4; cfg.problem.r = 3; cfg.problem.s = 3;
  size_t bytes = 0;
  const Status ws = conv2d_forward_workspace_size(cfg, &bytes);
  EXPECT_EQ(ws.code(), StatusCode::kNoDevice) << ws.to_string();
  EXPECT_NE(ws.message().find("without CUDA"), std::string::npos) << ws.to_string();
  alignas(16) static float buf[1024];
  EXPECT_EQ(conv2d_forward(cfg, buf, buf, buf, nullptr, 0, nullptr).code(), StatusCode::kNoDevice);
#endif
}

}  // namespace
}  // namespace winconv
