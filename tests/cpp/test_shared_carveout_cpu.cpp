// The GEMM launches' shared-memory carveout (src/cuda/common/shared_carveout.h): the smallest
// percent whose split still holds every resident block.
#include <gtest/gtest.h>

#include "cuda/common/shared_carveout.h"

namespace winconv {
namespace {

constexpr int kH100SmemPerSm = 233472;  // 228 KB, sm_90
constexpr int kReserved = 1024;         // the runtime's share per block on sm_90

TEST(SharedCarveout, TwoBlocksOfTheWideTile) {
  // 128x128: four stages of 16 x (128 + 128) floats, 64 KB; two blocks per SM -> 130 KB of 228.
  EXPECT_EQ(carveout_percent(2, 65536, kReserved, kH100SmemPerSm), 58);
}

TEST(SharedCarveout, NothingToFitLeavesTheDriversChoice) {
  EXPECT_EQ(carveout_percent(0, 65536, kReserved, kH100SmemPerSm), -1);
  EXPECT_EQ(carveout_percent(2, 65536, kReserved, 0), -1);
  EXPECT_EQ(carveout_percent(2, -1, kReserved, kH100SmemPerSm), -1);
}

TEST(SharedCarveout, AtMostAllOfIt) {
  EXPECT_EQ(carveout_percent(4, 57344, kReserved, kH100SmemPerSm), 100);  // 4 x 57 KB = exactly 228 KB
  EXPECT_EQ(carveout_percent(8, 65536, kReserved, kH100SmemPerSm), 100);
  EXPECT_EQ(carveout_percent(1 << 20, 1 << 20, kReserved, kH100SmemPerSm), 100);  // no overflow
}

TEST(SharedCarveout, SmallestPercentThatHoldsTheBlocks) {
  for (int blocks = 1; blocks <= 32; ++blocks)
    for (int smem = 0; smem <= 96 * 1024; smem += 512) {
      const int pct = carveout_percent(blocks, smem, kReserved, kH100SmemPerSm);
      const int64_t need = int64_t(blocks) * (smem + kReserved);
      ASSERT_GE(pct, 1);
      ASSERT_LE(pct, 100);
      if (need >= kH100SmemPerSm) {
        ASSERT_EQ(pct, 100);
        continue;
      }
      ASSERT_GE(int64_t(pct) * kH100SmemPerSm, need * 100) << blocks << " x " << smem;
      ASSERT_LT(int64_t(pct - 1) * kH100SmemPerSm, need * 100) << blocks << " x " << smem;
    }
}

}  // namespace
}  // namespace winconv
