// WTConv drivers: the launch sequence of one forward and one backward on the caller's stream.
// Forward:  LL-chain cascade (X_1..X_{L-1}), levels L..2, base + level 1.
// Backward: LL-chain cascades of x and of dy, levels L..2, base + level 1, parameter reduction.
// With L == 2 the base kernels may compute level 2 themselves (wtconv_layouts.h: fwd_fused_smem,
// bwd_fused_smem) and the level kernels are skipped.
// A strided problem may run all of this on the full grid (plan.h: WtconvRun): the forward into the
// workspace and subsampled, the backward (always) on dy spread onto the full grid, so the backward
// kernels run at stride 1 only.
// With L == 2 level 2 reads the activations and no cascade runs; so does the 16-bit backward's
// level 2 at every L, whose cascades then start at level 2 (plan.h: level2_reads_activations).
#include "cuda/cuda_status.h"
#include "wtconv_kernels.cuh"
#include "wtconv_launch.h"

namespace winconv {
namespace wtconv_detail {
namespace {

template <typename T = float>
T* ws_at(void* ws, size_t off) { return reinterpret_cast<T*>(static_cast<char*>(ws) + off); }

// Levels done+1 .. done+m of an LL chain (m <= 5 per launch): their outputs and sizes.
struct ChainLevels {
  int m;
  float* deeper[4];
  int64_t ho[5], wo[5];
};
ChainLevels chain_levels(const WtconvPlan& plan, int done, void* ws, const size_t* offsets) {
  ChainLevels c{};
  c.m = (plan.L - 1 - done) < 5 ? (plan.L - 1 - done) : 5;
  for (int j = 0; j < c.m; ++j) {
    if (j > 0) c.deeper[j - 1] = ws_at<float>(ws, offsets[done + 1 + j]);
    c.ho[j] = plan.hl[done + 1 + j];
    c.wo[j] = plan.wl[done + 1 + j];
  }
  return c;
}

// The launches of an LL chain after its first (chains of more than 5 levels), from level done on.
Status ll_chain_deeper(const WtconvPlan& plan, int done, void* ws, const size_t* offsets, cudaStream_t stream) {
  const int64_t planes = plan.B * plan.C;
  while (done < plan.L - 1) {
    const ChainLevels c = chain_levels(plan, done, ws, offsets);
    const float* src = ws_at<float>(ws, offsets[done]);
    const cudaError_t e = launch_haar_cascade<float, float>(src, planes, plan.hl[done], plan.wl[done], c.m,
                                                            ws_at<float>(ws, offsets[done + 1]), c.deeper, c.ho, c.wo,
                                                            stream);
    if (e != cudaSuccess) return cuda_status(e, "wtconv haar cascade launch");
    done += c.m;
  }
  return Status::Ok();
}

// The forward's LL chain of x, levels 1..L-1, in float (at most 5 levels per launch; deeper
// chains relaunch from the last level written). The first launch reads x.
template <typename T>
Status ll_chain_x(const WtconvPlan& plan, const T* x, void* ws, const size_t* offsets, cudaStream_t stream) {
  if (plan.L < 2) return Status::Ok();
  const ChainLevels c = chain_levels(plan, 0, ws, offsets);
  const cudaError_t e = launch_haar_cascade<T, float>(x, plan.B * plan.C, plan.H, plan.W, c.m,
                                                      ws_at<float>(ws, offsets[1]), c.deeper, c.ho, c.wo, stream);
  if (e != cudaSuccess) return cuda_status(e, "wtconv haar cascade launch");
  return ll_chain_deeper(plan, c.m, ws, offsets, stream);
}

// The backward's chains of x and dy, level 1 stored as T (not at all when level 2 reads x and dy),
// deeper levels as float; their first launches are one when both take the kPlane path
// (launch_haar_cascade_pair).
template <typename T>
Status ll_chains_x_dy(const WtconvPlan& plan, const T* x, const T* dy, void* ws, cudaStream_t stream) {
  if (plan.L < 2) return Status::Ok();
  const ChainLevels cx = chain_levels(plan, 0, ws, plan.bwd_x), cg = chain_levels(plan, 0, ws, plan.bwd_g);
  const bool first = !plan.bwd_level2_direct;  // level 1 stored (else the cascades write levels 2..)
  const CascadeInput<T, T> a{x, first ? ws_at<T>(ws, plan.bwd_x[1]) : nullptr, cx.deeper};
  const CascadeInput<T, T> b{dy, first ? ws_at<T>(ws, plan.bwd_g[1]) : nullptr, cg.deeper};
  const cudaError_t e =
      launch_haar_cascade_pair<T, T>(a, b, plan.B * plan.C, plan.H, plan.W, cx.m, cx.ho, cx.wo, stream);
  if (e != cudaSuccess) return cuda_status(e, "wtconv haar cascade launch");
  Status st = ll_chain_deeper(plan, cx.m, ws, plan.bwd_x, stream);
  if (!st.ok()) return st;
  return ll_chain_deeper(plan, cg.m, ws, plan.bwd_g, stream);
}

// Backward of level l >= 2; Tc is the type of the level-(l-1) chains (T at level 1, else float).
// x, dy: the activations, read instead of the chains when level 2 is direct.
template <typename Tc>
Status backward_level(const WtconvPlan& plan, int l, const WtconvParams& prm, const Tc* x, const Tc* dy, void* ws,
                      cudaStream_t stream) {
  BwdLevelArgs<Tc> a;
  a.direct = plan.level_reads_activations(l, true);
  a.xin = a.direct ? x : ws_at<Tc>(ws, plan.bwd_x[l - 1]);
  a.gin = a.direct ? dy : ws_at<Tc>(ws, plan.bwd_g[l - 1]);
  a.H = int(plan.H); a.W = int(plan.W);
  a.dxin = l == plan.L ? nullptr : ws_at<float>(ws, plan.bwd_dx[l]);
  a.dxout = ws_at<Tc>(ws, plan.bwd_dx[l - 1]);
  a.weight = prm.level_weight[l - 1];
  a.scale = prm.level_scale[l - 1];
  a.partial = ws_at(ws, plan.bwd_part[l]);
  a.B = int(plan.B); a.C = int(plan.C);
  a.hin = int(plan.hl[l - 1]); a.win = int(plan.wl[l - 1]);
  a.hq = int(plan.hl[l]); a.wq = int(plan.wl[l]); a.k = plan.kl[l]; a.wk = plan.k;
  a.g = geom_of(plan.bwd_level[l]);
  return cuda_status(launch_backward_level(a, plan.bwd_level[l].smem, stream), "wtconv backward level launch");
}

// Forward of level l >= 2 from xin: the stored chain X_{l-1} (Tin = float), or x when level 2
// is direct.
template <typename Tin>
Status forward_level(const WtconvPlan& plan, int l, const WtconvParams& prm, const Tin* xin, void* ws,
                     cudaStream_t stream) {
  FwdLevelArgs<Tin> a;
  a.direct = plan.level_reads_activations(l, false);
  a.xin = xin;
  a.H = int(plan.H); a.W = int(plan.W);
  a.rin = l == plan.L ? nullptr : ws_at(ws, plan.fwd_r[l]);
  a.rout = ws_at(ws, plan.fwd_r[l - 1]);
  a.weight = prm.level_weight[l - 1];
  a.scale = prm.level_scale[l - 1];
  a.factor = 1.0f / float(1 << l);
  a.B = int(plan.B); a.C = int(plan.C);
  a.hin = int(plan.hl[l - 1]); a.win = int(plan.wl[l - 1]);
  a.hq = int(plan.hl[l]); a.wq = int(plan.wl[l]); a.k = plan.kl[l]; a.wk = plan.k;
  a.g = geom_of(plan.fwd_level[l]);
  return cuda_status(launch_forward_level(a, plan.fwd_level[l].smem, stream), "wtconv forward level launch");
}

template <typename T>
Status forward_typed(const WtconvPlan& plan, const T* x, const WtconvParams& prm, T* y, void* ws,
                     cudaStream_t stream) {
  if (!plan.fwd_level2_direct) {
    Status st = ll_chain_x<T>(plan, x, ws, plan.fwd_x, stream);
    if (!st.ok()) return st;
  }
  FwdBaseArgs<T> a;
  a.x = x;
  a.y = y;
  a.w0 = prm.base_weight; a.b0 = prm.base_bias; a.s0 = prm.base_scale;
  a.w1 = prm.level_weight[0]; a.s1 = prm.level_scale[0];
  if (plan.L == 2) { a.w2 = prm.level_weight[1]; a.s2 = prm.level_scale[1]; }
  a.B = int(plan.B); a.C = int(plan.C); a.H = int(plan.H); a.W = int(plan.W);
  a.Ho = int(plan.Ho); a.Wo = int(plan.Wo); a.h1 = int(plan.hl[1]); a.w1g = int(plan.wl[1]);
  a.k = plan.k; a.stride = plan.stride;
  a.g = geom_of(plan.fwd_base);
  a.tma_smem = plan.fwd_base_tma_smem;
  a.fused_smem = plan.fwd_fused_smem;
  prepare_forward_base(a);  // a fused forward computes level 2 in the base kernel: no level kernel, no R_1
  if (!a.fuse2)
    for (int l = plan.L; l >= 2; --l) {
      const Status st = plan.level_reads_activations(l, false)
                            ? forward_level<T>(plan, l, prm, x, ws, stream)
                            : forward_level<float>(plan, l, prm, ws_at(ws, plan.fwd_x[l - 1]), ws, stream);
      if (!st.ok()) return st;
    }
  a.rin = plan.L >= 2 && !a.fuse2 ? ws_at(ws, plan.fwd_r[1]) : nullptr;
  return cuda_status(launch_forward_base<T>(a, plan.fwd_base.smem, stream), "wtconv forward base launch");
}

// The backward kernels run at stride 1 only: a strided backward runs its stride-1 twin's plan on the
// full grid (backward_run), so a strided plan here is a caller's error, refused before any launch.
// fold_base: dy is a stride-2 dy spread onto the full grid and the base kernel folds the base conv
// into level 1 (plan.h: backward_folds_base).
template <typename T>
Status backward_typed(const WtconvPlan& plan, const T* dy, const T* x, const WtconvParams& prm, T* dx,
                      const WtconvParamGrads& grads, void* ws, cudaStream_t stream, bool fold_base = false) {
  if (plan.stride != 1)
    return Status(StatusCode::kUnsupported, "wtconv backward: the kernels run at stride 1 only, got a plan of stride " +
                                                std::to_string(plan.stride) +
                                                "; a strided backward runs on the full grid (WtconvRun)");
  Status st;
  if (!plan.bwd_level2_direct || plan.L >= 3) {
    st = ll_chains_x_dy<T>(plan, x, dy, ws, stream);
    if (!st.ok()) return st;
  }
  BwdBaseArgs<T> a;
  a.dy = dy; a.x = x;
  a.dx = dx;
  a.w0 = prm.base_weight; a.s0 = prm.base_scale;
  a.w1 = prm.level_weight[0]; a.s1 = prm.level_scale[0];
  if (plan.L == 2) { a.w2 = prm.level_weight[1]; a.s2 = prm.level_scale[1]; a.partial2 = ws_at(ws, plan.bwd_part[2]); }
  a.partial = ws_at(ws, plan.bwd_part[1]);
  a.B = int(plan.B); a.C = int(plan.C); a.H = int(plan.H); a.W = int(plan.W);
  a.h1 = int(plan.hl[1]); a.w1g = int(plan.wl[1]);
  a.k = plan.k;
  a.g = geom_of(plan.bwd_base);
  a.pitch = plan.bwd_base.pixel_pitch;
  a.tma_smem = plan.bwd_base_tma_smem;
  a.fused_smem = plan.bwd_fused_smem;
  prepare_backward_base(a);  // a fused backward computes level 2 in the base kernel: no level kernel, no dX_1
  a.fold_base = fold_base && !a.fuse2;  // (the plan folds only where it does not fuse)
  if (!a.fuse2)
    for (int l = plan.L; l >= 2; --l) {
      st = l == 2 ? backward_level<T>(plan, l, prm, x, dy, ws, stream)
                  : backward_level<float>(plan, l, prm, nullptr, nullptr, ws, stream);
      if (!st.ok()) return st;
    }
  a.dxin = plan.L >= 2 && !a.fuse2 ? ws_at<T>(ws, plan.bwd_dx[1]) : nullptr;
  const cudaError_t e = launch_backward_base<T>(a, plan.bwd_base.smem, stream);
  if (e != cudaSuccess) return cuda_status(e, "wtconv backward base launch");
  ParamGradArgs r{};
  r.partial[1] = ws_at(ws, plan.bwd_part[1]);
  r.splits[1] = plan.bwd_base.splits;
  for (int l = 2; l <= plan.L; ++l) {
    r.partial[l] = ws_at(ws, plan.bwd_part[l]);
    r.splits[l] = l == 2 && a.fuse2 ? plan.bwd_base.splits : plan.bwd_level[l].splits;
  }
  r.w0 = prm.base_weight; r.b0 = prm.base_bias; r.s0 = prm.base_scale;
  r.gw0 = grads.base_weight; r.gb0 = grads.base_bias; r.gs0 = grads.base_scale;
  for (int l = 0; l < plan.L; ++l) {
    r.wl[l] = prm.level_weight[l]; r.sl[l] = prm.level_scale[l];
    r.gwl[l] = grads.level_weight[l]; r.gsl[l] = grads.level_scale[l];
  }
  r.C = int(plan.C); r.k = plan.k; r.L = plan.L;
  for (int l = 2; l <= plan.L; ++l) r.kl[l] = plan.kl[l];
  return cuda_status(launch_param_grad_reduce(r, stream), "wtconv parameter gradient launch");
}

// A run on the full grid (run.out_stride > 1): the stride-1 forward into the workspace, then y
// subsampled from it; the backward's dy spread onto the full grid first, then the stride-1 backward
// (at stride 2 with the base conv folded into level 1: backward_typed).
template <typename T>
Status forward_run(const WtconvRun& run, const T* x, const WtconvParams& prm, T* y, void* ws, cudaStream_t stream) {
  if (run.out_stride == 1) return forward_typed<T>(run.plan, x, prm, y, ws, stream);
  const WtconvPlan& p = run.plan;
  const int s = run.out_stride;
  T* const full = ws_at<T>(ws, run.full_offset);
  const Status st = forward_typed<T>(p, x, prm, full, ws, stream);
  if (!st.ok()) return st;
  return cuda_status(launch_subsample<T>(full, y, p.B * p.C, p.H, p.W, ceil_div(p.H, s), ceil_div(p.W, s), s, stream),
                     "wtconv subsample launch");
}

template <typename T>
Status backward_run(const WtconvRun& run, const T* dy, const T* x, const WtconvParams& prm, T* dx,
                    const WtconvParamGrads& grads, void* ws, cudaStream_t stream) {
  if (run.out_stride == 1) return backward_typed<T>(run.plan, dy, x, prm, dx, grads, ws, stream);
  const WtconvPlan& p = run.plan;
  const int s = run.out_stride;
  T* const full = ws_at<T>(ws, run.full_offset);
  const cudaError_t e = launch_spread<T>(dy, full, p.B * p.C, p.H, p.W, ceil_div(p.H, s), ceil_div(p.W, s), s, stream);
  if (e != cudaSuccess) return cuda_status(e, "wtconv spread launch");
  return backward_typed<T>(p, full, x, prm, dx, grads, ws, stream, backward_folds_base(s, p));
}

}  // namespace

Status wtconv_forward_cuda(const WtconvRun& run, Precision precision, const void* x,
                           const WtconvParams& params, void* y, void* workspace, cudaStream_t stream) {
  switch (precision) {
    case Precision::kFP32:
      return forward_run<float>(run, static_cast<const float*>(x), params, static_cast<float*>(y), workspace, stream);
    case Precision::kFP16:
      return forward_run<__half>(run, static_cast<const __half*>(x), params, static_cast<__half*>(y), workspace, stream);
    case Precision::kBF16:
      return forward_run<__nv_bfloat16>(run, static_cast<const __nv_bfloat16*>(x), params,
                                        static_cast<__nv_bfloat16*>(y), workspace, stream);
  }
  return Status(StatusCode::kUnsupported, "wtconv: unknown precision");
}

Status wtconv_backward_cuda(const WtconvRun& run, Precision precision, const void* dy, const void* x,
                            const WtconvParams& params, void* dx, const WtconvParamGrads& grads,
                            void* workspace, cudaStream_t stream) {
  switch (precision) {
    case Precision::kFP32:
      return backward_run<float>(run, static_cast<const float*>(dy), static_cast<const float*>(x), params,
                                 static_cast<float*>(dx), grads, workspace, stream);
    case Precision::kFP16:
      return backward_run<__half>(run, static_cast<const __half*>(dy), static_cast<const __half*>(x), params,
                                  static_cast<__half*>(dx), grads, workspace, stream);
    case Precision::kBF16:
      return backward_run<__nv_bfloat16>(run, static_cast<const __nv_bfloat16*>(dy),
                                         static_cast<const __nv_bfloat16*>(x), params,
                                         static_cast<__nv_bfloat16*>(dx), grads, workspace, stream);
  }
  return Status(StatusCode::kUnsupported, "wtconv: unknown precision");
}

}  // namespace wtconv_detail
}  // namespace winconv
