// The base kernels' plane staging (StagedRegion, the kPlane instances) against the whole-tile
// staging it replaces, on the host: for every plane that one tile holds, the tile the generic
// staging fills (every slot loaded, zero outside the plane) must equal the one kPlane fills (zeros
// once, then the staged region from the plane), and the Haar blocks kPlane forms per item must be
// every block with a pixel of the plane (the others are Haar blocks of zeros). Tiles from the plan,
// for the forward (x tile) and the backward (pixel tiles), kernel sizes 1-15, strides 1-3. No GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/wtconv/wtconv_plan.h"
#include "cuda/wtconv/wtconv_quad_staging.cuh"
#include "cuda/wtconv/wtconv_staging.cuh"

namespace winconv {
namespace wtconv_detail {
namespace {

// Pixel (y, x) of the test plane, never zero inside it.
float pixel(int y, int x) { return 1.f + float(y * 97 + x); }

// The generic staging: tile slot (ty, tx) holds plane pixel (ty - 2 r, tx - 2 r) or zero.
std::vector<float> whole_tile(int H, int W, int r, int rows, int cols) {
  std::vector<float> t(size_t(rows) * cols, 0.f);
  for (int ty = 0; ty < rows; ++ty)
    for (int tx = 0; tx < cols; ++tx) {
      const int y = ty - 2 * r, x = tx - 2 * r;
      if (y >= 0 && x >= 0 && y < H && x < W) t[size_t(ty) * cols + tx] = pixel(y, x);
    }
  return t;
}

// kPlane: zeros, then the staged region at (off, off); marks the Haar blocks it forms.
std::vector<float> plane_tile(int H, int W, int r, int rows, int cols, std::vector<char>* formed) {
  const StagedRegion sr = staged_region(true, H, W, r, rows, cols);
  EXPECT_TRUE(sr.plane);
  EXPECT_EQ(sr.off, 2 * r);
  std::vector<float> t(size_t(rows) * cols, 0.f);
  for (int y = 0; y < sr.rows; ++y)
    for (int x = 0; x < sr.cols; ++x) {
      const int ty = sr.off + y, tx = sr.off + x;
      EXPECT_LT(ty, rows);
      EXPECT_LT(tx, cols);
      if (ty < rows && tx < cols) t[size_t(ty) * cols + tx] = pixel(y, x);
    }
  formed->assign(size_t(rows / 2) * (cols / 2), 0);
  for (int by = 0; by < sr.brows; ++by)
    for (int bx = 0; bx < sr.bcols; ++bx) {
      const int y = sr.off / 2 + by, x = sr.off / 2 + bx;
      EXPECT_LT(y, rows / 2);
      EXPECT_LT(x, cols / 2);
      if (y < rows / 2 && x < cols / 2) (*formed)[size_t(y) * (cols / 2) + x] = 1;
    }
  return t;
}

void check(int H, int W, int r, int rows, int cols, const char* what) {
  std::vector<char> formed;
  const std::vector<float> want = whole_tile(H, W, r, rows, cols);
  ASSERT_EQ(plane_tile(H, W, r, rows, cols, &formed), want) << what << " " << H << "x" << W << " r" << r;
  for (int by = 0; by < rows / 2; ++by)
    for (int bx = 0; bx < cols / 2; ++bx) {
      bool nonzero = false;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) nonzero |= want[size_t(2 * by + i) * cols + 2 * bx + j] != 0.f;
      // Every block with a pixel of the plane is formed; the others hold zeros, which is what the
      // zeros written once are (a formed block of zeros is harmless).
      if (nonzero) EXPECT_TRUE(formed[size_t(by) * (cols / 2) + bx]) << what << " block " << by << "," << bx;
    }
}

// The plane sweep of the staging tests: odd k up to 15, strides s_first..s_last, H and W up to
// hw_max. Calls f(k, s, H, W).
template <class F>
void for_each_plane(int s_first, int s_last, int hw_max, F&& f) {
  for (int k = 1; k <= 15; k += 2)
    for (int s = s_first; s <= s_last; ++s)
      for (int H = 1; H <= hw_max; H += 3)
        for (int W = 1; W <= hw_max; W += 5) f(k, s, H, W);
}

// Where the forward base kernel holds an H x W plane at stride s in one tile (as
// launch_forward_base decides), checks its staging and returns true with the tile's pixel rows and
// columns; false for planes of more tiles.
bool check_single_tile_forward(int k, int s, int H, int W, int* rows, int* cols) {
  const int r = k / 2;
  const int64_t Ho = (H + s - 1) / s, Wo = (W + s - 1) / s;
  const WtconvTile f = pick_fwd_base_tile(4, 8, Ho, Wo, k, s);
  if (f.tiles_y != 1 || f.tiles_x != 1) return false;
  *rows = 2 * (fwd_base_coef_extent(s, f.th) + 2 * r);
  *cols = 2 * (fwd_base_coef_extent(s, f.tw) + 2 * r);
  check(H, W, r, *rows, *cols, "forward");
  return true;
}

TEST(WtconvStagingHost, PlaneStagingFillsTheWholeTilesValues) {
  int checked = 0;
  for_each_plane(1, 3, 40, [&](int k, int s, int H, int W) {
    const int r = k / 2;
    int rows, cols;
    checked += check_single_tile_forward(k, s, H, W, &rows, &cols);
    const WtconvTile b = pick_bwd_base_tile(4, 8, (H + 1) / 2, (W + 1) / 2, k);
    if (b.tiles_y == 1 && b.tiles_x == 1) {  // as launch_backward_base decides
      check(H, W, r, 2 * (b.th + 2 * r), 2 * (b.tw + 2 * r), "backward");
      ++checked;
    }
  });
  EXPECT_GT(checked, 500);
  // More than one tile: the whole tile, as before.
  const StagedRegion sr = staged_region(false, 100, 75, 2, 40, 72);
  EXPECT_FALSE(sr.plane);
  EXPECT_EQ(sr.off, 0);
  EXPECT_EQ(sr.rows * sr.cols, 40 * 72);
  EXPECT_EQ(sr.brows * sr.bcols, 20 * 36);
}

// The quad staging's load width (load_quad_rows): whole quads only where every row starts on a
// 4-element boundary, pairs where rows start on a 2-element one, elements otherwise; a base pointer
// off that alignment lowers the width whatever W is.
TEST(WtconvStagingHost, QuadLoadWidthFollowsWidthAndAlignment) {
  alignas(16) static float f32[16];
  alignas(16) static __half f16[16];
  for (int64_t W = 1; W <= 64; ++W) {
    const int want = W % 4 == 0 ? 4 : W % 2 == 0 ? 2 : 1;
    EXPECT_EQ(quad_load_width(f32, W), want) << W;
    EXPECT_EQ(quad_load_width(f16, W), want) << W;
    EXPECT_EQ(quad_load_width(f32 + 2, W), want == 4 ? 2 : want) << W;  // 8 bytes: pairs at best
    EXPECT_EQ(quad_load_width(f16 + 2, W), want == 4 ? 2 : want) << W;  // 4 bytes
    EXPECT_EQ(quad_load_width(f32 + 1, W), 1) << W;
    EXPECT_EQ(quad_load_width(f16 + 1, W), 1) << W;
  }
}

// quad_load_width at every element offset of a 16-byte aligned base: quads where the base sits on
// a 4-element boundary (16 bytes for fp32, 8 for the 16-bit types), pairs on a 2-element one.
template <typename T>
void check_quad_load_width_offsets() {
  alignas(16) static T buf[32];
  for (int off = 0; off < 16; ++off)
    for (int64_t W = 1; W <= 16; ++W) {
      const int want = W % 4 == 0 && off % 4 == 0 ? 4 : W % 2 == 0 && off % 2 == 0 ? 2 : 1;
      EXPECT_EQ(quad_load_width(buf + off, W), want) << "sizeof " << sizeof(T) << " off " << off << " W " << W;
    }
}

TEST(WtconvStagingHost, QuadLoadWidthAtEveryElementOffset) {
  check_quad_load_width_offsets<float>();
  check_quad_load_width_offsets<__half>();
  check_quad_load_width_offsets<__nv_bfloat16>();
}

// The plane staging at strides 4-8: a single-tile plane can then be taller (wider) than the
// tile's pixel rows past the halo (the last rows feed no output), and staged_region must clamp the
// staged pixels to the tile; the sweep above stops at stride 3, where the tile always holds the plane.
TEST(WtconvStagingHost, PlaneStagingClampsToTheTileAtLargeStrides) {
  int checked = 0, clamped = 0;
  for_each_plane(4, 8, 64, [&](int k, int s, int H, int W) {
    int rows, cols;
    if (check_single_tile_forward(k, s, H, W, &rows, &cols)) {
      ++checked;
      clamped += H > rows - 2 * (k / 2) || W > cols - 2 * (k / 2);
    }
  });
  EXPECT_GT(checked, 500);
  EXPECT_GT(clamped, 0);  // the clamp is exercised
}

}  // namespace
}  // namespace wtconv_detail
}  // namespace winconv
