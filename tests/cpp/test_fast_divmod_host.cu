// FastDivmod (multiply-high division by a run-time constant) on the host: the same arithmetic the
// kernels use for every index decomposition, checked against / and % on the edges of its range
// (0 <= n < 2^32, 1 <= d < 2^31): multiples of d and their neighbours, powers of two, the top of
// the 32-bit range, and random pairs. TileDivmod (tile-local indices, n < 2^16) the same way.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/common/fast_divmod.cuh"

namespace winconv {
namespace {

// Div's divmod and div of n by d against the hardware's; Div is FastDivmod or TileDivmod.
template <typename Div = FastDivmod>
void expect_divides(uint32_t d, uint32_t n) {
  const Div f(d);
  uint32_t q = 0, r = 0;
  f.divmod(n, q, r);
  ASSERT_EQ(q, n / d) << "n=" << n << " d=" << d;
  ASSERT_EQ(r, n % d) << "n=" << n << " d=" << d;
  ASSERT_EQ(f.div(n), n / d) << "n=" << n << " d=" << d;
}

std::vector<uint32_t> edge_numerators(uint32_t d) {
  std::vector<uint32_t> n = {0u, 1u, 2u, 0xFFFFFFFFu, 0xFFFFFFFEu, 0x80000000u, 0x7FFFFFFFu};
  for (uint64_t m : {uint64_t(1), uint64_t(2), uint64_t(3), uint64_t(1000), uint64_t(0xFFFFFFFFu) / d}) {
    const uint64_t base = m * d;
    for (int64_t delta = -1; delta <= 1; ++delta) {
      const int64_t v = int64_t(base) + delta;
      if (v >= 0 && v <= int64_t(0xFFFFFFFFu)) n.push_back(uint32_t(v));
    }
  }
  return n;
}

TEST(FastDivmodHost, SmallDivisorsOnEdgeNumerators) {
  for (uint32_t d = 1; d <= 5000; ++d)
    for (uint32_t n : edge_numerators(d)) expect_divides(d, n);
}

TEST(FastDivmodHost, PowersOfTwoAndTheirNeighbours) {
  for (int s = 0; s <= 30; ++s)
    for (int64_t delta = -1; delta <= 1; ++delta) {
      const int64_t d = (int64_t(1) << s) + delta;
      if (d < 1 || d >= (int64_t(1) << 31)) continue;
      for (uint32_t n : edge_numerators(uint32_t(d))) expect_divides(uint32_t(d), n);
    }
}

TEST(FastDivmodHost, RandomPairsOverTheWholeRange) {
  std::mt19937_64 rng(20261130);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t d = uint32_t(rng() % 0x7FFFFFFFu) + 1u;  // 1 .. 2^31 - 1
    const uint32_t n = uint32_t(rng());
    expect_divides(d, n);
  }
}

// TileDivmod: exhaustive over its whole range of numerators (n < 2^16) for every divisor up to
// 1024 and for the divisors near its bound and near powers of two; random divisors otherwise.
void expect_tile_divides_all(uint32_t d) {
  for (uint32_t n = 0; n < TileDivmod::kMax; ++n) expect_divides<TileDivmod>(d, n);
}

TEST(TileDivmodHost, EveryNumeratorForSmallDivisors) {
  for (uint32_t d = 1; d <= 1024; ++d) expect_tile_divides_all(d);
}

TEST(TileDivmodHost, EveryNumeratorNearPowersOfTwoAndTheBound) {
  for (int s = 10; s <= 16; ++s)
    for (int64_t delta = -2; delta <= 2; ++delta) {
      const int64_t d = (int64_t(1) << s) + delta;
      if (d >= 1 && d <= int64_t(TileDivmod::kMax)) expect_tile_divides_all(uint32_t(d));
    }
}

TEST(TileDivmodHost, RandomDivisors) {
  std::mt19937 rng(20261130);
  for (int i = 0; i < 64; ++i) expect_tile_divides_all(uint32_t(rng() % TileDivmod::kMax) + 1u);
}

}  // namespace
}  // namespace winconv
