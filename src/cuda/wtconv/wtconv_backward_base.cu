// Backward, base conv fused with level 1. Per tile of level-1 coefficients (2x2 pixels each) it
// reads x and dy (dy expanded on chip to the zero-filled full-resolution D when stride > 1) with a
// halo and dX_1, forms Y_1 = Haar(x) and G_1 = Haar(D) on chip and writes
//   dx = s0 * (flipped W0) conv D + synthesis of (s_1 * (flipped W_1) conv G_1, + dX_1 at LL),
// plus per-block partial sums of the correlations C0 = corr(x, D), sum(D) and C_1 = corr(Y_1, G_1)
// (fixed order, no atomics). HBM: reads x, dy, dX_1; writes dx and C x splits x (5kk + 1) partials.
#include "wtconv_kernels.cuh"

namespace winconv {
namespace wtconv_detail {

template <typename T, int K>
__global__ void __launch_bounds__(kBlockThreads, 3) backward_base_kernel(BwdBaseArgs<T> a) {
  extern __shared__ float smem[];
  constexpr int KM = K > 0 ? K : 15;
  const int k = K ? K : a.k, r = k / 2, kk = k * k, s = a.stride;
  const int c = blockIdx.x / a.g.splits, split = blockIdx.x % a.g.splits;
  const int th = a.g.th, tw = a.g.tw, np = a.g.np;
  const int eh = th + 2 * r, ew = tw + 2 * r, plane = eh * ew;
  const int ph = 2 * eh, pw = 2 * ew, pplane = ph * pw;
  const int jobs = 8 * k, parts = kBlockThreads / jobs;
  float* w0f = smem;                  // kk: s0 * W0 flipped
  float* w1f = w0f + kk;              // 4kk: s1 * W1 flipped
  float* xs = w1f + 4 * kk;           // np x pplane
  float* ds = xs + np * pplane;       // np x pplane
  float* ys = ds + np * pplane;       // np x 4 x plane
  float* gs = ys + np * 4 * plane;    // np x 4 x plane
  float* dz = gs + np * 4 * plane;    // np x 4 x th x tw subband convs + dX_1 (compile-time k only)
  float* red = dz + np * 4 * th * tw; // parts x jobs x k
  float* red_sum = red + parts * jobs * k;  // parts x 4

  const float s0 = a.s0[c];
  for (int i = threadIdx.x; i < 5 * kk; i += blockDim.x) {
    if (i < kk) {
      w0f[i] = s0 * a.w0[int64_t(c) * kk + (kk - 1 - i)];
    } else {
      const int e = i - kk, t = e / kk, ij = e % kk;
      w1f[e] = a.s1[4 * c + t] * a.w1[int64_t(4 * c + t) * kk + (kk - 1 - ij)];
    }
  }
  // Correlation jobs: [0, 4k) level 1 (subband, kernel row); [4k, 8k) base (row quarter, kernel row).
  const int job = threadIdx.x % jobs, part = threadIdx.x / jobs;
  const bool corr_thread = part < parts;
  const bool base_job = job >= 4 * k;
  const int jb = base_job ? job - 4 * k : job;
  const int sb = jb / k, ci = jb % k;  // level: subband; base: quarter
  double tot[KM];
#pragma unroll
  for (int j = 0; j < KM; ++j) tot[j] = 0.0;
  double tot_sum = 0.0;

  int64_t begin, end;
  item_range(a.g.items, a.g.splits, split, &begin, &end);
  for (int64_t item = begin; item < end; ++item) {
    const ItemPos pos = decode_item(a.g, item);
    const int py0 = 2 * (pos.y0 - r), px0 = 2 * (pos.x0 - r);  // pixel origin of the tile region
    __syncthreads();
    stage_tile<4>(
        np * pplane,
        [&](int e) {
          const int p = e / pplane, rem = e - p * pplane, yy = rem / pw, xx = rem - yy * pw;
          const int b = pos.b0 + p, y = py0 + yy, x = px0 + xx;
          float2 v = make_float2(0.f, 0.f);  // (x, D)
          if (b < a.B && y >= 0 && x >= 0 && y < a.H && x < a.W) {
            const int64_t pl = int64_t(b) * a.C + c;
            v.x = to_float(a.x[pl * a.H * a.W + int64_t(y) * a.W + x]);
            if (s == 1) v.y = to_float(a.dy[pl * a.Ho * a.Wo + int64_t(y) * a.Wo + x]);
            else if (y % s == 0 && x % s == 0)
              v.y = to_float(a.dy[pl * a.Ho * a.Wo + int64_t(y / s) * a.Wo + x / s]);
          }
          return v;
        },
        [&](int e, float2 v) {
          xs[e] = v.x;
          ds[e] = v.y;
        });
    __syncthreads();
    for (int e = threadIdx.x; e < np * plane; e += blockDim.x) {
      const int p = e / plane, rem = e % plane, yy = rem / ew, xx = rem % ew;
      const float* xp = xs + p * pplane + (2 * yy) * pw + 2 * xx;
      const float* dp = ds + p * pplane + (2 * yy) * pw + 2 * xx;
      float z[4], g[4];
      haar4(xp[0], xp[1], xp[pw], xp[pw + 1], z);
      haar4(dp[0], dp[1], dp[pw], dp[pw + 1], g);
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        ys[(p * 4 + t) * plane + rem] = z[t];
        gs[(p * 4 + t) * plane + rem] = g[t];
      }
    }
    __syncthreads();
    if constexpr (K > 0) {
      // Level-1 subband convs, register-blocked (one column strip of one subband per job), + dX_1.
      const int strips = (th + kStripRows - 1) / kStripRows;
      for (int e = threadIdx.x; e < np * 4 * strips * tw; e += blockDim.x) {
        const StripJob j = strip_job(e, tw, strips);  // slot = p * 4 + subband
        const int p = j.slot >> 2, t = j.slot & 3;
        const int b = pos.b0 + p, qx = pos.x0 + j.col;
        // dX_1 at LL, loaded before the conv so its latency hides behind the arithmetic.
        bool has_res[kStripRows];
        float res[kStripRows];
#pragma unroll
        for (int o = 0; o < kStripRows; ++o) {
          const int ty = j.row0 + o, qy = pos.y0 + ty;
          has_res[o] = t == 0 && a.dxin && ty < th && b < a.B && qy < a.h1 && qx < a.w1g;
          res[o] = has_res[o] ? a.dxin[(int64_t(b) * a.C + c) * a.h1 * a.w1g + int64_t(qy) * a.w1g + qx] : 0.f;
        }
        float acc[kStripRows];
        conv_column_strip<K, kStripRows>(w1f + t * kk, gs + j.slot * plane + j.row0 * ew + j.col, ew,
                                         eh - j.row0, acc);
#pragma unroll
        for (int o = 0; o < kStripRows; ++o) {
          const int ty = j.row0 + o;
          if (ty >= th) break;
          if (has_res[o]) acc[o] += res[o];
          dz[(j.slot * th + ty) * tw + j.col] = acc[o];
        }
      }
      __syncthreads();
      // dx: base conv of D, register-blocked over pixel column strips, + synthesis of dz.
      const int pth = 2 * th, ptw = 2 * tw, pstrips = (pth + kStripRows - 1) / kStripRows;
      for (int e = threadIdx.x; e < np * pstrips * ptw; e += blockDim.x) {
        const StripJob j = strip_job(e, ptw, pstrips);  // slot = p
        const int p = j.slot, b = pos.b0 + p, x = 2 * pos.x0 + j.col, y0 = 2 * pos.y0 + j.row0;
        if (b >= a.B || x >= a.W || y0 >= a.H) continue;
        float acc[kStripRows];
        conv_column_strip<K, kStripRows>(w0f, ds + p * pplane + (j.row0 + r) * pw + (j.col + r), pw,
                                         ph - (j.row0 + r), acc);
        const int64_t pl = int64_t(b) * a.C + c;
        const int tx = j.col >> 1;
#pragma unroll
        for (int o = 0; o < kStripRows; ++o) {
          const int yy = j.row0 + o, y = y0 + o;
          if (yy >= pth || y >= a.H) break;
          const float* dp = dz + (p * 4 * th + (yy >> 1)) * tw + tx;
          const float d[4] = {dp[0], dp[th * tw], dp[2 * th * tw], dp[3 * th * tw]};
          a.dx[pl * a.H * a.W + int64_t(y) * a.W + x] = from_float<T>(acc[o] + 0.5f * synth_child(d, yy & 1, j.col & 1));
        }
      }
    } else {
      // dx: one level-1 coefficient, i.e. a 2x2 pixel block, per thread.
      for (int e = threadIdx.x; e < np * th * tw; e += blockDim.x) {
        const int p = e / (th * tw), ty = (e / tw) % th, tx = e % tw;
        const int b = pos.b0 + p, qy = pos.y0 + ty, qx = pos.x0 + tx;
        if (b >= a.B || qy >= a.h1 || qx >= a.w1g) continue;
        float d[4];
#pragma unroll
        for (int t = 0; t < 4; ++t)
          d[t] = conv_window<K>(w1f + t * kk, gs + (p * 4 + t) * plane + ty * ew + tx, ew, k);
        const int64_t pl = int64_t(b) * a.C + c;
        if (a.dxin) d[0] += a.dxin[pl * a.h1 * a.w1g + int64_t(qy) * a.w1g + qx];
#pragma unroll
        for (int dy = 0; dy < 2; ++dy) {
          const int y = 2 * qy + dy;
          if (y >= a.H) break;
#pragma unroll
          for (int dx = 0; dx < 2; ++dx) {
            const int x = 2 * qx + dx;
            if (x >= a.W) continue;
            const float base = conv_window<K>(w0f, ds + p * pplane + (2 * ty + dy + r) * pw + (2 * tx + dx + r), pw, k);
            a.dx[pl * a.H * a.W + int64_t(y) * a.W + x] = from_float<T>(base + 0.5f * synth_child(d, dy, dx));
          }
        }
      }
    }
    if (corr_thread) {
      float acc[KM];
#pragma unroll
      for (int j = 0; j < KM; ++j) acc[j] = 0.f;
      float dsum = 0.f;
      if (!base_job) {
        for (int row = part; row < np * th; row += parts) {
          const int p = row / th, ty = row % th;
          corr_row<K>(acc, ys + (p * 4 + sb) * plane + (ty + ci) * ew,
                      gs + (p * 4 + sb) * plane + (ty + r) * ew + r, tw, k);
        }
      } else {
        for (int row = sb + 4 * part; row < np * 2 * th; row += 4 * parts) {
          const int p = row / (2 * th), py = row % (2 * th);
          const float* drow = ds + p * pplane + (py + 2 * r) * pw + 2 * r;
          corr_row<K>(acc, xs + p * pplane + (py + r + ci) * pw + r, drow, 2 * tw, k);
          if (ci == 0)
            for (int x = 0; x < 2 * tw; ++x) dsum += drow[x];
        }
      }
#pragma unroll
      for (int j = 0; j < KM; ++j) tot[j] += double(acc[j]);
      tot_sum += double(dsum);
    }
  }
  __syncthreads();
  if (corr_thread) {
#pragma unroll
    for (int j = 0; j < KM; ++j)
      if (K > 0 || j < k) red[(part * jobs + job) * k + j] = float(tot[j]);
    if (base_job && ci == 0) red_sum[part * 4 + sb] = float(tot_sum);
  }
  __syncthreads();
  // Partial layout per (channel, split): [0, kk) C0, [kk] sum(D), [kk + 1, 5kk + 1) C_1.
  float* out = a.partial + (int64_t(c) * a.g.splits + split) * (5 * kk + 1);
  for (int e = threadIdx.x; e < 5 * kk + 1; e += blockDim.x) {
    float sum = 0.f;
    if (e < kk) {
      const int i = e / k, j = e % k;
      for (int u = 0; u < 4; ++u)
        for (int q = 0; q < parts; ++q) sum += red[(q * jobs + 4 * k + u * k + i) * k + j];
    } else if (e == kk) {
      for (int u = 0; u < 4; ++u)
        for (int q = 0; q < parts; ++q) sum += red_sum[q * 4 + u];
    } else {
      const int f = e - kk - 1, t = f / kk, i = (f / k) % k, j = f % k;
      for (int q = 0; q < parts; ++q) sum += red[(q * jobs + t * k + i) * k + j];
    }
    out[e] = sum;
  }
}

template <typename T>
cudaError_t launch_backward_base(const BwdBaseArgs<T>& a, size_t smem, cudaStream_t stream) {
  const unsigned blocks = unsigned(int64_t(a.C) * a.g.splits);
  auto go = [&](auto kernel) {
    if (smem > 48 * 1024) {
      cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      if (e != cudaSuccess) return e;
    }
    kernel<<<blocks, kBlockThreads, smem, stream>>>(a);
    return cudaGetLastError();
  };
  switch (a.k) {
    case 3: return go(backward_base_kernel<T, 3>);
    case 5: return go(backward_base_kernel<T, 5>);
    case 7: return go(backward_base_kernel<T, 7>);
    default: return go(backward_base_kernel<T, 0>);
  }
}

template cudaError_t launch_backward_base<float>(const BwdBaseArgs<float>&, size_t, cudaStream_t);
template cudaError_t launch_backward_base<__half>(const BwdBaseArgs<__half>&, size_t, cudaStream_t);
template cudaError_t launch_backward_base<__nv_bfloat16>(const BwdBaseArgs<__nv_bfloat16>&, size_t, cudaStream_t);

}  // namespace wtconv_detail
}  // namespace winconv
