// The WTConv kernels' register-blocked inner loops, run on the host (they are __host__ __device__,
// so the same code the kernels inline runs here). Each must give bit-identical results to the
// plain loop it replaces, because the kernels' outputs are bit-identical whichever variant a tile
// takes: a ring-indexed correlation with a partial last chunk, column strips with clamped rows,
// and two-column strips reading 8-byte pairs. Sizes sweep every tail (n % chunk), both
// alignments, and the compile-time and runtime kernel sizes. No GPU needed.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/wtconv/wtconv_correlations.cuh"
#include "cuda/wtconv/wtconv_items.cuh"
#include "cuda/wtconv/wtconv_strips.cuh"
#include "cuda/wtconv/wtconv_windows.cuh"

namespace winconv {
namespace wtconv_detail {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// acc[j] += sum over x < n of y[x + j] * g[x], one fused multiply-add per term in x order; gsum
// adds g[x] in x order. This is the order corr_row promises.
void corr_reference(float* acc, const float* y, const float* g, int n, int k, float* gsum) {
  for (int x = 0; x < n; ++x) {
    *gsum += g[x];
    for (int j = 0; j < k; ++j) acc[j] = std::fmaf(y[x + j], g[x], acc[j]);
  }
}

template <int K>
void check_corr_row(int k) {
  // 16-byte aligned storage; offsets 0 and 1 float give the paired (8-byte aligned) and the scalar
  // path, and odd n takes the scalar path too.
  const int kmax_n = 3 * (k + 1) + 5;
  alignas(16) float ybuf[64 + 16], gbuf[64 + 16];
  const std::vector<float> yv = random_floats(64 + 16, 11 + k), gv = random_floats(64 + 16, 97 + k);
  std::memcpy(ybuf, yv.data(), sizeof ybuf);
  std::memcpy(gbuf, gv.data(), sizeof gbuf);
  for (int yoff = 0; yoff < 2; ++yoff)
    for (int goff = 0; goff < 2; ++goff)
      for (int n = 0; n <= kmax_n; ++n) {
        SCOPED_TRACE("K=" + std::to_string(K) + " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                     " yoff=" + std::to_string(yoff) + " goff=" + std::to_string(goff));
        float acc[15], want[15];
        for (int j = 0; j < 15; ++j) acc[j] = want[j] = 0.25f * float(j) - 1.f;  // a running total
        float gsum = 0.5f, gsum_want = 0.5f;
        corr_row<K, true>(acc, ybuf + yoff, gbuf + goff, n, k, &gsum);
        corr_reference(want, ybuf + yoff, gbuf + goff, n, k, &gsum_want);
        for (int j = 0; j < k; ++j) EXPECT_TRUE(same_bits(acc[j], want[j])) << "j=" << j << " " << acc[j] << " vs " << want[j];
        if (n > 0) EXPECT_TRUE(same_bits(gsum, gsum_want)) << gsum << " vs " << gsum_want;
        // Without kSum the sums are the same and gsum is left alone.
        float acc2[15];
        for (int j = 0; j < 15; ++j) acc2[j] = 0.25f * float(j) - 1.f;
        corr_row<K, false>(acc2, ybuf + yoff, gbuf + goff, n, k);
        for (int j = 0; j < k; ++j) EXPECT_TRUE(same_bits(acc2[j], want[j])) << "j=" << j;
      }
}

TEST(WtconvStripsHost, CorrelationRowMatchesThePlainLoopBitForBit) {
  check_corr_row<3>(3);
  check_corr_row<5>(5);
  check_corr_row<7>(7);
  for (int k = 1; k <= 15; k += 2) check_corr_row<0>(k);  // the runtime-k path
}

// The runtime-k kernels run the rings of their actual k (with_compiled_kernel_size): k = 1 and
// 9..15 as compile-time rings, each the same bits as the plain loop (and so as corr_row<0>).
TEST(WtconvStripsHost, CompiledRingsOfTheRuntimeKernelSizesMatchThePlainLoop) {
  check_corr_row<1>(1);
  check_corr_row<9>(9);
  check_corr_row<11>(11);
  check_corr_row<13>(13);
  check_corr_row<15>(15);
}

// The quad-read correlation at phases (kOy, kOg) of the 16-byte grid, every n % 4 == 0 up to
// three chunks: the same bits as the plain loop. The buffers hold corr_row_quads' lead-in and
// overrun; their contents outside the row are NaN, so a term read from there would show.
template <int K, int kOy, int kOg>
void check_corr_row_quads() {
  constexpr int kPad = 16, kLen = 256;
  alignas(16) float ybuf[kLen], gbuf[kLen];
  const std::vector<float> yv = random_floats(kLen, 31 + K), gv = random_floats(kLen, 57 + K);
  for (int n = 0; n <= 3 * 24; n += 4) {
    SCOPED_TRACE("K=" + std::to_string(K) + " oy=" + std::to_string(kOy) + " og=" + std::to_string(kOg) +
                 " n=" + std::to_string(n));
    for (int i = 0; i < kLen; ++i) ybuf[i] = gbuf[i] = std::nanf("");
    const float* y = ybuf + kPad + kOy;
    const float* g = gbuf + kPad + kOg;
    std::memcpy(ybuf + kPad + kOy, yv.data(), sizeof(float) * size_t(n + K - 1));
    std::memcpy(gbuf + kPad + kOg, gv.data(), sizeof(float) * size_t(n));
    float acc[K], want[K];
    for (int j = 0; j < K; ++j) acc[j] = want[j] = 0.25f * float(j) - 1.f;
    float gsum = 0.5f, gsum_want = 0.5f;
    corr_row_quads<K, kOy, kOg, true>(acc, y, g, n, &gsum);
    corr_reference(want, y, g, n, K, &gsum_want);
    for (int j = 0; j < K; ++j) EXPECT_TRUE(same_bits(acc[j], want[j])) << "j=" << j << " " << acc[j] << " vs " << want[j];
    EXPECT_TRUE(same_bits(gsum, gsum_want)) << gsum << " vs " << gsum_want;
    EXPECT_TRUE(quad_corr_ok(y, 36, kOy, g, 76, kOg, n));
  }
}

template <int K>
void check_corr_row_quads_all_phases() {
  check_corr_row_quads<K, 0, 0>();
  check_corr_row_quads<K, 0, 1>();
  check_corr_row_quads<K, 0, 2>();
  check_corr_row_quads<K, 0, 3>();
  check_corr_row_quads<K, 1, 2>();
  check_corr_row_quads<K, 2, 0>();
  check_corr_row_quads<K, 3, 2>();
  check_corr_row_quads<K, 3, 1>();
}

TEST(WtconvStripsHost, QuadCorrelationRowMatchesThePlainLoopBitForBit) {
  check_corr_row_quads_all_phases<3>();
  check_corr_row_quads_all_phases<5>();
  check_corr_row_quads_all_phases<7>();
}

TEST(WtconvStripsHost, QuadCorrelationNeedsAlignedRowsAndWholeQuads) {
  alignas(16) float buf[64];
  EXPECT_TRUE(quad_corr_ok(buf + 2, 36, 2, buf + 4, 76, 0, 64));
  EXPECT_FALSE(quad_corr_ok(buf + 2, 36, 2, buf + 4, 76, 0, 62));   // n not a multiple of 4
  EXPECT_FALSE(quad_corr_ok(buf + 1, 36, 2, buf + 4, 76, 0, 64));   // y off its phase
  EXPECT_FALSE(quad_corr_ok(buf + 2, 36, 2, buf + 5, 76, 0, 64));   // g off its phase
  EXPECT_FALSE(quad_corr_ok(buf + 2, 34, 2, buf + 4, 76, 0, 64));   // rows alternate phases
  EXPECT_FALSE(quad_corr_ok(buf + 2, 36, 2, buf + 4, 78, 0, 64));
}

TEST(WtconvStripsHost, StridedRowsVisitExactlyTheRowsOfTheStride) {
  for (int rows = 1; rows <= 9; ++rows)
    for (int np = 1; np <= 4; ++np)
      for (int step = 1; step <= 25; ++step)
        for (int first = 0; first < step; ++first) {
          std::vector<int> seen;
          for_strided_rows(first, step, rows, np, [&](int p, int y) {
            EXPECT_GE(y, 0);
            EXPECT_LT(y, rows);
            seen.push_back(p * rows + y);
          });
          std::vector<int> want;
          for (int row = first; row < np * rows; row += step) want.push_back(row);
          EXPECT_EQ(seen, want) << "rows=" << rows << " np=" << np << " step=" << step << " first=" << first;
        }
}

// Column strips of R outputs and two-column strips against conv_window per output, on a tile
// whose strips end at every row (rows_left from 1 to R + K - 1: the clamped rows feed only outputs
// the kernels discard, so only outputs o < rows_left - K + 1 are compared).
template <int K, int R>
void check_strips() {
  constexpr int pitch = 2 * K + 8;  // even: 8-byte aligned rows for the two-column strips
  const int rows = R + K - 1;
  alignas(16) float tile[(R + K + 2) * pitch];
  alignas(16) float w[K * K + 4];
  const std::vector<float> t = random_floats(sizeof tile / sizeof(float), 5 * K + R);
  const std::vector<float> wv = random_floats(K * K + 4, 7 * K + R);
  std::memcpy(tile, t.data(), sizeof tile);
  std::memcpy(w, wv.data(), sizeof w);
  // The filter at w (16-byte aligned: the float4 loads, with and without the run-time test) and at
  // w + 1 (the scalar loads).
  for (int wo = 0; wo < 2; ++wo) {
    const float* f = w + wo;
    for (int rows_left = 1; rows_left <= rows; ++rows_left) {
      const int valid = rows_left - K + 1;  // outputs whose K input rows all lie in the tile
      SCOPED_TRACE("K=" + std::to_string(K) + " R=" + std::to_string(R) + " rows_left=" + std::to_string(rows_left) +
                   " filter offset=" + std::to_string(wo));
      for (int col = 1; col < 5; ++col) {
        float acc[R], acc_a[R];
        conv_column_strip<K, R>(f, tile + col, pitch, rows_left, acc);
        if (wo == 0) conv_column_strip<K, R, true>(f, tile + col, pitch, rows_left, acc_a);
        for (int o = 0; o < valid && o < R; ++o) {
          const float want = conv_window<K>(f, tile + o * pitch + col, pitch, K);
          EXPECT_TRUE(same_bits(acc[o], want)) << "col=" << col << " o=" << o;
          if (wo == 0) EXPECT_TRUE(same_bits(acc_a[o], want)) << "aligned filter, col=" << col << " o=" << o;
        }
      }
      // Two columns from an 8-byte aligned start (kOdd = false) and from an odd float (kOdd = true,
      // which reads from the float before).
      for (int start = 2; start < 4; ++start) {
        float acc2[R][2], acc2_a[R][2];
        if (start == 2) conv_pair_strip<K, R, false>(f, tile + start, pitch, rows_left, acc2);
        else conv_pair_strip<K, R, true>(f, tile + start, pitch, rows_left, acc2);
        if (wo == 0 && start == 2) conv_pair_strip<K, R, false, true>(f, tile + start, pitch, rows_left, acc2_a);
        if (wo == 0 && start == 3) conv_pair_strip<K, R, true, true>(f, tile + start, pitch, rows_left, acc2_a);
        for (int o = 0; o < valid && o < R; ++o)
          for (int u = 0; u < 2; ++u) {
            const float want = conv_window<K>(f, tile + o * pitch + start + u, pitch, K);
            EXPECT_TRUE(same_bits(acc2[o][u], want)) << "start=" << start << " o=" << o;
            if (wo == 0) EXPECT_TRUE(same_bits(acc2_a[o][u], want)) << "aligned filter, start=" << start << " o=" << o;
          }
      }
    }
  }
}

// Four-column strips (full strips only) against conv_window per output: from a 16-byte aligned
// start (quads, then a pair where K + 3 is not a multiple of 4) and from 2 floats past one (a pair,
// quads, then a pair).
template <int K, int R>
void check_quad_strips() {
  constexpr int pitch = 4 * ((K + 3 + 4 + 3) / 4) + 4;  // a multiple of 4: every row 16-byte aligned
  alignas(16) float tile[(R + K - 1) * pitch];
  alignas(16) float w[K * K + 4];
  const std::vector<float> t = random_floats(sizeof tile / sizeof(float), 11 * K + R);
  const std::vector<float> wv = random_floats(K * K + 4, 13 * K + R);
  std::memcpy(tile, t.data(), sizeof tile);
  std::memcpy(w, wv.data(), sizeof w);
  for (int start : {4, 2}) {
    SCOPED_TRACE("K=" + std::to_string(K) + " R=" + std::to_string(R) + " start=" + std::to_string(start));
    float acc[R][4];
    for (auto& row : acc)
      for (float& v : row) v = std::nanf("");
    if (start == 4) conv_quad_strip<K, R, false>(w, tile + start, pitch, acc);
    else conv_quad_strip<K, R, true>(w, tile + start, pitch, acc);
    for (int o = 0; o < R; ++o)
      for (int u = 0; u < 4; ++u) {
        const float want = conv_window<K>(w, tile + o * pitch + start + u, pitch, K);
        EXPECT_TRUE(same_bits(acc[o][u], want)) << "o=" << o << " u=" << u;
      }
  }
}

// The runtime-k window (K = 0, every odd k up to the largest) against the plain double loop it
// replaced, and against the compile-time windows where those exist: same terms, same order, same
// bits, on a tile wider than the window (pitch > k) with the window at every column phase.
TEST(WtconvStripsHost, RuntimeWindowMatchesThePlainLoopBitForBit) {
  constexpr int kPitch = 21;
  const std::vector<float> tile = random_floats(kPitch * kWtconvMaxKernelSize + 8, 41);
  const std::vector<float> w = random_floats(kWtconvMaxKernelSize * kWtconvMaxKernelSize, 42);
  for (int k = 1; k <= kWtconvMaxKernelSize; k += 2)
    for (int col = 0; col + k <= kPitch; col += 3) {
      const float* src = tile.data() + col;
      float want = 0.f;
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < k; ++j) want = std::fmaf(w[i * k + j], src[i * kPitch + j], want);
      const float got = conv_window<0>(w.data(), src, kPitch, k);
      EXPECT_TRUE(same_bits(got, want)) << "k " << k << " col " << col << ": " << got << " vs " << want;
      if (k == 3) EXPECT_TRUE(same_bits(conv_window<3>(w.data(), src, kPitch, k), got));
      if (k == 5) EXPECT_TRUE(same_bits(conv_window<5>(w.data(), src, kPitch, k), got));
      if (k == 7) EXPECT_TRUE(same_bits(conv_window<7>(w.data(), src, kPitch, k), got));
    }
}

// N adjacent runtime-k windows at once against conv_window<0> per output: every odd k, every
// count of valid outputs, every column phase. Past the last valid window the rows hold NaN, which
// the valid outputs must not see; so do the filter rows past k, laid out as the base kernels lay
// them out (filter_row_pitch: rows of whole quads, which conv_adjacent_windows reads as quads),
// while conv_window<0> reads the same filter with its row pitch given and without it, packed.
template <int N>
void check_adjacent_windows() {
  constexpr int kPitch = 24, kRows = kWtconvMaxKernelSize;
  const std::vector<float> w = random_floats(kWtconvMaxKernelSize * kWtconvMaxKernelSize, 43);
  const std::vector<float> values = random_floats(kPitch * kRows, 44);
  for (int k = 1; k <= kWtconvMaxKernelSize; k += 2) {
    const int wp = filter_row_pitch(k);
    std::vector<float4> padded_storage((k * wp + 3) / 4);  // 16-byte aligned
    float* const padded = reinterpret_cast<float*>(padded_storage.data());
    for (int e = 0; e < k * wp; ++e) padded[e] = e % wp < k ? w[e / wp * k + e % wp] : std::nanf("");
    for (int ncols = 1; ncols <= N; ++ncols)
      for (int col = 0; col + k + ncols - 1 <= kPitch; col += 5) {
        std::vector<float> tile(values);
        for (int i = 0; i < kRows; ++i)
          for (int m = col + k + ncols - 1; m < kPitch; ++m) tile[i * kPitch + m] = std::nanf("");
        float acc[N];
        conv_adjacent_windows<N>(padded, wp, tile.data() + col, kPitch, k, ncols, acc);
        for (int u = 0; u < ncols; ++u) {
          const float want = conv_window<0>(w.data(), tile.data() + col + u, kPitch, k);
          EXPECT_TRUE(same_bits(conv_window<0>(padded, tile.data() + col + u, kPitch, k, wp), want));
          EXPECT_TRUE(same_bits(acc[u], want))
              << "N " << N << " k " << k << " ncols " << ncols << " col " << col << " u " << u;
        }
      }
  }
}

TEST(WtconvStripsHost, AdjacentRuntimeWindowsMatchOneWindowAtATimeBitForBit) {
  check_adjacent_windows<2>();
  check_adjacent_windows<4>();
}

// The same windows with their inputs read as 2- and 4-float vectors (conv_adjacent_windows_by,
// as the runtime-k base kernels call it) from every phase of the vector grid: every float that
// no valid window needs, in the rows and around them (the vectors read past both ends), is NaN,
// which the valid outputs must not see.
template <int N>
void check_vector_windows() {
  constexpr int kPitch = 28, kRows = kWtconvMaxKernelSize, kLead = 8;
  const std::vector<float> w = random_floats(kWtconvMaxKernelSize * kWtconvMaxKernelSize, 45);
  const std::vector<float> values = random_floats(kPitch * kRows, 46);
  std::vector<float4> storage((kLead + kPitch * kRows + 16) / 4);  // 16-byte aligned
  float* const buf = reinterpret_cast<float*>(storage.data());
  const float nan = std::nanf("");
  for (int k = 1; k <= kWtconvMaxKernelSize; k += 2) {
    const int wp = filter_row_pitch(k);
    std::vector<float4> padded_storage((k * wp + 3) / 4);
    float* const padded = reinterpret_cast<float*>(padded_storage.data());
    for (int e = 0; e < k * wp; ++e) padded[e] = e % wp < k ? w[e / wp * k + e % wp] : nan;
    for (int v : {1, 2, 4})
      for (int ncols = 1; ncols <= N; ++ncols)
        for (int col = 0; col + k + ncols - 1 <= kPitch; ++col) {
          for (size_t e = 0; e < storage.size() * 4; ++e) buf[e] = nan;
          float* const tile = buf + kLead;
          for (int i = 0; i < k; ++i)
            for (int m = col; m < col + k + ncols - 1; ++m) tile[i * kPitch + m] = values[i * kPitch + m];
          float acc[N];
          conv_adjacent_windows_by<N>(v, padded, wp, tile + col, kPitch, k, ncols, acc);
          for (int u = 0; u < ncols; ++u) {
            const float want = conv_window<0>(w.data(), tile + col + u, kPitch, k);
            EXPECT_TRUE(same_bits(acc[u], want))
                << "N " << N << " V " << v << " k " << k << " ncols " << ncols << " col " << col << " u " << u;
          }
        }
  }
}

TEST(WtconvStripsHost, VectorReadWindowsMatchOneWindowAtATimeBitForBit) {
  check_vector_windows<2>();
  check_vector_windows<4>();
}

TEST(WtconvStripsHost, QuadStripsMatchTheWindowSumBitForBit) {
  check_quad_strips<1, 4>();
  check_quad_strips<3, 4>();
  check_quad_strips<5, 4>();
  check_quad_strips<5, 8>();
  check_quad_strips<7, 4>();
}

TEST(WtconvStripsHost, ColumnAndPairStripsMatchTheWindowSumBitForBit) {
  check_strips<3, 4>();
  check_strips<3, 8>();
  check_strips<5, 4>();
  check_strips<5, 8>();
  check_strips<7, 4>();
}

// Partial strips never read a row at or past rows_left: with NaN there, every output the strip
// returns (also those the kernels discard, which read the clamped last valid row) stays finite.
template <int K, int R>
void check_strips_stop_at_rows_left() {
  constexpr int pitch = 2 * K + 8;
  constexpr int kFloats = (R + K + 2) * pitch;
  alignas(16) float tile[kFloats];
  alignas(16) float w[K * K + 4];
  const std::vector<float> wv = random_floats(K * K + 4, 3 * K + R);
  std::memcpy(w, wv.data(), sizeof w);
  for (int rows_left = 1; rows_left < R + K - 1; ++rows_left) {
    SCOPED_TRACE("K=" + std::to_string(K) + " R=" + std::to_string(R) + " rows_left=" + std::to_string(rows_left));
    const std::vector<float> t = random_floats(kFloats, 17 * K + R + rows_left);
    std::memcpy(tile, t.data(), sizeof tile);
    for (int e = rows_left * pitch; e < kFloats; ++e) tile[e] = std::nanf("");
    float acc[R], acc_a[R], acc2[R][2], acc3[R][2];
    conv_column_strip<K, R>(w, tile + 1, pitch, rows_left, acc);
    conv_column_strip<K, R, true>(w, tile + 1, pitch, rows_left, acc_a);
    conv_pair_strip<K, R, false>(w, tile + 2, pitch, rows_left, acc2);
    conv_pair_strip<K, R, true>(w, tile + 3, pitch, rows_left, acc3);
    for (int o = 0; o < R; ++o) {
      EXPECT_FALSE(std::isnan(acc[o])) << "column strip o=" << o;
      EXPECT_FALSE(std::isnan(acc_a[o])) << "column strip (aligned filter) o=" << o;
      for (int u = 0; u < 2; ++u) {
        EXPECT_FALSE(std::isnan(acc2[o][u])) << "pair strip o=" << o << " u=" << u;
        EXPECT_FALSE(std::isnan(acc3[o][u])) << "odd pair strip o=" << o << " u=" << u;
      }
    }
  }
}

TEST(WtconvStripsHost, PartialStripsReadNoRowPastRowsLeft) {
  check_strips_stop_at_rows_left<3, 4>();
  check_strips_stop_at_rows_left<3, 8>();
  check_strips_stop_at_rows_left<5, 4>();
  check_strips_stop_at_rows_left<5, 8>();
  check_strips_stop_at_rows_left<7, 4>();
}

// Records the (plane, row) pairs it is called with; callable from host-device code (a host
// lambda there draws nvcc's host-from-host-device warning).
struct RowRecorder {
  int* rows_seen;
  int* count;
  int capacity;
  __host__ __device__ void operator()(int p, int y) const {
    if (*count < capacity) rows_seen[(*count)++] = p * 1000 + y;
  }
};

// The one-plane instance of for_strided_rows (kOnePlane, the fixed tiles) visits the rows the
// general one visits for np = 1.
TEST(WtconvStripsHost, OnePlaneStridedRowsVisitExactlyTheRowsOfTheStride) {
  for (int rows = 1; rows <= 9; ++rows)
    for (int step = 1; step <= 25; ++step)
      for (int first = 0; first < step; ++first) {
        int seen[16], count = 0;
        for_strided_rows<true>(first, step, rows, 1, RowRecorder{seen, &count, 16});
        std::vector<int> want;
        for (int row = first; row < rows; row += step) want.push_back(row);
        EXPECT_EQ(std::vector<int>(seen, seen + count), want) << "rows=" << rows << " step=" << step << " first=" << first;
      }
}

// corr_row_quads with kWhole (no partial last chunk: n a multiple of corr_quad_chunk) and
// corr_row_maybe_quads on both of its paths (quads for whole quads, corr_row for the rest, here
// rows of n % 4 != 0 that the quad path cannot take): the same bits as the plain loop.
template <int K, int kOy, int kOg>
void check_corr_row_quads_whole_and_maybe() {
  constexpr int kPad = 16, kLen = 512;
  constexpr int CH = corr_quad_chunk(K, kOy, kOg);
  alignas(16) float ybuf[kLen], gbuf[kLen];
  const std::vector<float> yv = random_floats(kLen, 71 + K), gv = random_floats(kLen, 73 + K);
  const float* y = ybuf + kPad + kOy;
  const float* g = gbuf + kPad + kOg;
  for (int n = 1; n <= 3 * CH && n + K + 8 + kPad < kLen; ++n) {
    const bool whole = n % CH == 0, quads = n % 4 == 0;
    SCOPED_TRACE("K=" + std::to_string(K) + " oy=" + std::to_string(kOy) + " og=" + std::to_string(kOg) +
                 " n=" + std::to_string(n));
    for (int i = 0; i < kLen; ++i) ybuf[i] = gbuf[i] = std::nanf("");
    std::memcpy(ybuf + kPad + kOy, yv.data(), sizeof(float) * size_t(n + K - 1));
    std::memcpy(gbuf + kPad + kOg, gv.data(), sizeof(float) * size_t(n));
    float want[K];
    for (int j = 0; j < K; ++j) want[j] = 0.25f * float(j) - 1.f;
    float gsum_want = 0.5f;
    corr_reference(want, y, g, n, K, &gsum_want);
    float acc[K];
    float gsum = 0.5f;
    for (int j = 0; j < K; ++j) acc[j] = 0.25f * float(j) - 1.f;
    corr_row_maybe_quads<K, kOy, kOg, true>(quads, acc, y, g, n, K, &gsum);
    for (int j = 0; j < K; ++j) EXPECT_TRUE(same_bits(acc[j], want[j])) << "maybe quads=" << quads << " j=" << j;
    EXPECT_TRUE(same_bits(gsum, gsum_want)) << "maybe quads=" << quads;
    if (whole) {
      gsum = 0.5f;
      for (int j = 0; j < K; ++j) acc[j] = 0.25f * float(j) - 1.f;
      corr_row_quads<K, kOy, kOg, true, true>(acc, y, g, n, &gsum);
      for (int j = 0; j < K; ++j) EXPECT_TRUE(same_bits(acc[j], want[j])) << "kWhole j=" << j;
      EXPECT_TRUE(same_bits(gsum, gsum_want)) << "kWhole";
      gsum = 0.5f;
      for (int j = 0; j < K; ++j) acc[j] = 0.25f * float(j) - 1.f;
      corr_row_maybe_quads<K, kOy, kOg, true, true>(true, acc, y, g, n, K, &gsum);
      for (int j = 0; j < K; ++j) EXPECT_TRUE(same_bits(acc[j], want[j])) << "maybe kWhole j=" << j;
    }
  }
}

TEST(WtconvStripsHost, WholeChunkAndMaybeQuadCorrelationRowsMatchThePlainLoop) {
  check_corr_row_quads_whole_and_maybe<3, 0, 0>();
  check_corr_row_quads_whole_and_maybe<3, 3, 1>();
  check_corr_row_quads_whole_and_maybe<5, 1, 2>();
  check_corr_row_quads_whole_and_maybe<5, 0, 2>();
  check_corr_row_quads_whole_and_maybe<7, 3, 2>();
  check_corr_row_quads_whole_and_maybe<7, 2, 0>();
}

// window_vector_width: the widest V in {4, 2} with pitch % V == 0 and V <= n_max (every row, and
// every lane's job n_max floats apart, at one phase), 1 otherwise and always at k = 1.
TEST(WtconvStripsHost, WindowVectorWidthIsTheWidestThatKeepsOnePhase) {
  for (int k = 1; k <= kWtconvMaxKernelSize; k += 2)
    for (int pitch = 1; pitch <= 40; ++pitch)
      for (int n_max = 1; n_max <= 6; ++n_max) {
        int want = 1;
        if (k > 1)
          for (int v : {4, 2})
            if (pitch % v == 0 && v <= n_max) {
              want = v;
              break;
            }
        EXPECT_EQ(window_vector_width(k, pitch, n_max), want) << "k=" << k << " pitch=" << pitch << " n_max=" << n_max;
      }
}

// strip_rows: 8-row strips for k = 3 and 5 from 16 tile rows on, 4 otherwise.
TEST(WtconvStripsHost, StripRowsRule) {
  for (int k = 1; k <= kWtconvMaxKernelSize; k += 2)
    for (int rows = 1; rows <= 64; ++rows)
      EXPECT_EQ(strip_rows(k, rows), (k == 3 || k == 5) && rows >= 16 ? 8 : 4) << "k=" << k << " rows=" << rows;
}

// conv_adjacent_windows reads src[i * pitch + m] for m < k + ncols - 1 only: the last row ends at
// a page that is not readable, so a read past the windows faults.
TEST(WtconvStripsHost, AdjacentWindowsReadNothingPastTheLastWindow) {
  const long page = sysconf(_SC_PAGESIZE);
  void* const mem = mmap(nullptr, size_t(2 * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mem) + page, size_t(page), PROT_NONE), 0);
  float* const end = reinterpret_cast<float*>(static_cast<char*>(mem) + page);  // first unreadable float
  constexpr int kPitch = 24;
  const std::vector<float> w = random_floats(kWtconvMaxKernelSize * kWtconvMaxKernelSize, 47);
  for (int k = 1; k <= kWtconvMaxKernelSize; k += 2) {
    const int wp = filter_row_pitch(k);
    std::vector<float4> padded_storage((k * wp + 3) / 4);
    float* const padded = reinterpret_cast<float*>(padded_storage.data());
    for (int e = 0; e < k * wp; ++e) padded[e] = e % wp < k ? w[e / wp * k + e % wp] : 0.f;
    for (int ncols = 1; ncols <= 4; ++ncols) {
      // The last row's last read float, src[(k - 1) * pitch + k + ncols - 2], is the page's last.
      float* const src = end - ((k - 1) * kPitch + k + ncols - 1);
      for (float* p = src; p < end; ++p) *p = 0.5f;
      float acc[4];
      conv_adjacent_windows<4>(padded, wp, src, kPitch, k, ncols, acc);
      for (int u = 0; u < ncols; ++u)
        EXPECT_TRUE(same_bits(acc[u], conv_window<0>(padded, src + u, kPitch, k, wp))) << "k " << k << " u " << u;
    }
  }
  munmap(mem, size_t(2 * page));
}

}  // namespace
}  // namespace wtconv_detail
}  // namespace winconv
