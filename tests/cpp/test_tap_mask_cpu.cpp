// The padded gathers' bounds test by tap bits (src/cuda/im2win/tap_mask.h) against the plain test
// it replaces: for every window origin around an image of every small extent, every filter size
// up to the mask's reach and every tap, (tap_bits & outside_mask) == 0 exactly when the tap's row
// and column lie inside the image; the table's tail entries and tail pixels never copy.
#include <gtest/gtest.h>

#include "cuda/im2win/tap_mask.h"

namespace winconv::im2win {
namespace {

bool inside(int origin, int t, int extent) { return origin + t >= 0 && origin + t < extent; }

TEST(TapMask, OutsideBitsMatchThePlainBoundsTest) {
  for (int taps = 1; taps <= kTapMaskMaxExtent; ++taps)
    for (int extent = 1; extent <= 20; ++extent)
      for (int origin = -20; origin <= 20; ++origin) {
        const uint32_t bits = outside_bits(origin, extent, taps);
        ASSERT_EQ(bits >> taps, 0u) << "no bit past the filter: taps " << taps;
        for (int t = 0; t < taps; ++t)
          ASSERT_EQ((bits >> t & 1u) == 0u, inside(origin, t, extent))
              << "origin " << origin << " extent " << extent << " taps " << taps << " t " << t;
      }
}

TEST(TapMask, EveryTapOfEveryWindowAgainstTheImageBounds) {
  for (int r : {1, 2, 3, 7, 14, 15})
    for (int s : {1, 3, 5, 11, 15})
      for (int h : {1, 2, 9})
        for (int w : {1, 4, 16})
          for (int ih0 = -r; ih0 <= h; ++ih0)
            for (int iw0 = -s; iw0 <= w; ++iw0) {
              const uint32_t outside = outside_mask(true, ih0, iw0, h, w, r, s);
              for (int u = 0; u < r; ++u)
                for (int v = 0; v < s; ++v)
                  ASSERT_EQ(tap_inside(tap_bits(u, v), outside), inside(ih0, u, h) && inside(iw0, v, w))
                      << "filter " << r << "x" << s << " image " << h << "x" << w << " origin (" << ih0 << ", "
                      << iw0 << ") tap (" << u << ", " << v << ")";
            }
}

TEST(TapMask, TailsNeverCopy) {
  // A window wholly inside the image: every real tap copies, the table's tail entries do not.
  const uint32_t inner = outside_mask(true, 0, 0, 20, 20, 15, 15);
  EXPECT_TRUE(tap_inside(tap_bits(14, 14), inner));
  EXPECT_FALSE(tap_inside(kTapTailBit, inner));
  // A tail pixel copies nothing.
  const uint32_t tail_pixel = outside_mask(false, 0, 0, 20, 20, 3, 3);
  for (int u = 0; u < kTapMaskMaxExtent; ++u)
    for (int v = 0; v < kTapMaskMaxExtent; ++v) EXPECT_FALSE(tap_inside(tap_bits(u, v), tail_pixel));
  // No real tap's bits overlap the tail bit.
  for (int u = 0; u < kTapMaskMaxExtent; ++u)
    for (int v = 0; v < kTapMaskMaxExtent; ++v) EXPECT_EQ(tap_bits(u, v) & kTapTailBit, 0u);
}

TEST(TapMask, ReachOfTheMask) {
  EXPECT_TRUE(tap_mask_fits(15, 15));
  EXPECT_TRUE(tap_mask_fits(1, 15));
  EXPECT_FALSE(tap_mask_fits(16, 3));
  EXPECT_FALSE(tap_mask_fits(3, 16));
}

}  // namespace
}  // namespace winconv::im2win
