// The base kernels' item stepping (next_item: the position of item + step from that of item) against
// the item decode it replaces (decode_item), on the host: both are __host__ __device__. Grids of one
// and many tiles per axis, one and several planes per item, and steps below, at and past a row and
// a plane group, so that every carry (and none) happens; the 64-bit decode path too. No GPU needed.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/wtconv/wtconv_items.cuh"

namespace winconv {
namespace wtconv_detail {
namespace {

TileGeom geometry(int tiles_y, int tiles_x, int th, int tw, int np, int64_t items, bool items32) {
  TileGeom g{};
  g.th = th;
  g.tw = tw;
  g.np = np;
  g.tiles_y = tiles_y;
  g.tiles_x = tiles_x;
  g.items = items;
  g.splits = 1;
  g.items32 = items32;
  g.per_group = FastDivmod(uint32_t(tiles_y) * uint32_t(tiles_x));
  g.tiles_x_div = FastDivmod(uint32_t(tiles_x));
  return g;
}

TEST(WtconvItemsHost, SteppingMatchesTheDecode) {
  struct Grid { int tiles_y, tiles_x, th, tw, np, groups; };
  const Grid grids[] = {{1, 1, 32, 64, 1, 40}, {16, 8, 32, 64, 1, 3}, {3, 5, 16, 32, 4, 7},
                        {1, 9, 8, 8, 16, 5},   {7, 1, 16, 16, 2, 6},  {4, 4, 32, 64, 1, 9}};
  for (const Grid& gr : grids) {
    const int per_group = gr.tiles_y * gr.tiles_x;
    const int64_t items = int64_t(per_group) * gr.groups;
    for (bool items32 : {true, false}) {
      const TileGeom g = geometry(gr.tiles_y, gr.tiles_x, gr.th, gr.tw, gr.np, items, items32);
      for (int64_t step : {int64_t(1), int64_t(2), int64_t(gr.tiles_x), int64_t(gr.tiles_x + 1),
                           int64_t(per_group - 1 > 0 ? per_group - 1 : 1), int64_t(per_group),
                           int64_t(per_group + 3), int64_t(3 * per_group + 5)}) {
        const ItemStep s = item_step(g, step);
        for (int64_t begin = 0; begin < step && begin < items; ++begin) {
          ItemPos pos = decode_item(g, begin);
          for (int64_t item = begin + step; item < items; item += step) {
            pos = next_item(pos, s, g);
            const ItemPos want = decode_item(g, item);
            ASSERT_EQ(pos.b0, want.b0) << "item " << item << " step " << step;
            ASSERT_EQ(pos.y0, want.y0) << "item " << item << " step " << step;
            ASSERT_EQ(pos.x0, want.x0) << "item " << item << " step " << step;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace wtconv_detail
}  // namespace winconv
