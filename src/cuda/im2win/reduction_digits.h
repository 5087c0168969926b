// A reduction index of the im2win GEMM as mixed-radix digits, and its stepping.
//
// The window gathers walk the reduction index kk in stages BK apart (the pipeline loads them in
// k order). Each gather's kk is a filter position: NCHW (c, u, v), NHWC (u, v, c). Decoding kk
// at every stage costs two 32-bit integer divisions (20-35 instructions each on a GPU, which has
// no divider) in an issue-bound loop; stepping the digits by the precomputed digits of BK costs
// one compare-and-carry per digit.
#pragma once

#ifdef __CUDACC__
#define WINCONV_IM2WIN_HD __host__ __device__ __forceinline__
#else
#define WINCONV_IM2WIN_HD inline
#endif

namespace winconv::im2win {

// kk = (hi * n_mid + mid) * n_lo + lo, with mid < n_mid and lo < n_lo (hi is unbounded).
struct ReductionDigits {
  int hi, mid, lo;
};

WINCONV_IM2WIN_HD ReductionDigits split_reduction(int kk, int n_mid, int n_lo) {
  const int t = kk / n_lo, hi = t / n_mid;
  return ReductionDigits{hi, t - hi * n_mid, kk - t * n_lo};
}

// pos += step for digits of one radix. step comes from split_reduction, so step.mid < n_mid and
// step.lo < n_lo: the sums stay below twice the radix and one carry per digit is exact.
WINCONV_IM2WIN_HD void step_reduction(ReductionDigits& pos, const ReductionDigits& step, int n_mid, int n_lo) {
  pos.lo += step.lo;
  pos.mid += step.mid;
  pos.hi += step.hi;
  if (pos.lo >= n_lo) {
    pos.lo -= n_lo;
    ++pos.mid;
  }
  if (pos.mid >= n_mid) {
    pos.mid -= n_mid;
    ++pos.hi;
  }
}

}  // namespace winconv::im2win
