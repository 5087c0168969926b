// Forward, base conv fused with level 1 and the final synthesis: reads an x tile (with the halo
// both the k x k base conv and the level-1 subband conv need), forms Y_1 on chip, convolves it with
// 0.5 * s_1 * W_1, adds R_1 (levels >= 2, already synthesised on the level-1 grid), adds the
// base conv s0 * (W0 conv x + b) and writes y at the strided output positions only.
// HBM: reads x (+ halo) and R_1, writes y.
#include "wtconv_kernels.cuh"

namespace winconv {
namespace wtconv_detail {

template <typename T, int K>
__global__ void __launch_bounds__(kBlockThreads, K == 7 ? 2 : 3) forward_base_kernel(FwdBaseArgs<T> a) {
  extern __shared__ float smem[];
  const int k = K ? K : a.k, r = k / 2, kk = k * k, s = a.stride;
  const int c = blockIdx.x / a.g.splits, split = blockIdx.x % a.g.splits;
  const int th = a.g.th, tw = a.g.tw, np = a.g.np;
  const int qih = (s * (th - 1)) / 2 + 2, qiw = (s * (tw - 1)) / 2 + 2;
  const int qh = qih + 2 * r, qw = qiw + 2 * r;
  const int xh = 2 * qh, xw = 2 * qw;
  float* w0s = smem;                    // kk: s0 * W0
  float* w1s = w0s + kk;                // 4kk: 0.5 * s1 * W1
  float* xs = w1s + 4 * kk;             // np x xh x xw
  float* ys = xs + np * xh * xw;        // np x 4 x qh x qw
  float* zs = ys + np * 4 * qh * qw;    // np x 4 x qih x qiw

  const float s0 = a.s0[c];
  const float bias = a.b0 ? s0 * a.b0[c] : 0.f;
  for (int i = threadIdx.x; i < 5 * kk; i += blockDim.x) {
    if (i < kk) w0s[i] = s0 * a.w0[int64_t(c) * kk + i];
    else {
      const int e = i - kk;
      w1s[e] = 0.5f * a.s1[4 * c + e / kk] * a.w1[int64_t(4 * c) * kk + e];
    }
  }

  int64_t begin, end;
  item_range(a.g.items, a.g.splits, split, &begin, &end);
  for (int64_t item = begin; item < end; ++item) {
    const ItemPos pos = decode_item(a.g, item);
    const int qay = (s * pos.y0) >> 1, qax = (s * pos.x0) >> 1;  // first interior coefficient
    const int x0y = 2 * (qay - r), x0x = 2 * (qax - r);           // x origin of the tile
    __syncthreads();
    stage_tile<8>(
        np * xh * xw,
        [&](int e) {
          const int p = e / (xh * xw), rem = e - p * (xh * xw), yy = rem / xw, xx = rem - yy * xw;
          const int b = pos.b0 + p, y = x0y + yy, x = x0x + xx;
          float v = 0.f;
          if (b < a.B && y >= 0 && x >= 0 && y < a.H && x < a.W)
            v = to_float(a.x[(int64_t(b) * a.C + c) * a.H * a.W + int64_t(y) * a.W + x]);
          return v;
        },
        [&](int e, float v) { xs[e] = v; });
    __syncthreads();
    for (int e = threadIdx.x; e < np * qh * qw; e += blockDim.x) {
      const int p = e / (qh * qw), rem = e % (qh * qw), yy = rem / qw, xx = rem % qw;
      const float* src = xs + p * xh * xw + (2 * yy) * xw + 2 * xx;
      float z[4];
      haar4(src[0], src[1], src[xw], src[xw + 1], z);
      float* dst = ys + p * 4 * qh * qw + rem;
#pragma unroll
      for (int t = 0; t < 4; ++t) dst[t * qh * qw] = z[t];
    }
    __syncthreads();
    if constexpr (K > 0) {
      // Level-1 subband convs, register-blocked: one column strip of one subband per job.
      const int strips = (qih + kStripRows - 1) / kStripRows;
      for (int e = threadIdx.x; e < np * 4 * strips * qiw; e += blockDim.x) {
        const StripJob j = strip_job(e, qiw, strips);  // slot = p * 4 + subband
        const int p = j.slot >> 2, t = j.slot & 3;
        const int b = pos.b0 + p, qx = qax + j.col;
        // R_1 at LL, loaded before the conv so its latency hides behind the arithmetic.
        bool has_res[kStripRows];
        float res[kStripRows];
#pragma unroll
        for (int o = 0; o < kStripRows; ++o) {
          const int iy = j.row0 + o, qy = qay + iy;
          has_res[o] = t == 0 && a.rin && iy < qih && b < a.B && qy < a.h1 && qx < a.w1g;
          res[o] = has_res[o] ? a.rin[(int64_t(b) * a.C + c) * a.h1 * a.w1g + int64_t(qy) * a.w1g + qx] : 0.f;
        }
        float acc[kStripRows];
        conv_column_strip<K, kStripRows>(w1s + t * kk, ys + j.slot * qh * qw + j.row0 * qw + j.col, qw,
                                         qh - j.row0, acc);
#pragma unroll
        for (int o = 0; o < kStripRows; ++o) {
          const int iy = j.row0 + o;
          if (iy >= qih) break;
          if (has_res[o]) acc[o] += res[o];
          zs[j.slot * qih * qiw + iy * qiw + j.col] = acc[o];
        }
      }
    } else {
      for (int e = threadIdx.x; e < np * qih * qiw; e += blockDim.x) {
        const int p = e / (qih * qiw), rem = e % (qih * qiw), iy = rem / qiw, ix = rem % qiw;
        float z[4];
#pragma unroll
        for (int t = 0; t < 4; ++t)
          z[t] = conv_window<K>(w1s + t * kk, ys + (p * 4 + t) * qh * qw + iy * qw + ix, qw, k);
        const int b = pos.b0 + p, qy = qay + iy, qx = qax + ix;
        if (a.rin && b < a.B && qy < a.h1 && qx < a.w1g)
          z[0] += a.rin[(int64_t(b) * a.C + c) * a.h1 * a.w1g + int64_t(qy) * a.w1g + qx];
        float* dst = zs + p * 4 * qih * qiw + rem;
#pragma unroll
        for (int t = 0; t < 4; ++t) dst[t * qih * qiw] = z[t];
      }
    }
    __syncthreads();
    if (K > 0 && s == 1) {
      // Base conv, register-blocked (stride 1: outputs of a strip share input rows), + synthesis.
      const int strips = (th + kStripRows - 1) / kStripRows;
      for (int e = threadIdx.x; e < np * strips * tw; e += blockDim.x) {
        const StripJob j = strip_job(e, tw, strips);  // slot = p
        const int p = j.slot, b = pos.b0 + p, ox = pos.x0 + j.col, oy0 = pos.y0 + j.row0;
        if (b >= a.B || ox >= a.Wo || oy0 >= a.Ho) continue;
        const int row = oy0 - r - x0y;
        float acc[kStripRows];
        conv_column_strip<K ? K : 1, kStripRows>(w0s, xs + p * xh * xw + row * xw + (ox - r - x0x), xw, xh - row, acc);
#pragma unroll
        for (int o = 0; o < kStripRows; ++o) {
          const int oy = oy0 + o;
          if (j.row0 + o >= th || oy >= a.Ho) break;
          float v = bias + acc[o];
          const int iy = (oy >> 1) - qay, ix = (ox >> 1) - qax;
          const float* zp = zs + p * 4 * qih * qiw + iy * qiw + ix;
          const float z[4] = {zp[0], zp[qih * qiw], zp[2 * qih * qiw], zp[3 * qih * qiw]};
          v += synth_child(z, oy & 1, ox & 1);
          a.y[(int64_t(b) * a.C + c) * a.Ho * a.Wo + int64_t(oy) * a.Wo + ox] = from_float<T>(v);
        }
      }
    } else {
      for (int e = threadIdx.x; e < np * th * tw; e += blockDim.x) {
        const int p = e / (th * tw), oy = pos.y0 + (e / tw) % th, ox = pos.x0 + e % tw;
        const int b = pos.b0 + p;
        if (b >= a.B || oy >= a.Ho || ox >= a.Wo) continue;
        const int py = s * oy, px = s * ox;
        float v = bias + conv_window<K>(w0s, xs + p * xh * xw + (py - r - x0y) * xw + (px - r - x0x), xw, k);
        const int iy = (py >> 1) - qay, ix = (px >> 1) - qax;
        const float* zp = zs + p * 4 * qih * qiw + iy * qiw + ix;
        const float z[4] = {zp[0], zp[qih * qiw], zp[2 * qih * qiw], zp[3 * qih * qiw]};
        v += synth_child(z, py & 1, px & 1);
        a.y[(int64_t(b) * a.C + c) * a.Ho * a.Wo + int64_t(oy) * a.Wo + ox] = from_float<T>(v);
      }
    }
  }
}

template <typename T>
cudaError_t launch_forward_base(const FwdBaseArgs<T>& a, size_t smem, cudaStream_t stream) {
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
    case 3: return go(forward_base_kernel<T, 3>);
    case 5: return go(forward_base_kernel<T, 5>);
    case 7: return go(forward_base_kernel<T, 7>);
    default: return go(forward_base_kernel<T, 0>);
  }
}

template cudaError_t launch_forward_base<float>(const FwdBaseArgs<float>&, size_t, cudaStream_t);
template cudaError_t launch_forward_base<__half>(const FwdBaseArgs<__half>&, size_t, cudaStream_t);
template cudaError_t launch_forward_base<__nv_bfloat16>(const FwdBaseArgs<__nv_bfloat16>&, size_t, cudaStream_t);

}  // namespace wtconv_detail
}  // namespace winconv
