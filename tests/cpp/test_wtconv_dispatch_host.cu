// The kernel-size dispatch of every WTConv launcher (dispatch_kernel_size), on the host: the
// specialised sizes 3, 5 and 7 as themselves, k = 1 as the runtime-k instance compiled for k = 1
// alone (kOnly = 1; the level kernels' kWindows = false), every other odd size as the runtime-k
// instance, and the specialised sizes exactly wtconv_layouts.h's list. No GPU needed.
#include <gtest/gtest.h>

#include "cuda/wtconv/wtconv_kernels.cuh"

namespace winconv {
namespace wtconv_detail {
namespace {

TEST(WtconvDispatchHost, KernelSizeSelectsItsInstance) {
  for (int k = 1; k <= 15; k += 2) {
    int got_k = -1, got_only = -1, calls = 0;
    const cudaError_t e = dispatch_kernel_size(k, [&](auto kc, auto only) {
      got_k = decltype(kc)::value;
      got_only = decltype(only)::value;
      ++calls;
      return cudaSuccess;
    });
    EXPECT_EQ(e, cudaSuccess) << "k " << k;
    EXPECT_EQ(calls, 1) << "k " << k;
    EXPECT_EQ(got_k, specialised_kernel_size(k) ? k : 0) << "k " << k;
    EXPECT_EQ(got_only, k == 1 ? 1 : 0) << "k " << k;
  }
  // The launcher's error travels back unchanged.
  EXPECT_EQ(dispatch_kernel_size(9, [](auto, auto) { return cudaErrorNotSupported; }), cudaErrorNotSupported);
}

// The launchers' host-side helpers in wtconv_kernels.cuh.

// geom_of: the item decode of the geometry the launchers build decomposes item into
// (plane group, tile row, tile column) in row-major tile order, on both decode paths.
TEST(WtconvKernelsHost, GeomOfDecodesItemsRowMajor) {
  for (int tiles_y : {1, 2, 3, 7})
    for (int tiles_x : {1, 2, 5, 8}) {
      WtconvTile t;
      t.th = 16;
      t.tw = 32;
      t.np = 3;
      t.tiles_y = tiles_y;
      t.tiles_x = tiles_x;
      t.items = int64_t(tiles_y) * tiles_x * 4;
      TileGeom g = geom_of(t);
      EXPECT_TRUE(g.items32);
      EXPECT_EQ(g.th, 16);
      EXPECT_EQ(g.tw, 32);
      EXPECT_EQ(g.np, 3);
      for (bool items32 : {true, false}) {
        g.items32 = items32;
        for (int64_t item = 0; item < t.items; ++item) {
          const ItemPos p = decode_item(g, item);
          const int64_t per_group = int64_t(tiles_y) * tiles_x, rem = item % per_group;
          EXPECT_EQ(p.b0, int(item / per_group) * 3) << tiles_y << "x" << tiles_x << " item " << item;
          EXPECT_EQ(p.y0, int(rem / tiles_x) * 16) << tiles_y << "x" << tiles_x << " item " << item;
          EXPECT_EQ(p.x0, int(rem % tiles_x) * 32) << tiles_y << "x" << tiles_x << " item " << item;
        }
      }
    }
  WtconvTile big;
  big.items = int64_t(1) << 33;
  EXPECT_FALSE(geom_of(big).items32);
}

// central_tap: tap (i, j) of the central k x k square of a wk x wk filter (row-major, ij = i k + j)
// sits at row i + (wk - k) / 2, column j + (wk - k) / 2.
TEST(WtconvKernelsHost, CentralTapIsTheCentralSquaresRowAndColumn) {
  for (int wk = 1; wk <= 15; wk += 2)
    for (int k = 1; k <= wk; k += 2) {
      const int off = (wk - k) / 2;
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < k; ++j) {
          const int t = central_tap(i * k + j, k, wk);
          EXPECT_EQ(t / wk, i + off) << "k " << k << " wk " << wk << " i " << i << " j " << j;
          EXPECT_EQ(t % wk, j + off) << "k " << k << " wk " << wk << " i " << i << " j " << j;
        }
    }
  EXPECT_EQ(central_tap(1, 3, 7), 2 * 7 + 3);  // row 0, column 1 of the 3 x 3 in a 7 x 7
  EXPECT_EQ(central_tap(3, 3, 7), 3 * 7 + 2);  // row 1, column 0
}

// strip_count / pair_count: divisors by the strips that cover n rows (the last may be partial) and
// by the column pairs of n columns (at least 1).
TEST(WtconvKernelsHost, StripAndPairCounts) {
  for (int n = 1; n <= 70; ++n) {
    for (int rows : {1, 4, 8})
      EXPECT_EQ(strip_count<FastDivmod>(n, rows).divisor, uint32_t((n + rows - 1) / rows)) << n << " " << rows;
    EXPECT_EQ(pair_count(n).divisor, uint32_t(n / 2 > 0 ? n / 2 : 1)) << n;
  }
}

// pair_staging: 16-bit activations only, W % 8 == 0, a 16-byte aligned base, an even halo r = k / 2
// and an even tile width.
TEST(WtconvKernelsHost, PairStagingConditions) {
  alignas(16) static __half h[16];
  alignas(16) static __nv_bfloat16 b[16];
  alignas(16) static float f[16];
  EXPECT_TRUE(pair_staging(h, 64, 5, 32));
  EXPECT_TRUE(pair_staging(b, 64, 5, 32));
  EXPECT_TRUE(pair_staging(h, 64, 1, 32));   // r = 0
  EXPECT_TRUE(pair_staging(h, 64, 9, 32));   // r = 4
  EXPECT_FALSE(pair_staging(f, 64, 5, 32));  // fp32
  EXPECT_FALSE(pair_staging(h, 60, 5, 32));  // W % 8 != 0
  EXPECT_FALSE(pair_staging(h + 4, 64, 5, 32));  // 8-byte aligned base
  EXPECT_FALSE(pair_staging(h, 64, 3, 32));  // r = 1
  EXPECT_FALSE(pair_staging(h, 64, 7, 32));  // r = 3
  EXPECT_FALSE(pair_staging(h, 64, 5, 31));  // odd tile width
}

}  // namespace
}  // namespace wtconv_detail
}  // namespace winconv
