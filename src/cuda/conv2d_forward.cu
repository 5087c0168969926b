// conv2d_forward for CUDA builds: validation, workspace layout, algorithm choice, launches.
#include <cstdint>

#include "common/conv2d_validate.h"
#include "cuda/conv2d_forward_tiled.h"
#include "cuda/cuda_status.h"
#include "cuda/im2win/conv_fp32_launch.h"
#include "cuda/im2win/conv_shallow.h"
#include "cuda/im2win/im2win_transform.h"
#include "cuda/im2win/reduction_table.h"
#include "cuda/im2win/splitk_reduce.h"
#include "cuda/im2win/tap_mask.h"
#include "cuda/im2win/tile_select.h"
#include "winconv/conv2d.h"

namespace winconv {
namespace {

constexpr size_t kWorkspaceAlign = 256;

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

int padded_k(const Conv2dProblem& pb) { return int((pb.k + 3) / 4 * 4); }

// The reduction depth C*R*S rounded up to whole pipeline stages: the repacked filter's rows.
int padded_kg(const Conv2dProblem& pb) { return int((pb.c * pb.r * pb.s + im2win::kBK - 1) / im2win::kBK * im2win::kBK); }

// The on-chip gathers with a k-major A stage (all but the NHWC channel-vector one) read the
// reduction table, unless they walk the digits: padded, with R or S past the tap mask's reach.
ReductionTableKind reduction_table_kind(const Conv2dProblem& pb, Conv2dAlgo algo, im2win::AStageOrder a_order) {
  if (algo != Conv2dAlgo::kOnChip || a_order != im2win::AStageOrder::kKMajor) return ReductionTableKind::kNone;
  if (pb.pad_h == 0 && pb.pad_w == 0) return ReductionTableKind::kOffsets;
  return im2win::tap_mask_fits(pb.r, pb.s) ? ReductionTableKind::kOffsetsAndTapBits : ReductionTableKind::kNone;
}

// The on-chip GEMM's launcher: the NHWC channel-vector gather, or the k-major gather of the
// plan's reduction table.
im2win::ConvFp32Launcher* onchip_launcher(const Conv2dGemmPlan& plan, bool nchw) {
  if (plan.a_order == im2win::AStageOrder::kPixelMajor) return im2win::launch_conv_fp32_onchip_nhwc_vec;
  switch (plan.table) {
    case ReductionTableKind::kOffsets:
      return nchw ? im2win::launch_conv_fp32_onchip_nchw_unpadded : im2win::launch_conv_fp32_onchip_nhwc_unpadded;
    case ReductionTableKind::kOffsetsAndTapBits:
      return nchw ? im2win::launch_conv_fp32_onchip_nchw_tapmask : im2win::launch_conv_fp32_onchip_nhwc_tapmask;
    case ReductionTableKind::kNone:
      break;
  }
  return nchw ? im2win::launch_conv_fp32_onchip_nchw : im2win::launch_conv_fp32_onchip_nhwc;
}

// The split partial tiles: (m - m_begin) * n rounded up to 4 floats each (16-byte aligned).
int64_t partial_stride(const Conv2dGemmPlan& g) { return ((g.m - g.ksplit.m_begin) * g.n + 3) / 4 * 4; }

// Workspace: [repacked filter | reduction table (on-chip, k-major A stage) | window tensor
// (materialized only) | split-K partial tiles (split-K only)], each 256-byte aligned; the total
// ends at the last part present.
struct WorkspaceLayout {
  size_t filter_bytes = 0, table_offset = 0, table_bytes = 0, window_offset = 0, window_bytes = 0,
         partial_offset = 0, partial_bytes = 0, total = 0;
};

WorkspaceLayout workspace_layout(const Conv2dConfig& config, Conv2dAlgo algo, const Conv2dGemmPlan& plan) {
  const Conv2dProblem& pb = config.problem;
  WorkspaceLayout l;
  if (plan.shallow) return l;  // reads w as given: no repacked filter, nothing else
  l.filter_bytes = sizeof(float) * size_t(padded_kg(pb)) * size_t(padded_k(pb));
  l.total = l.filter_bytes;
  auto place = [&l](size_t bytes, size_t* offset) {
    if (bytes == 0) return;
    *offset = align_up(l.total, kWorkspaceAlign);
    l.total = *offset + bytes;
  };
  const bool materialized = algo == Conv2dAlgo::kMaterialized;
  if (plan.table != ReductionTableKind::kNone)
    l.table_bytes = im2win::reduction_table_bytes(padded_kg(pb), plan.table == ReductionTableKind::kOffsetsAndTapBits);
  place(l.table_bytes, &l.table_offset);
  if (materialized) l.window_bytes = sizeof(float) * size_t(pb.n * pb.c * pb.p() * (pb.w + 2 * pb.pad_w) * pb.r);
  place(l.window_bytes, &l.window_offset);
  if (plan.ksplit.splits > 1) l.partial_bytes = sizeof(float) * size_t(plan.ksplit.splits) * size_t(partial_stride(plan));
  place(l.partial_bytes, &l.partial_offset);
  return l;
}

// The direct shallow kernel's view of a validated NCHW problem (its sizes fit int: one image of x
// and of y index in 32 bits, conv2d_validate).
im2win::ShallowConvParams shallow_params(const Conv2dProblem& pb, const void* x, const void* w, void* y) {
  im2win::ShallowConvParams a;
  a.x = static_cast<const float*>(x);
  a.w = static_cast<const float*>(w);
  a.y = static_cast<float*>(y);
  a.n = pb.n;
  a.c = int(pb.c); a.h = int(pb.h); a.w_in = int(pb.w); a.k = int(pb.k); a.r = int(pb.r); a.s = int(pb.s);
  a.p = int(pb.p()); a.q = int(pb.q());
  a.stride_h = int(pb.stride_h); a.stride_w = int(pb.stride_w); a.pad_h = int(pb.pad_h); a.pad_w = int(pb.pad_w);
  return a;
}

// The SM count of the current device, 0 when there is none (the workspace query still answers).
int current_sms() {
  int num_sms = 0;
  return cuda_check_device(&num_sms).ok() ? num_sms : 0;
}

// What the entries that launch check of the device: a usable one (its SM count into *num_sms), and
// no error of the caller's pending that our launches' error checks would report as theirs.
Status ready_to_launch(int* num_sms) {
  const Status st = cuda_check_device(num_sms);
  return st.ok() ? cuda_check_no_pending_error() : st;
}

}  // namespace

Conv2dGemmPlan conv2d_gemm_plan(const Conv2dConfig& config, int num_sms, const im2win::TileShape* tile_override) {
  const Conv2dProblem& pb = config.problem;
  const Conv2dAlgo algo = conv2d_resolve_algo(config);
  Conv2dGemmPlan g;
  g.shallow = !tile_override &&
              im2win::shallow_direct_selected(config.layout == Layout::kNCHW, algo == Conv2dAlgo::kOnChip, pb.c, pb.r,
                                              pb.s, pb.stride_w, pb.k) &&
              im2win::shallow_kernel_fits(shallow_params(pb, nullptr, nullptr, nullptr));
  g.m = pb.n * pb.p() * pb.q();
  g.n = pb.k;
  g.a_order = im2win::a_stage_order(config.layout == Layout::kNHWC, pb.c);
  g.table = reduction_table_kind(pb, algo, g.a_order);
  const int64_t k_gemm = pb.c * pb.r * pb.s;
  g.tile = tile_override ? *tile_override : im2win::select_tile(g.m, g.n, k_gemm, num_sms > 0 ? num_sms : 1, g.a_order);
  g.ksplit = im2win::select_k_splits(g.m, g.n, k_gemm, g.tile, num_sms);
  return g;
}

Status conv2d_forward_tiled_workspace_size(const Conv2dConfig& config, const im2win::TileShape* tile_override,
                                           size_t* bytes) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  if (!bytes) return Status(StatusCode::kNullPointer, "bytes is null");
  *bytes = workspace_layout(config, conv2d_resolve_algo(config), conv2d_gemm_plan(config, current_sms(), tile_override)).total;
  return Status::Ok();
}

Status conv2d_forward_workspace_size(const Conv2dConfig& config, size_t* bytes) {
  return conv2d_forward_tiled_workspace_size(config, nullptr, bytes);
}

Status conv2d_forward(const Conv2dConfig& config, const void* x, const void* w, void* y, void* workspace,
                      size_t workspace_bytes, cudaStream_t stream) {
  return conv2d_forward_tiled(config, x, w, y, workspace, workspace_bytes, stream, nullptr);
}

Status conv2d_forward_tiled(const Conv2dConfig& config, const void* x, const void* w, void* y, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream, const im2win::TileShape* tile_override) {
  Status st = conv2d_check_call(config, x, w, y);
  if (!st.ok()) return st;
  int num_sms = 0;
  st = ready_to_launch(&num_sms);
  if (!st.ok()) return st;
  const Conv2dAlgo algo = conv2d_resolve_algo(config);
  const Conv2dGemmPlan plan = conv2d_gemm_plan(config, num_sms, tile_override);
  const WorkspaceLayout ws = workspace_layout(config, algo, plan);
  if (workspace_bytes < ws.total) {
    return Status(StatusCode::kWorkspaceTooSmall,
                  "workspace_bytes=" + std::to_string(workspace_bytes) + " but this call needs " +
                      std::to_string(ws.total) + " (ask conv2d_forward_workspace_size)");
  }
  if (ws.total > 0) {
    st = conv2d_check_pointer("workspace", workspace, kConv2dPointerAlignment);
    if (!st.ok()) return st;
  }

  const Conv2dProblem& pb = config.problem;
  if (plan.shallow) {
    WINCONV_RETURN_IF_CUDA_ERROR(
        im2win::launch_conv_fp32_shallow_nchw(shallow_params(pb, x, w, y), num_sms, stream), "shallow conv launch");
    return Status::Ok();
  }
  const bool nchw = config.layout == Layout::kNCHW;
  const bool materialized = algo == Conv2dAlgo::kMaterialized;
  // Whole 16-byte channel groups (x is 16-byte aligned): coalesced vector copies of the window.
  const bool nhwc_vec = plan.a_order == im2win::AStageOrder::kPixelMajor;
  im2win::ConvGemmParams p;
  p.m = int(plan.m);
  p.n = int(plan.n);
  p.kg = int(pb.c * pb.r * pb.s);
  p.kg_pad = padded_kg(pb);
  p.n_pad = padded_k(pb);
  p.c = int(pb.c); p.h = int(pb.h); p.w = int(pb.w); p.p = int(pb.p()); p.q = int(pb.q());
  p.r = int(pb.r); p.s = int(pb.s);
  p.stride_h = int(pb.stride_h); p.stride_w = int(pb.stride_w);
  p.pad_h = int(pb.pad_h); p.pad_w = int(pb.pad_w);
  p.w_padded = int(pb.w + 2 * pb.pad_w);
  p.pq = p.p * p.q;
  p.rs = p.r * p.s;
  p.y_image_stride = pb.k * pb.p() * pb.q();
  p.a_image_stride = materialized ? pb.c * pb.p() * (pb.w + 2 * pb.pad_w) * pb.r : pb.c * pb.h * pb.w;
  const im2win::TileShape tile = plan.tile;
  p.m_tiles = int(im2win::tile_rows(p.m, tile));
  p.n_tiles = int(im2win::tile_cols(p.n, tile));
  if (int64_t(p.m_tiles) * p.n_tiles > int64_t(INT32_MAX)) {
    return Status(StatusCode::kIndexOverflow, "the number of output tiles exceeds 2^31-1; split the batch");
  }

  auto* base = static_cast<char*>(workspace);
  auto* filter = reinterpret_cast<float*>(base);
  p.b = filter;
  p.y = static_cast<float*>(y);
  im2win::SplitKParams sk;
  sk.k_splits = plan.ksplit.splits;
  sk.k_tiles_per_split = plan.ksplit.tiles_per_split;
  sk.tile_begin = int(plan.ksplit.head_tiles);  // < m_tiles * n_tiles, checked above
  sk.m_begin = int(plan.ksplit.m_begin);
  sk.partial_stride = partial_stride(plan);
  if (sk.k_splits > 1) sk.partial = reinterpret_cast<float*>(base + ws.partial_offset);
  const auto order = materialized ? (nchw ? im2win::ReductionOrder::kCVU : im2win::ReductionOrder::kVUC)
                                  : (nchw ? im2win::ReductionOrder::kCUV : im2win::ReductionOrder::kUVC);
  int* table = ws.table_bytes > 0 ? reinterpret_cast<int*>(base + ws.table_offset) : nullptr;
  p.k_table = table;
  WINCONV_RETURN_IF_CUDA_ERROR(im2win::launch_filter_repack(config, order, static_cast<const float*>(w), filter,
                                                            p.n_pad, p.kg_pad, table,
                                                            plan.table == ReductionTableKind::kOffsetsAndTapBits, stream),
                               "filter repack launch");
  if (materialized) {
    auto* window = reinterpret_cast<float*>(base + ws.window_offset);
    WINCONV_RETURN_IF_CUDA_ERROR(
        im2win::launch_im2win_window(config, static_cast<const float*>(x), window, stream),
        "im2win transform launch");
    p.a_src = window;
    WINCONV_RETURN_IF_CUDA_ERROR(nchw        ? im2win::launch_conv_fp32_window_nchw(p, sk, tile, stream)
                                 : nhwc_vec ? im2win::launch_conv_fp32_window_nhwc_vec(p, sk, tile, stream)
                                            : im2win::launch_conv_fp32_window_nhwc(p, sk, tile, stream),
                                 "im2win window GEMM launch");
  } else {
    p.a_src = static_cast<const float*>(x);
    WINCONV_RETURN_IF_CUDA_ERROR(onchip_launcher(plan, nchw)(p, sk, tile, stream), "im2win on-chip GEMM launch");
  }
  if (sk.k_splits > 1)
    WINCONV_RETURN_IF_CUDA_ERROR(im2win::launch_splitk_reduce(p, sk, nchw, stream), "split-K reduction launch");
  return Status::Ok();
}

Status conv2d_forward_shallow(const Conv2dConfig& config, const void* x, const void* w, void* y, cudaStream_t stream) {
  Status st = conv2d_check_call(config, x, w, y);
  if (!st.ok()) return st;
  const im2win::ShallowConvParams a = shallow_params(config.problem, x, w, y);
  if (config.layout != Layout::kNCHW || !im2win::shallow_kernel_fits(a))
    return Status(StatusCode::kUnsupported, "the shallow kernel takes NCHW problems with C*R*S <= " +
                                                    std::to_string(im2win::kShallowMaxDepth) +
                                                    " whose image offsets fit 32 bits only");
  int num_sms = 0;
  st = ready_to_launch(&num_sms);
  if (!st.ok()) return st;
  WINCONV_RETURN_IF_CUDA_ERROR(im2win::launch_conv_fp32_shallow_nchw(a, num_sms, stream), "shallow conv launch");
  return Status::Ok();
}

}  // namespace winconv
