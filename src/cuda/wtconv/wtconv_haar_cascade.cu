// Haar cascade: the raw LL chain X_{a+1..a+m} (forward) or the LL chain of G = Haar cascade of dy
// (backward) from one pass over level a. A block loads a T x T tile (T a power of two, so every
// deeper level of the tile stays aligned) of np planes and halves it m times in shared memory;
// each level is written once (N/4 + N/16 + ... floats) and the input read once.
#include "wtconv_kernels.cuh"

namespace winconv {
namespace wtconv_detail {

struct CascadeGeom {
  int64_t in_plane_h, in_plane_w;  // physical plane of `in` (dy: the strided output grid)
  int64_t planes;
  int hin, win, stride, levels, T, np, tiles_y, tiles_x;
  float* out[5];
  int hout[5], wout[5];
};

template <typename Tin>
__global__ void __launch_bounds__(kBlockThreads) haar_cascade_kernel(const Tin* __restrict__ in, CascadeGeom g) {
  extern __shared__ float smem[];
  const int T = g.T, TT = T * T;
  float* buf0 = smem;
  float* buf1 = smem + g.np * TT;
  const int64_t per_group = int64_t(g.tiles_y) * g.tiles_x;
  const int64_t pg = blockIdx.x / per_group;
  const int rem = int(blockIdx.x % per_group);
  const int y0 = (rem / g.tiles_x) * T, x0 = (rem % g.tiles_x) * T;

  stage_tile<4>(
      g.np * TT,
      [&](int e) {
        const int p = e / TT, yy = (e % TT) / T, xx = e % T;
        const int64_t plane = pg * g.np + p;
        const int y = y0 + yy, x = x0 + xx;
        float v = 0.f;
        if (plane < g.planes && y < g.hin && x < g.win) {
          if (g.stride == 1) {
            v = to_float(in[plane * g.in_plane_h * g.in_plane_w + int64_t(y) * g.in_plane_w + x]);
          } else if (y % g.stride == 0 && x % g.stride == 0) {
            v = to_float(in[plane * g.in_plane_h * g.in_plane_w + int64_t(y / g.stride) * g.in_plane_w + x / g.stride]);
          }
        }
        return v;
      },
      [&](int e, float v) { buf0[e] = v; });
  int side = T, oy = y0, ox = x0;
  for (int j = 0; j < g.levels; ++j) {
    __syncthreads();
    const int ns = side / 2, nss = ns * ns;
    oy /= 2; ox /= 2;
    for (int e = threadIdx.x; e < g.np * nss; e += blockDim.x) {
      const int p = e / nss, yy = (e % nss) / ns, xx = e % ns;
      const float* s = buf0 + p * side * side + (2 * yy) * side + 2 * xx;
      const float ll = 0.5f * ((s[0] + s[1]) + (s[side] + s[side + 1]));
      buf1[e] = ll;
      const int64_t plane = pg * g.np + p;
      const int y = oy + yy, x = ox + xx;
      if (plane < g.planes && y < g.hout[j] && x < g.wout[j])
        g.out[j][plane * g.hout[j] * g.wout[j] + int64_t(y) * g.wout[j] + x] = ll;
    }
    float* t = buf0; buf0 = buf1; buf1 = t;
    side = ns;
  }
}

template <typename Tin>
cudaError_t launch_haar_cascade(const Tin* in, int stride, int64_t in_plane_h, int64_t in_plane_w,
                                int64_t planes, int64_t hin, int64_t win, int levels, float* const* out,
                                const int64_t* hout, const int64_t* wout, cudaStream_t stream) {
  CascadeGeom g;
  g.in_plane_h = in_plane_h; g.in_plane_w = in_plane_w; g.planes = planes;
  g.hin = int(hin); g.win = int(win); g.stride = stride; g.levels = levels;
  // Smallest power-of-two tile that covers the plane and 2^levels, at most 32.
  int T = 1 << levels;
  while (T < 32 && (T < hin || T < win)) T *= 2;
  g.T = T;
  int np = 1024 / (T * T);
  if (np < 1) np = 1;
  if (np > planes) np = int(planes);
  g.np = np;
  g.tiles_y = int((hin + T - 1) / T); g.tiles_x = int((win + T - 1) / T);
  for (int j = 0; j < 5; ++j) {
    g.out[j] = j < levels ? out[j] : nullptr;
    g.hout[j] = j < levels ? int(hout[j]) : 0;
    g.wout[j] = j < levels ? int(wout[j]) : 0;
  }
  const int64_t blocks = (planes + np - 1) / np * g.tiles_y * g.tiles_x;
  const size_t smem = size_t(2) * np * T * T * sizeof(float);
  haar_cascade_kernel<Tin><<<unsigned(blocks), kBlockThreads, smem, stream>>>(in, g);
  return cudaGetLastError();
}

template cudaError_t launch_haar_cascade<float>(const float*, int, int64_t, int64_t, int64_t, int64_t, int64_t, int,
                                                float* const*, const int64_t*, const int64_t*, cudaStream_t);
template cudaError_t launch_haar_cascade<__half>(const __half*, int, int64_t, int64_t, int64_t, int64_t, int64_t, int,
                                                 float* const*, const int64_t*, const int64_t*, cudaStream_t);
template cudaError_t launch_haar_cascade<__nv_bfloat16>(const __nv_bfloat16*, int, int64_t, int64_t, int64_t, int64_t,
                                                        int64_t, int, float* const*, const int64_t*, const int64_t*,
                                                        cudaStream_t);

}  // namespace wtconv_detail
}  // namespace winconv
