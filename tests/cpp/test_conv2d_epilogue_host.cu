// The FP32 conv kernel's epilogue tile on the host: its XOR swizzle must be a permutation of the
// tile (no two outputs share a slot) and keep every warp-wide store and read conflict-free, for
// each tile shape the kernels instantiate, with its store width, and a few more. The store
// pattern is the one the kernel's comment states: lane (tx, ty) of the 8 x 4 warp layout writes
// pixel 4 ty + c of column kWidth tx + c'; a read takes 32 consecutive elements of one column
// (or row).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "cuda/im2win/conv_fp32_simt_kernel.cuh"

namespace winconv::im2win {
namespace {

template <int BM, int BN, int kWidth>
void check_epilogue_tile() {
  using Tile = EpilogueTile<BM, BN, kWidth>;
  SCOPED_TRACE("BM=" + std::to_string(BM) + " BN=" + std::to_string(BN) + " kWidth=" + std::to_string(kWidth));
  // A permutation of [0, BM * BN) in both layouts.
  std::vector<int> col_hits(BM * BN, 0), row_hits(BM * BN, 0);
  for (int nl = 0; nl < BN; ++nl)
    for (int ml = 0; ml < BM; ++ml) {
      const int c = Tile::column_major(nl, ml), r = Tile::row_major(ml, nl);
      ASSERT_GE(c, 0);
      ASSERT_LT(c, BM * BN);
      ASSERT_GE(r, 0);
      ASSERT_LT(r, BM * BN);
      ++col_hits[c];
      ++row_hits[r];
    }
  for (int i = 0; i < BM * BN; ++i) {
    ASSERT_EQ(col_hits[i], 1) << "column-major slot " << i;
    ASSERT_EQ(row_hits[i], 1) << "row-major slot " << i;
  }
  // Warp stores: for every (c, c') and every 32-aligned offset, 32 distinct banks.
  for (int m32 = 0; m32 < BM; m32 += 16)
    for (int n32 = 0; n32 < BN; n32 += 8 * kWidth)
      for (int c = 0; c < 4; ++c)
        for (int cw = 0; cw < kWidth; ++cw) {
          std::set<int> col_banks, row_banks;
          for (int ty = 0; ty < 4; ++ty)
            for (int tx = 0; tx < 8; ++tx) {
              const int ml = m32 + 4 * ty + c, nl = n32 + kWidth * tx + cw;
              if (ml >= BM || nl >= BN) continue;
              col_banks.insert(Tile::column_major(nl, ml) % 32);
              row_banks.insert(Tile::row_major(ml, nl) % 32);
            }
          EXPECT_EQ(col_banks.size(), 32u) << "column-major store m=" << m32 << " n=" << n32 << " c=" << c << " c'=" << cw;
          EXPECT_EQ(row_banks.size(), 32u) << "row-major store m=" << m32 << " n=" << n32 << " c=" << c << " c'=" << cw;
        }
  // Warp reads: 32 consecutive elements of a column (column-major) or of a row (row-major).
  for (int nl = 0; nl < BN; ++nl)
    for (int m0 = 0; m0 < BM; m0 += 32) {
      std::set<int> banks;
      for (int lane = 0; lane < 32; ++lane) banks.insert(Tile::column_major(nl, m0 + lane) % 32);
      EXPECT_EQ(banks.size(), 32u) << "column-major read n=" << nl << " m0=" << m0;
    }
  // Rows narrower than 32 (BN = 16): a read takes the BN elements of 32 / BN adjacent rows.
  constexpr int kRowsPerRead = BN < 32 ? 32 / BN : 1, kPerRow = 32 / kRowsPerRead;
  for (int ml = 0; ml < BM; ml += kRowsPerRead)
    for (int n0 = 0; n0 < BN; n0 += kPerRow) {
      std::set<int> banks;
      for (int lane = 0; lane < 32; ++lane)
        banks.insert(Tile::row_major(ml + lane / kPerRow, n0 + lane % kPerRow) % 32);
      EXPECT_EQ(banks.size(), 32u) << "row-major read m=" << ml << " n0=" << n0;
    }
}

TEST(Conv2dEpilogueHost, SwizzleIsAConflictFreePermutation) {
  // The six tile shapes (tile_shape.h) with the store widths their kernels use (NFragment: 4 for
  // 12, 8 or 4 outputs per thread, 2 for the 2 of the 16-wide tile), then other multiples of 32
  // for either width.
  check_epilogue_tile<128, 128, NFragment<128>::kWidth>();
  check_epilogue_tile<128, 64, NFragment<64>::kWidth>();
  check_epilogue_tile<64, 128, NFragment<128>::kWidth>();
  check_epilogue_tile<128, 96, NFragment<96>::kWidth>();
  check_epilogue_tile<128, 32, NFragment<32>::kWidth>();
  check_epilogue_tile<128, 16, NFragment<16>::kWidth>();
  check_epilogue_tile<64, 64, 4>();
  check_epilogue_tile<128, 96, 2>();
  check_epilogue_tile<128, 64, 2>();
  check_epilogue_tile<32, 32, 2>();
}

}  // namespace
}  // namespace winconv::im2win
