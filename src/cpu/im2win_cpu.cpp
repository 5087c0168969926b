// im2win convolution on the CPU: the path the benchmark runs without a GPU. The window tensor is
// built once; each output pixel then reads ONE contiguous window run per group (S*R elements per
// channel for NCHW, S*R*C for NHWC). The products with the filters run as a register-blocked GEMM
// per output row (window_gemm_cpu.h), in the widest vector instructions the CPU has.
#include <algorithm>
#include <string>
#include <thread>

#include <unistd.h>

#include "common/conv2d_validate.h"
#include "cpu/host_buffer.h"
#include "cpu/im2win_cpu.h"
#include "cpu/window_gemm_cpu.h"
#include "cpu/worker_team.h"

namespace winconv {
namespace {

// Pixels of at most this many channels (stems: C = 1 to 4) are moved inline by the NHWC transform:
// `pixels` pixels from src (contiguous) to every step-th float at dst.
constexpr int64_t kInlineChannels = 4;
template <int kChannels>
void copy_pixels_of(const float* src, int64_t pixels, float* dst, int64_t step) {
  for (int64_t i = 0; i < pixels; ++i, src += kChannels, dst += step)
    for (int c = 0; c < kChannels; ++c) dst[c] = src[c];
}
void copy_pixels(const float* src, int64_t pixels, int64_t C, float* dst, int64_t step) {
  switch (C) {
    case 1: return copy_pixels_of<1>(src, pixels, dst, step);
    case 2: return copy_pixels_of<2>(src, pixels, dst, step);
    case 3: return copy_pixels_of<3>(src, pixels, dst, step);
    default: return copy_pixels_of<kInlineChannels>(src, pixels, dst, step);
  }
}

int resolve_threads(int threads) { return threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency())); }

// The row GEMM's tasks: one per block of kCpuFilterBlock filters and group of output rows.
int64_t gemm_tasks(const Conv2dProblem& pb, int threads) {
  return packed_filter_k(pb) / kCpuFilterBlock * pb.n * cpu_row_groups(pb, threads);
}

// Workers of the call's team: one per hardware thread asked for, and no more than the largest
// phase has items (transform rows, filter blocks, GEMM tasks).
int team_size(const Conv2dConfig& config, int threads) {
  const int64_t items = std::max(im2win_transform_rows(config), gemm_tasks(config.problem, threads));
  return int(std::max<int64_t>(1, std::min<int64_t>(threads, items)));
}

// Workers that get GEMM tasks: each holds a buffer of its own in some orders (a packed block with
// filter blocks outermost, a window with kRowsOuterWorkerWindows).
int64_t workers_with_tasks(const Conv2dConfig& config, int threads) {
  return std::min<int64_t>(team_size(config, threads), gemm_tasks(config.problem, threads));
}

// Floats of packed filter conv2d_forward_cpu holds: with filter blocks outermost, each worker
// with GEMM tasks packs the blocks of its own tasks into a buffer of one block, which stays in its
// cache while the block's rows read it (the filter is read once from memory and the packed copy
// never goes back there); with rows outermost, every row needs every block, so the whole filter
// is packed first.
int64_t packed_filter_held(const Conv2dConfig& config, int threads, CpuTaskOrder order) {
  const Conv2dProblem& pb = config.problem;
  if (order != CpuTaskOrder::kFilterBlocksOuter) return packed_filter_elements(pb);
  return workers_with_tasks(config, threads) * packed_block_elements(pb);
}

size_t round_up_to_alignment(size_t bytes) {
  return (bytes + kCpuWorkspaceAlignment - 1) / kCpuWorkspaceAlignment * kCpuWorkspaceAlignment;
}

// kRowsOuterWorkerWindows: the window rows of one GEMM row (the largest group of output rows, all
// channels), a whole number of 64-byte lines, for each worker with GEMM tasks.
size_t worker_window_bytes(const Conv2dConfig& config, int threads) {
  const Conv2dProblem& pb = config.problem;
  const int64_t groups = cpu_row_groups(pb, threads), most_rows = (pb.p() + groups - 1) / groups;
  return round_up_to_alignment(sizeof(float) * size_t(most_rows * pb.c * (pb.w + 2 * pb.pad_w) * pb.r));
}

// The workspace of a call: the window tensor (or the workers' windows), then the packed filter
// from the next 64-byte boundary (whole cache lines for its vector loads).
struct CpuWorkspace {
  CpuTaskOrder order;  // resolved
  size_t packed_offset, bytes;
};
CpuWorkspace cpu_workspace(const Conv2dConfig& config, int threads, CpuTaskOrder order) {
  if (order == CpuTaskOrder::kAuto) order = cpu_task_order(config.problem, cpu_filter_cache_budget());
  const size_t window = order == CpuTaskOrder::kRowsOuterWorkerWindows
                            ? worker_window_bytes(config, threads) * size_t(workers_with_tasks(config, threads))
                            : sizeof(float) * size_t(im2win_window_elements(config.problem));
  const size_t offset = round_up_to_alignment(window);
  return {order, offset, offset + sizeof(float) * size_t(packed_filter_held(config, threads, order))};
}

// Checks a call's arguments other than the workspace.
Status check_forward_arguments(const Conv2dConfig& config, const float* x, const float* w, float* y, int threads,
                               CpuVectorIsa isa) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  if (!x) return Status(StatusCode::kNullPointer, "x is null");
  if (!w) return Status(StatusCode::kNullPointer, "w is null");
  if (!y) return Status(StatusCode::kNullPointer, "y is null");
  if (threads < 0) return Status(StatusCode::kInvalidArgument, "threads must be >= 0");
  if (!cpu_runs(isa))
    return Status(StatusCode::kUnsupported, std::string("this CPU does not run ") + cpu_isa_name(isa));
  return Status::Ok();
}

// The forward with its arguments checked, threads resolved and the workspace in hand (cpu_workspace's
// layout): the window tensor, or with kRowsOuterWorkerWindows the workers' windows, at `window`,
// the packed filter at `packed`; order resolved (not kAuto).
void forward_cpu(const Conv2dConfig& config, const float* x, const float* w, float* y, float* window, float* packed,
                 int threads, CpuVectorIsa isa, CpuTaskOrder order);

}  // namespace

int64_t cpu_filter_cache_budget() {
  static const int64_t budget = [] {
    long l2 = 0;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return l2 > 0 ? int64_t(l2) / 2 : int64_t(1) << 20;
  }();
  return budget;
}

int64_t cpu_row_groups(const Conv2dProblem& pb, int threads) {
  const int64_t P = pb.p(), Q = pb.q();
  if (Q >= kCpuGroupedRowColumns) return P;
  // Tasks per group of each image: one per filter block and image.
  const int64_t tasks_per_group = pb.n * (packed_filter_k(pb) / kCpuFilterBlock);
  const int64_t for_blocks = (P * Q + kCpuGroupPixels - 1) / kCpuGroupPixels;
  const int64_t for_threads = (2 * int64_t(std::max(threads, 1)) + tasks_per_group - 1) / tasks_per_group;
  return std::min(P, std::max(for_blocks, for_threads));
}

CpuTaskOrder cpu_task_order(const Conv2dProblem& pb, int64_t filter_budget_bytes) {
  const bool rows_outer = int64_t(sizeof(float)) * packed_filter_elements(pb) <= filter_budget_bytes ||
                          pb.w + 2 * pb.pad_w >= kCpuFilterBlock * pb.s;
  if (!rows_outer) return CpuTaskOrder::kFilterBlocksOuter;
  return int64_t(sizeof(float)) * im2win_window_elements(pb) > kCpuWorkerWindowsAboveBytes
             ? CpuTaskOrder::kRowsOuterWorkerWindows
             : CpuTaskOrder::kRowsOuter;
}

int64_t im2win_window_elements(const Conv2dProblem& pb) {
  return pb.n * pb.c * pb.p() * (pb.w + 2 * pb.pad_w) * pb.r;
}

int64_t im2win_transform_rows(const Conv2dConfig& config) {
  const Conv2dProblem& pb = config.problem;
  return config.layout == Layout::kNCHW ? pb.n * pb.c * pb.p() : pb.n * pb.p();
}

int64_t im2win_row_elements(const Conv2dConfig& config) {
  const Conv2dProblem& pb = config.problem;
  return (pb.w + 2 * pb.pad_w) * pb.r * (config.layout == Layout::kNCHW ? 1 : pb.c);
}

void im2win_transform_row_cpu(const Conv2dConfig& config, const float* x, float* window, int64_t row) {
  im2win_transform_row_to_cpu(config, x, row, window + row * im2win_row_elements(config));
}

void im2win_transform_row_to_cpu(const Conv2dConfig& config, const float* x, int64_t row, float* dst_row) {
  const Conv2dProblem& pb = config.problem;
  const int64_t H = pb.h, W = pb.w, P = pb.p(), Wp = W + 2 * pb.pad_w, R = pb.r, C = pb.c;
  const int64_t p = row % P;
  // The rows of x outside [0, H) and the columns outside [0, W) are the zero padding of X'.
  auto x_row = [&](int64_t u) -> int64_t {
    const int64_t h = p * pb.stride_h + u - pb.pad_h;
    return h >= 0 && h < H ? h : -1;
  };
  if (config.layout == Layout::kNCHW) {
    // row = (n*C + c)*P + p: I_hat[n, c, p, wp*R + u] = X'[n, c, p*s_h + u, wp], the R rows of x
    // interleaved element by element.
    // Written in order: the padding columns as zeros, then per column of x its R rows (a row of
    // the padding reads as zeros).
    float* dst = dst_row;
    const int64_t plane = row / P;  // n*C + c
    const int64_t left = pb.pad_w * R;
    std::fill(dst, dst + left, 0.f);
    std::fill(dst + left + W * R, dst + Wp * R, 0.f);
    for (int64_t u = 0; u < R; ++u) {
      const int64_t h = x_row(u);
      float* out = dst + left + u;
      if (h < 0) {
        for (int64_t ww = 0; ww < W; ++ww) out[ww * R] = 0.f;
      } else {
        const float* src = x + (plane * H + h) * W;
        for (int64_t ww = 0; ww < W; ++ww) out[ww * R] = src[ww];
      }
    }
  } else {
    // row = n*P + p: I_hat[n, p, wp, u, :] = X'[n, p*s_h + u, wp, :], a run of C channels each.
    const int64_t n = row / P, step = R * C;
    if (C > kInlineChannels) {
      // Wide pixels in window order, so that whole lines are written in sequence (conv4c32's
      // window rows are 200 KB; a pass per u over them was 5% slower).
      for (int64_t wp = 0; wp < Wp; ++wp)
        for (int64_t u = 0; u < R; ++u) {
          float* dst = dst_row + wp * step + u * C;
          const int64_t h = x_row(u), ww = wp - pb.pad_w;
          if (h < 0 || ww < 0 || ww >= W) std::fill(dst, dst + C, 0.f);
          else std::copy(x + ((n * H + h) * W + ww) * C, x + ((n * H + h) * W + ww + 1) * C, dst);
        }
      return;
    }
    // Few channels: per window row u, the pixels of x's row h go to every step-th place, moved
    // inline (a library call per 12-byte pixel took the transform to a fifth of conv1 NHWC's time).
    for (int64_t u = 0; u < R; ++u) {
      const int64_t h = x_row(u);
      float* dst = dst_row + u * C;
      // The padding columns (all columns of a padding row) as zeros.
      for (int64_t wp = 0; wp < Wp; ++wp)
        if (h < 0 || wp < pb.pad_w || wp >= pb.pad_w + W) std::fill(dst + wp * step, dst + wp * step + C, 0.f);
      if (h >= 0) copy_pixels(x + (n * H + h) * W * C, W, C, dst + pb.pad_w * step, step);
    }
  }
}

void im2win_transform_cpu(const Conv2dConfig& config, const float* x, float* window) {
  for (int64_t row = 0; row < im2win_transform_rows(config); ++row) im2win_transform_row_cpu(config, x, window, row);
}

Status conv2d_forward_cpu_extra_bytes(const Conv2dConfig& config, size_t* bytes, int threads) {
  return conv2d_forward_cpu_extra_bytes_order(config, bytes, threads, CpuTaskOrder::kAuto);
}

Status conv2d_forward_cpu_extra_bytes_order(const Conv2dConfig& config, size_t* bytes, int threads,
                                            CpuTaskOrder order) {
  Status st = conv2d_validate(config);
  if (!st.ok()) return st;
  if (!bytes) return Status(StatusCode::kNullPointer, "bytes is null");
  if (threads < 0) return Status(StatusCode::kInvalidArgument, "threads must be >= 0");
  *bytes = cpu_workspace(config, resolve_threads(threads), order).bytes;
  return Status::Ok();
}

Status conv2d_forward_cpu(const Conv2dConfig& config, const float* x, const float* w, float* y,
                          int threads) {
  return conv2d_forward_cpu_isa(config, x, w, y, threads, CpuVectorIsa::kAuto);
}

Status conv2d_forward_cpu(const Conv2dConfig& config, const float* x, const float* w, float* y, void* workspace,
                          size_t workspace_bytes, int threads) {
  Status st = check_forward_arguments(config, x, w, y, threads, CpuVectorIsa::kAuto);
  if (!st.ok()) return st;
  threads = resolve_threads(threads);
  const CpuWorkspace ws = cpu_workspace(config, threads, CpuTaskOrder::kAuto);
  if (workspace_bytes < ws.bytes)
    return Status(StatusCode::kWorkspaceTooSmall,
                  "workspace_bytes=" + std::to_string(workspace_bytes) + " but this call needs " +
                      std::to_string(ws.bytes) + " (ask conv2d_forward_cpu_extra_bytes with the same threads)");
  st = conv2d_check_pointer("workspace", workspace, kCpuWorkspaceAlignment);
  if (!st.ok()) return st;
  float* const base = static_cast<float*>(workspace);
  forward_cpu(config, x, w, y, base, base + ws.packed_offset / sizeof(float), threads, widest_cpu_isa(), ws.order);
  return Status::Ok();
}

Status conv2d_forward_cpu_isa(const Conv2dConfig& config, const float* x, const float* w, float* y, int threads,
                              CpuVectorIsa isa, CpuTaskOrder order) {
  Status st = check_forward_arguments(config, x, w, y, threads, isa);
  if (!st.ok()) return st;
  threads = resolve_threads(threads);
  if (isa == CpuVectorIsa::kAuto) isa = widest_cpu_isa();
  const CpuWorkspace ws = cpu_workspace(config, threads, order);
  const HostBuffer workspace(ws.bytes / sizeof(float));
  if (!workspace)
    return Status(StatusCode::kOutOfMemory, "cannot allocate " + std::to_string(ws.bytes) +
                                                " bytes of host memory for the window tensor and the packed filter");
  forward_cpu(config, x, w, y, workspace.get(), workspace.get() + ws.packed_offset / sizeof(float), threads, isa,
              ws.order);
  return Status::Ok();
}

namespace {

void forward_cpu(const Conv2dConfig& config, const float* x, const float* w, float* y, float* window, float* packed,
                 int threads, CpuVectorIsa isa, CpuTaskOrder order) {
  const Conv2dProblem& pb = config.problem;
  const int64_t P = pb.p(), Q = pb.q(), Wp = pb.w + 2 * pb.pad_w;
  const int64_t R = pb.r, S = pb.s, C = pb.c, K = pb.k;
  const int64_t G = cpu_row_groups(pb, threads), rows = pb.n * G;  // GEMM rows: groups of output rows
  const int64_t blocks = packed_filter_k(pb) / kCpuFilterBlock, block_elements = packed_block_elements(pb);
  const bool blocks_outer = order == CpuTaskOrder::kFilterBlocksOuter;
  const bool own_windows = order == CpuTaskOrder::kRowsOuterWorkerWindows;
  const bool nchw = config.layout == Layout::kNCHW;
  // Output rows [p, p_end) of image n, split evenly over the image's G groups.
  auto output_rows = [&](int64_t row_index, int64_t* n, int64_t* p, int64_t* p_end) {
    const int64_t group = row_index % G;
    *n = row_index / G, *p = group * P / G, *p_end = (group + 1) * P / G;
  };
  // kRowsOuterWorkerWindows: the window rows of one GEMM row into `own`, laid out as the GEMM reads
  // them (NCHW: per channel the group's rows, so channels lie (p_end - p) rows apart).
  auto build_own_window = [&](int64_t row_index, float* own) {
    int64_t n, p, p_end;
    output_rows(row_index, &n, &p, &p_end);
    const int64_t per_row = im2win_row_elements(config);
    if (nchw) {
      for (int64_t c = 0; c < C; ++c)
        for (int64_t pp = p; pp < p_end; ++pp)
          im2win_transform_row_to_cpu(config, x, (n * C + c) * P + pp, own + (c * (p_end - p) + pp - p) * per_row);
    } else {
      for (int64_t pp = p; pp < p_end; ++pp) im2win_transform_row_to_cpu(config, x, n * P + pp, own + (pp - p) * per_row);
    }
  };

  // own: the worker's window of this GEMM row (kRowsOuterWorkerWindows), else null (the tensor).
  auto run_task = [&](int64_t kb, int64_t row_index, const float* block, const float* own) {
    int64_t n, p, p_end;
    output_rows(row_index, &n, &p, &p_end);
    WindowRow row;
    row.b = block;
    row.q = (p_end - p) * Q;
    if (p_end - p > 1) row.row_q = Q;
    row.k0 = kb * kCpuFilterBlock;
    row.k1 = std::min(K, row.k0 + kCpuFilterBlock);
    if (nchw) {
      // Per channel, the window of (p, q) is S*R contiguous elements at q*s_w*R.
      row.a = own ? own : window + (n * C * P + p) * Wp * R;
      row.q_stride = pb.stride_w * R;
      row.row_stride = Wp * R;
      row.g_stride = (own ? p_end - p : P) * Wp * R;
      row.groups = C;
      row.len = S * R;
      row.y = y + (n * K * P + p) * Q;
      row.y_q = 1;
      row.y_k = P * Q;
    } else {
      // NHWC: the whole window is one run of S*R*C elements at q*s_w*R*C.
      row.a = own ? own : window + (n * P + p) * Wp * R * C;
      row.q_stride = pb.stride_w * R * C;
      row.row_stride = Wp * R * C;
      row.g_stride = 0;
      row.groups = 1;
      row.len = S * R * C;
      row.y = y + (n * P + p) * Q * K;
      row.y_q = K;
      row.y_k = 1;
    }
    window_row_gemm(isa, row);
  };
  const int64_t tasks = gemm_tasks(pb, threads);
  // With own windows, worker i's window starts i windows into `window` (cpu_workspace's layout).
  const int64_t own_window_floats = own_windows ? int64_t(worker_window_bytes(config, threads) / sizeof(float)) : 0;
  WorkerTeam::run(team_size(config, threads), [&](WorkerTeam& team, int worker) {
    int64_t begin, end;
    // Phase 1: the transform (none with the workers' own windows), and with rows outermost the
    // whole filter's pack.
    if (!own_windows) {
      team.range(im2win_transform_rows(config), worker, &begin, &end);
      for (int64_t row = begin; row < end; ++row) im2win_transform_row_cpu(config, x, window, row);
    }
    if (!blocks_outer) {
      team.range(blocks, worker, &begin, &end);
      for (int64_t kb = begin; kb < end; ++kb) pack_filter_block_cpu(config, w, packed + kb * block_elements, kb, isa);
    }
    team.barrier();
    // Phase 2: the GEMM tasks. With blocks outermost, a worker packs each block its range enters
    // into its own buffer, the worker-th of `packed` (workers past the tasks have none).
    team.range(tasks, worker, &begin, &end);
    if (blocks_outer) {
      float* block = packed + worker * block_elements;
      for (int64_t task = begin, packed_kb = -1; task < end; ++task) {
        const int64_t kb = task / rows;
        if (kb != packed_kb) pack_filter_block_cpu(config, w, block, packed_kb = kb, isa);
        run_task(kb, task % rows, block, nullptr);
      }
    } else {
      // With its own window, a worker builds a GEMM row's window when its range enters the row.
      float* own = own_windows ? window + worker * own_window_floats : nullptr;
      for (int64_t task = begin, built = -1; task < end; ++task) {
        const int64_t kb = task % blocks, row_index = task / blocks;
        if (own && row_index != built) build_own_window(built = row_index, own);
        run_task(kb, row_index, packed + kb * block_elements, own);
      }
    }
  });
}

}  // namespace

}  // namespace winconv
