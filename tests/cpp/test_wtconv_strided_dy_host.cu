// The 16-bit backward's level-2 read of a strided dy (load_block_ll_strided) against its
// definition, on the host: D is dy spread onto x's H x W grid, D(y, x) = dy[y / s][x / s] where s
// divides y and x, else zero, and G_1's block (qy, qx) holds the LL values of the four 2 x 2 pixel
// blocks of D's 4 x 4 pixels from (2 qy, 2 qx) on, zero outside the plane. Every block of a
// plane, planes of odd and even sizes, strides 2-6, the plane at a nonzero offset. No GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/wtconv/wtconv_common.cuh"

namespace winconv {
namespace wtconv_detail {
namespace {

// Pixels of dy, never zero, so that a zero in the result means a pixel left out.
float dy_value(int64_t i) { return 1.f + float(i % 251); }

// D(y, x) by its definition (pixels outside the plane are zero).
float spread(const std::vector<float>& dy, int64_t off, int H, int W, int Wo, int s, int y, int x) {
  if (y >= H || x >= W || y % s != 0 || x % s != 0) return 0.f;
  return dy[size_t(off + int64_t(y / s) * Wo + x / s)];
}

template <typename T>
void check_plane(int H, int W, int s) {
  const int Ho = (H + s - 1) / s, Wo = (W + s - 1) / s;
  const int64_t off = 3 * int64_t(Ho) * Wo;  // the fourth plane of a batch
  std::vector<float> dyf(size_t(off + int64_t(Ho) * Wo));
  std::vector<T> dy(dyf.size());
  for (size_t i = 0; i < dy.size(); ++i) {
    dy[i] = T(dy_value(int64_t(i)));
    dyf[i] = to_float(dy[i]);
  }
  const int hq = (H + 3) / 4 + 1, wq = (W + 3) / 4 + 1;  // one block row and column past the plane
  for (int qy = 0; qy < hq; ++qy)
    for (int qx = 0; qx < wq; ++qx) {
      LevelBlock blk;
      blk.off = off;
      blk.y = 2 * qy;
      blk.x = 2 * qx;
      blk.in = true;
      const float4 got = load_block_ll_strided(dy.data(), blk, H, W, Wo, s);
      float want[4];
      for (int b = 0; b < 4; ++b) {
        const int y = 4 * qy + 2 * (b / 2), x = 4 * qx + 2 * (b % 2);
        auto d = [&](int i, int j) { return spread(dyf, off, H, W, Wo, s, y + i, x + j); };
        want[b] = haar_ll(d(0, 0), d(0, 1), d(1, 0), d(1, 1));
      }
      SCOPED_TRACE(::testing::Message() << H << "x" << W << " s" << s << " block (" << qy << ", " << qx << ")");
      EXPECT_EQ(got.x, want[0]);
      EXPECT_EQ(got.y, want[1]);
      EXPECT_EQ(got.z, want[2]);
      EXPECT_EQ(got.w, want[3]);
    }
}

TEST(WtconvStridedDyHost, BlocksMatchTheSpreadDefinition) {
  const int sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 17, 24, 31};
  for (int s = 2; s <= 6; ++s)
    for (int H : sizes)
      for (int W : sizes) check_plane<float>(H, W, s);
  for (int s = 2; s <= 4; ++s) check_plane<__nv_bfloat16>(13, 10, s);
}

// A block outside the grid (blk.in false) or starting past the plane reads nothing.
TEST(WtconvStridedDyHost, BlocksOutsideAreZero) {
  const std::vector<float> dy(16, 1.f);
  LevelBlock blk{0, 4, 0, false};
  float4 v = load_block_ll_strided(dy.data(), blk, 8, 8, 4, 2);
  EXPECT_EQ(v.x + v.y + v.z + v.w, 0.f);
  blk = LevelBlock{0, 8, 0, true};  // pixel row 16 of an 8-row plane
  v = load_block_ll_strided(dy.data(), blk, 8, 8, 4, 2);
  EXPECT_EQ(v.x + v.y + v.z + v.w, 0.f);
}

}  // namespace
}  // namespace wtconv_detail
}  // namespace winconv
