// How each variant fills one stage of the A tile (BK window elements for each of BM output
// pixels) in shared memory. The scalar gathers share one thread mapping: a thread owns ONE output
// pixel (so its position is decoded once per kernel, not per element) and kPerThread consecutive
// reduction indices (walked incrementally, or looked up in the reduction table when there is no
// padding). Lanes of a warp own consecutive pixels, so the
// shared-memory stores are conflict-free, and each thread's run of reduction indices touches
// one contiguous stretch of memory (a filter row of x, a window run, or a channel run).
//
// Reduction order per variant (the filter is repacked to match):
//   OnChipNchw    kk = (c, u, v)  element x[n, c, p*sh+u-ph, q*sw+v-pw], zero outside
//   OnChipNhwc    kk = (u, v, c)  element x[n, p*sh+u-ph, q*sw+v-pw, c], zero outside
//   WindowNchw    kk = (c, j)     element I_hat[n, c, p, q*sw*R + j], j < S*R (one run per channel)
//   WindowNhwc    kk = j          element I_hat[n, p, q*sw, j], j < S*R*C (one run per pixel)
//
// The on-chip gathers read each element's offset from the reduction table (reduction_table.h);
// with padding, also its tap bits, tested against the pixel's outside mask (tap_mask.h), where
// R and S allow it. The others step mixed-radix digits (reduction_digits.h): the pipeline
// loads the stages in k order, BK apart, from k_begin (the first index of the block's reduction
// split), so such a gather keeps the digits of its first reduction index and steps them by BK
// per stage: no division in the loop.
// A predicated-off copy reads nothing; it keeps an address inside the tensor (the window or
// image start of the owned pixel, pixel 0's for a tail pixel) rather than selecting a 64-bit
// fallback pointer per element.
#pragma once

#include "cuda/im2win/async_copy.cuh"
#include "cuda/im2win/conv_gemm_params.h"
#include "cuda/im2win/reduction_digits.h"
#include "cuda/im2win/tap_mask.h"

namespace winconv::im2win {

// Output pixel m -> image, output row, output column.
__device__ __forceinline__ void decode_pixel(const ConvGemmParams& p, int m, int& img, int& op, int& oq) {
  img = m / p.pq;
  const int pq = m - img * p.pq;
  op = pq / p.q;
  oq = pq - op * p.q;
}

// Where the on-chip window of pixel (img, op, oq) starts in x: its image and its top-left input
// coordinate, which padding may put outside the image.
struct WindowOrigin {
  const float* image;
  int ih0, iw0;
  __device__ WindowOrigin(const ConvGemmParams& p, int img, int op, int oq)
      : image(p.a_src + int64_t(img) * p.a_image_stride),
        ih0(op * p.stride_h - p.pad_h),
        iw0(oq * p.stride_w - p.pad_w) {}
  // The origin's offset in elements from the image start (negative above or left of the image):
  // the reduction table's offsets are taken from it.
  __device__ int offset(const ConvGemmParams& p, bool nhwc) const { return (ih0 * p.w + iw0) * (nhwc ? p.c : 1); }
};

template <int BM, int BK, int THREADS>
struct GatherMapping {
  static_assert(THREADS % BM == 0, "each pixel must be owned by a whole number of threads");
  static constexpr int kThreadsPerPixel = THREADS / BM;
  static constexpr int kPerThread = BK / kThreadsPerPixel;
  static_assert(kPerThread * kThreadsPerPixel == BK, "BK must split evenly among a pixel's threads");

  static constexpr bool kMajorM = false;  // A stage stored [BK][BM]
  int m_local, kk_local0;
  bool m_valid;
  int img, op, oq;  // the owned pixel: image, output row, output column

  __device__ GatherMapping(const ConvGemmParams& p, int m0, int tid) {
    m_local = tid % BM;
    kk_local0 = (tid / BM) * kPerThread;
    const int m = m0 + m_local;
    m_valid = m < p.m;
    decode_pixel(p, m_valid ? m : 0, img, op, oq);
  }
  __device__ float* dst(float* as, int i) const { return as + (kk_local0 + i) * BM + m_local; }
};

// On-chip windows without padding, through the reduction table (reduction_table.h): every
// window lies inside its image and element kk sits at table[kk] from the window origin, so one
// address add forms each copy's source and the only predicate is the reduction tail (a tail
// pixel gets kk_end = 0 and pixel 0's window, which is inside the image). Padded windows take
// GatherOnChipTapMask below.
template <int BM, int BK, int THREADS, bool kNhwc>
struct GatherOnChipUnpadded : GatherMapping<BM, BK, THREADS> {
  using Base = GatherMapping<BM, BK, THREADS>;
  static_assert(Base::kPerThread % 4 == 0, "the table is read in 16-byte vectors");
  const float* window;  // x[n, 0, op*sh, oq*sw] (NCHW) or x[n, op*sh, oq*sw, 0] (NHWC)
  int kk_end;           // kg for a valid pixel, 0 for a tail pixel

  __device__ GatherOnChipUnpadded(const ConvGemmParams& p, int m0, int tid, int /*k_begin: stateless*/)
      : Base(p, m0, tid) {
    const WindowOrigin o(p, this->img, this->op, this->oq);
    window = o.image + o.offset(p, kNhwc);
    kk_end = this->m_valid ? p.kg : 0;
  }

  __device__ void load(const ConvGemmParams& p, float* as, int k0) const {
    const int kk = k0 + this->kk_local0;
    int off[Base::kPerThread];
#pragma unroll
    for (int j = 0; j < Base::kPerThread / 4; ++j)
      *reinterpret_cast<int4*>(&off[4 * j]) = __ldg(reinterpret_cast<const int4*>(p.k_table + kk) + j);
#pragma unroll
    for (int i = 0; i < Base::kPerThread; ++i) cp_async_4(this->dst(as, i), window + off[i], kk + i < kk_end);
  }
};

template <int BM, int BK, int THREADS>
using GatherOnChipNchwUnpadded = GatherOnChipUnpadded<BM, BK, THREADS, false>;
template <int BM, int BK, int THREADS>
using GatherOnChipNhwcUnpadded = GatherOnChipUnpadded<BM, BK, THREADS, true>;

// On-chip windows with padding, R and S up to kTapMaskMaxExtent: offsets from the reduction
// table as in the unpadded gather, and its tap bits (the table's second run) tested against the
// pixel's outside mask, one AND per element, which also covers the reduction and pixel tails
// (tap_mask.h). The window origin may lie outside the image, so the source is formed from the
// image start, and a copy that is off points at the image's first element. (v8 tried the tap's row
// and column from two more tables instead, tested against the image bounds per element: 48
// values per thread and stage in the 128x64 tile, 10-27% slower on grids of about one block
// per SM than the digit walk below.)
template <int BM, int BK, int THREADS, bool kNhwc>
struct GatherOnChipTapMask : GatherMapping<BM, BK, THREADS> {
  using Base = GatherMapping<BM, BK, THREADS>;
  static_assert(Base::kPerThread % 4 == 0, "the table is read in 16-byte vectors");
  const float* image;
  int origin;        // WindowOrigin::offset
  uint32_t outside;  // tap_mask.h

  __device__ GatherOnChipTapMask(const ConvGemmParams& p, int m0, int tid, int /*k_begin: stateless*/)
      : Base(p, m0, tid) {
    const WindowOrigin o(p, this->img, this->op, this->oq);
    image = o.image;
    origin = o.offset(p, kNhwc);
    outside = outside_mask(this->m_valid, o.ih0, o.iw0, p.h, p.w, p.r, p.s);
  }

  __device__ void load(const ConvGemmParams& p, float* as, int k0) const {
    const int kk = k0 + this->kk_local0;
    const int4* offsets = reinterpret_cast<const int4*>(p.k_table + kk);
    const int4* taps = reinterpret_cast<const int4*>(p.k_table + p.kg_pad + kk);
#pragma unroll
    for (int j = 0; j < Base::kPerThread / 4; ++j) {
      const int4 off = __ldg(offsets + j), tap = __ldg(taps + j);
      const int o[4] = {off.x, off.y, off.z, off.w};
      const int t[4] = {tap.x, tap.y, tap.z, tap.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const bool ok = tap_inside(uint32_t(t[i]), outside);
        cp_async_4(this->dst(as, 4 * j + i), image + (ok ? origin + o[i] : 0), ok);
      }
    }
  }
};

template <int BM, int BK, int THREADS>
using GatherOnChipNchwTapMask = GatherOnChipTapMask<BM, BK, THREADS, false>;
template <int BM, int BK, int THREADS>
using GatherOnChipNhwcTapMask = GatherOnChipTapMask<BM, BK, THREADS, true>;

// On-chip windows with padding and R or S above kTapMaskMaxExtent: the tap's row and column are
// needed for the bounds test, so the gather keeps the digits of its reduction index, most
// significant first: (c, u, v) in NCHW with radices (R, S), (u, v, c) in NHWC with radices (S, C).
template <int BM, int BK, int THREADS, bool kNhwc>
struct GatherOnChipPadded : GatherMapping<BM, BK, THREADS> {
  using Base = GatherMapping<BM, BK, THREADS>;
  WindowOrigin origin;
  ReductionDigits pos, step;  // the digits of the next stage's first element; BK as digits

  __device__ static int mid_radix(const ConvGemmParams& p) { return kNhwc ? p.s : p.r; }
  __device__ static int lo_radix(const ConvGemmParams& p) { return kNhwc ? p.c : p.s; }

  __device__ GatherOnChipPadded(const ConvGemmParams& p, int m0, int tid, int k_begin)
      : Base(p, m0, tid),
        origin(p, this->img, this->op, this->oq),
        pos(split_reduction(k_begin + this->kk_local0, mid_radix(p), lo_radix(p))),
        step(split_reduction(BK, mid_radix(p), lo_radix(p))) {}

  __device__ void load(const ConvGemmParams& p, float* as, int k0) {
    int kk = k0 + this->kk_local0, hi = pos.hi, mid = pos.mid, lo = pos.lo;
#pragma unroll
    for (int i = 0; i < Base::kPerThread; ++i, ++kk) {
      const int c = kNhwc ? lo : hi, u = kNhwc ? hi : mid, v = kNhwc ? mid : lo;
      const int ih = origin.ih0 + u, iw = origin.iw0 + v;
      const bool ok = this->m_valid && kk < p.kg && unsigned(ih) < unsigned(p.h) && unsigned(iw) < unsigned(p.w);
      cp_async_4(this->dst(as, i),
                 origin.image + (ok ? (kNhwc ? (ih * p.w + iw) * p.c + c : (c * p.h + ih) * p.w + iw) : 0), ok);
      if (++lo == lo_radix(p)) { lo = 0; if (++mid == mid_radix(p)) { mid = 0; ++hi; } }
    }
    step_reduction(pos, step, mid_radix(p), lo_radix(p));
  }
};

template <int BM, int BK, int THREADS>
using GatherOnChipNchw = GatherOnChipPadded<BM, BK, THREADS, false>;
template <int BM, int BK, int THREADS>
using GatherOnChipNhwc = GatherOnChipPadded<BM, BK, THREADS, true>;

template <int BM, int BK, int THREADS>
struct GatherWindowNchw : GatherMapping<BM, BK, THREADS> {
  using Base = GatherMapping<BM, BK, THREADS>;
  const float* run;  // the window run of channel 0 for the owned pixel
  int channel_stride;
  ReductionDigits pos, step;  // (c, 0, j) of the next stage's first element; BK as digits

  __device__ GatherWindowNchw(const ConvGemmParams& p, int m0, int tid, int k_begin)
      : Base(p, m0, tid), pos(split_reduction(k_begin + this->kk_local0, 1, p.rs)), step(split_reduction(BK, 1, p.rs)) {
    channel_stride = p.p * p.w_padded * p.r;
    run = p.a_src + int64_t(this->img) * p.a_image_stride + this->op * p.w_padded * p.r +
          this->oq * p.stride_w * p.r;
  }

  __device__ void load(const ConvGemmParams& p, float* as, int k0) {
    int kk = k0 + this->kk_local0, c = pos.hi, j = pos.lo;
#pragma unroll
    for (int i = 0; i < Base::kPerThread; ++i, ++kk) {
      const bool ok = this->m_valid && kk < p.kg;
      cp_async_4(this->dst(as, i), run + (ok ? c * channel_stride + j : 0), ok);
      if (++j == p.rs) { j = 0; ++c; }
    }
    step_reduction(pos, step, 1, p.rs);
  }
};

template <int BM, int BK, int THREADS>
struct GatherWindowNhwc : GatherMapping<BM, BK, THREADS> {
  using Base = GatherMapping<BM, BK, THREADS>;
  const float* run;  // the whole window of the owned pixel: S*R*C contiguous elements

  __device__ GatherWindowNhwc(const ConvGemmParams& p, int m0, int tid, int /*k_begin: stateless*/)
      : Base(p, m0, tid) {
    run = p.a_src + int64_t(this->img) * p.a_image_stride +
          (int64_t(this->op) * p.w_padded + int64_t(this->oq) * p.stride_w) * p.r * p.c;
  }

  __device__ void load(const ConvGemmParams& p, float* as, int k0) const {
    const int kk0 = k0 + this->kk_local0;
#pragma unroll
    for (int i = 0; i < Base::kPerThread; ++i) {
      const bool ok = this->m_valid && kk0 + i < p.kg;
      cp_async_4(this->dst(as, i), ok ? run + kk0 + i : p.a_src, ok);
    }
  }
};

// ---- NHWC with C % 4 == 0: 16-byte copies along channels.
// Four lanes cover 16 consecutive channels (64 contiguous bytes) of one pixel, so a warp's copy
// touches 8 pixels x 64 bytes instead of 32 scattered words: the loads coalesce. The stage is
// stored pixel-major, [BM][kAPitch], because a 16-byte copy cannot transpose.
constexpr int kAPitchMajorM = 16 + 4;  // BK + 4: rows stay 16-byte aligned, reads broadcast

template <int BM, int BK, int THREADS, class Source>
struct GatherNhwcVec {
  static constexpr bool kMajorM = true;
  static_assert(BK + 4 == kAPitchMajorM, "pitch assumes BK = 16");
  static constexpr int kVecPerRow = BK / 4;
  static constexpr int kRowsPerPass = THREADS / kVecPerRow;
  static constexpr int kPasses = BM / kRowsPerPass;
  static_assert(kPasses * kRowsPerPass == BM, "pixels must split evenly into passes");

  int kv;
  Source src[kPasses];
  typename Source::Step step;  // the next stage's reduction position, advanced by BK per load()

  __device__ GatherNhwcVec(const ConvGemmParams& p, int m0, int tid, int k_begin) {
    kv = tid % kVecPerRow;
#pragma unroll
    for (int j = 0; j < kPasses; ++j) src[j].init(p, m0, tid / kVecPerRow + j * kRowsPerPass);
    step.init(p, k_begin + kv * 4, BK);
  }

  __device__ void load(const ConvGemmParams& p, float* as, int k0) {
    const int kk = k0 + kv * 4;
#pragma unroll
    for (int j = 0; j < kPasses; ++j) {
      const float* g = nullptr;
      const bool ok = kk < p.kg && src[j].address(p, step, kk, &g);
      cp_async_16(as + src[j].m_local * kAPitchMajorM + kv * 4, ok ? g : p.a_src, ok);
    }
    step.advance(p);
  }
};

// Decodes pixel m once; per stage, resolves the address of 4 channels at reduction index kk.
struct PixelOnChipNhwc {
  struct Step {
    ReductionDigits pos, by;  // (u, v, c) of the stage's reduction index; the stage depth
    __device__ void init(const ConvGemmParams& p, int kk, int bk) {
      pos = split_reduction(kk, p.s, p.c);
      by = split_reduction(bk, p.s, p.c);
    }
    __device__ void advance(const ConvGemmParams& p) { step_reduction(pos, by, p.s, p.c); }
  };
  const float* image;
  int ih0, iw0, m_local;
  bool valid;
  __device__ void init(const ConvGemmParams& p, int m0, int ml) {
    m_local = ml;
    valid = m0 + ml < p.m;
    int img, op, oq;
    decode_pixel(p, valid ? m0 + ml : 0, img, op, oq);
    const WindowOrigin o(p, img, op, oq);
    image = o.image;
    ih0 = o.ih0;
    iw0 = o.iw0;
  }
  __device__ bool address(const ConvGemmParams& p, const Step& st, int, const float** g) const {
    const int ih = ih0 + st.pos.hi, iw = iw0 + st.pos.mid;
    *g = image + (ih * p.w + iw) * p.c + st.pos.lo;
    return valid && unsigned(ih) < unsigned(p.h) && unsigned(iw) < unsigned(p.w);
  }
};

struct PixelWindowNhwc {
  struct Step {
    __device__ void init(const ConvGemmParams&, int, int) {}
    __device__ void advance(const ConvGemmParams&) {}
  };
  const float* run;
  int m_local;
  bool valid;
  __device__ void init(const ConvGemmParams& p, int m0, int ml) {
    m_local = ml;
    valid = m0 + ml < p.m;
    int img, op, oq;
    decode_pixel(p, valid ? m0 + ml : 0, img, op, oq);
    run = p.a_src + int64_t(img) * p.a_image_stride + (int64_t(op) * p.w_padded + int64_t(oq) * p.stride_w) * p.r * p.c;
  }
  __device__ bool address(const ConvGemmParams&, const Step&, int kk, const float** g) const {
    *g = run + kk;
    return valid;
  }
};

template <int BM, int BK, int THREADS>
using GatherOnChipNhwcVec = GatherNhwcVec<BM, BK, THREADS, PixelOnChipNhwc>;
template <int BM, int BK, int THREADS>
using GatherWindowNhwcVec = GatherNhwcVec<BM, BK, THREADS, PixelWindowNhwc>;

}  // namespace winconv::im2win
