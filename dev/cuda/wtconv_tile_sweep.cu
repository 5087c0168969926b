// Tile sweep for the WTConv base kernels: times the forward and the backward of each shape of a
// shapes CSV (bench/wtconv_shapes*.csv format; rows of stride 2 time the forward on its own
// schedule and the backward on the full grid with the stride-1 twin's tiles, both with the base
// conv folded into level 1 (make_wtconv_run, as the library runs them); other strides are skipped)
// with every power-of-two base tile
// from the power-of-two tile the rule starts from down to 8 x 8 outputs (forward) and 4 x 8
// level-1 coefficients (backward), through the planner's tile hint (WtconvTileHint), and marks the
// rule's choice, so a tile rule can be checked against measurements. Each tile's y, dx and
// parameter gradients are compared with the first tile's (y and dx: the same per-element
// arithmetic, so equal; the gradients' partial sums are grouped by tile, so they agree to
// rounding).
//
//   wtconv_tile_sweep SHAPES_CSV [fp32,fp16] [ITERS]
//
// With WTCONV_SWEEP_FIT=1 the tiles are instead the start tile, the rule's and tiles sized to the
// plane (multiples of 8 x 16 or 4 x 8 outputs, 4 x 8 or 2 x 4 coefficients; fitted_tiles).
//
// With WTCONV_SWEEP_GRID=1 only the backward runs, over every tile from the start tile down to 4 x 8
// coefficients in steps of 2 x 4 (the landscape a backward tile rule is fitted to). With
// WTCONV_SWEEP_GRID=fwd only the forward runs, over every tile from the start tile down to 8 x 8
// outputs in steps of 4 x 4.
//
// With WTCONV_SWEEP_NP=1 each pass keeps the planner's tile and takes 1, 2, ... planes per item
// (WtconvTileHint::fwd_np, bwd_np) up to the batch or max(4, 3x the planner's), and each line adds
// the items per channel, the splits, the resident blocks per SM and the planner's modelled cost of
// the busiest block (busiest_block_cells; the data a planes-per-item rule is fitted to).
//
// Prints: shape dtype pass tile np ms vs_first kept max_rel_diff (vs_first: against the first
// tile, the power-of-two start; kept: the share of the computed outputs or coefficients inside the
// plane).
//
// Build (from the repository root, after the library):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DWINCONV_HAVE_CUDA=1 -Iinclude -Isrc \
//     dev/cuda/wtconv_tile_sweep.cu -Lbuild -lwinconv -Xlinker -rpath='$ORIGIN/..' -o build/dev/wtconv_tile_sweep
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cuda/wtconv/wtconv_launch.h"
#include "strip_bench_common.cuh"
#include "winconv/wtconv.h"

using namespace winconv;
using namespace winconv::wtconv_detail;

namespace {

#define CHECK_OK(s)                                                                   \
  do {                                                                                \
    const Status st_ = (s);                                                           \
    if (!st_.ok()) {                                                                  \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, st_.message().c_str()); \
      std::exit(2);                                                                   \
    }                                                                                 \
  } while (0)

struct Shape {
  std::string name;
  WtconvProblem p;
};

std::vector<Shape> read_shapes(const char* path) {
  std::ifstream in(path);
  std::vector<Shape> out;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) { header = false; continue; }
    std::stringstream ss(line);
    std::string f[8];
    for (int i = 0; i < 8 && std::getline(ss, f[i], ','); ++i) {}
    Shape s;
    s.name = f[0];
    s.p.batch = std::stoll(f[1]); s.p.channels = std::stoll(f[2]); s.p.height = std::stoll(f[3]);
    s.p.width = std::stoll(f[4]); s.p.kernel_size = std::stoll(f[5]); s.p.levels = std::stoll(f[6]);
    s.p.stride = f[7].empty() ? 1 : std::stoll(f[7]);
    if (s.p.stride <= 2) out.push_back(s);
  }
  return out;
}

struct DevBuf {
  void* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t bytes) : n(bytes) { STRIP_BENCH_CHECK(cudaMalloc(&p, bytes ? bytes : 16)); }
  ~DevBuf() { cudaFree(p); }
  float* f() const { return static_cast<float*>(p); }
};

void fill(DevBuf& b, size_t n, Precision prec, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  if (prec == Precision::kFP32) {
    std::vector<float> h(n);
    for (float& v : h) v = d(rng);
    STRIP_BENCH_CHECK(cudaMemcpy(b.p, h.data(), n * 4, cudaMemcpyHostToDevice));
  } else {
    std::vector<__half> h(n);
    for (__half& v : h) v = __float2half_rn(d(rng));
    STRIP_BENCH_CHECK(cudaMemcpy(b.p, h.data(), n * 2, cudaMemcpyHostToDevice));
  }
}

std::vector<double> fetch(const DevBuf& b, size_t n, Precision prec) {
  std::vector<double> out(n);
  if (prec == Precision::kFP32) {
    std::vector<float> h(n);
    STRIP_BENCH_CHECK(cudaMemcpy(h.data(), b.p, n * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) out[i] = h[i];
  } else {
    std::vector<__half> h(n);
    STRIP_BENCH_CHECK(cudaMemcpy(h.data(), b.p, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) out[i] = __half2float(h[i]);
  }
  return out;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0, scale = 0;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    if (!(d == d)) return INFINITY;
    m = std::max(m, d);
  }
  return scale > 0 ? m / scale : m;
}

double kept(const WtconvTile& t, int64_t gh, int64_t gw) {
  return double(gh * gw) / (double(t.tiles_y) * t.th * t.tiles_x * t.tw);
}

// Fit mode (WTCONV_SWEEP_FIT=1): besides the power-of-two start tile (first, the reference) and the
// rule's tile, tiles sized to the grid: for the start tile's and the rule's tile counts along each
// axis, and one more tile along either, the grid's extent over the count rounded up to a multiple
// of (mh, mw) (forward outputs: 8 x 16 and 4 x 8; backward coefficients: 4 x 8 and 2 x 4).
std::vector<std::pair<int, int>> fitted_tiles(int64_t gh, int64_t gw, int th0, int tw0, int rth, int rtw,
                                              bool backward) {
  std::vector<std::pair<int, int>> out{{th0, tw0}};
  const auto add = [&](int th, int tw) {
    if (th < 2 || tw < 4 || th > th0 || tw > tw0) return;
    for (const auto& t : out)
      if (t.first == th && t.second == tw) return;
    out.push_back({th, tw});
  };
  add(rth, rtw);
  const int steps[2][2] = {{backward ? 4 : 8, backward ? 8 : 16}, {backward ? 2 : 4, backward ? 4 : 8}};
  for (const auto& base : {std::make_pair(th0, tw0), std::make_pair(rth, rtw)})
    for (const auto& m : steps)
      for (const auto& extra : {std::make_pair(0, 0), std::make_pair(1, 0), std::make_pair(0, 1)}) {
        // The tile counts along each axis, then fitted_tile_extent's rounding for those counts.
        const int64_t ny = ceil_div(gh, base.first) + extra.first, nx = ceil_div(gw, base.second) + extra.second;
        add(extent_per_tile(gh, ny, m[0]), extent_per_tile(gw, nx, m[1]));
      }
  return out;
}

bool fit_mode = false, grid_mode = false, fwd_grid = false, np_mode = false;

// One timed case: a base tile and its planes per item (0: the planner's).
struct Case {
  int th, tw, np;
};

void sweep(const Shape& s, Precision prec, int iters) {
  WtconvProblem p = s.p;
  p.precision = prec;
  CHECK_OK(wtconv_validate(p));
  const int64_t C = p.channels, kk = p.kernel_size * p.kernel_size, L = p.levels;
  const size_t n = size_t(p.x_elements()), no = size_t(p.y_elements()), e = prec == Precision::kFP32 ? 4 : 2;
  DevBuf x(n * e), dy(n * e), y(n * e), dx(n * e);
  fill(x, n, prec, 1, 1.f);
  fill(dy, n, prec, 2, 1.f);
  // Parameters: one buffer, and one for their gradients.
  const size_t nparam = size_t(C * kk + 2 * C + L * (4 * C * kk + 4 * C));
  DevBuf prm_buf(nparam * 4), grad_buf(nparam * 4);
  fill(prm_buf, nparam, Precision::kFP32, 3, 0.2f);
  WtconvParams prm;
  WtconvParamGrads grads;
  {
    float* a = prm_buf.f();
    float* g = grad_buf.f();
    size_t off = 0;
    auto take = [&](size_t m, const float** pa, float** pg) {
      *pa = a + off;
      *pg = g + off;
      off += m;
    };
    take(C * kk, &prm.base_weight, &grads.base_weight);
    take(C, &prm.base_bias, &grads.base_bias);
    take(C, &prm.base_scale, &grads.base_scale);
    for (int l = 0; l < L; ++l) {
      take(4 * C * kk, &prm.level_weight[l], &grads.level_weight[l]);
      take(4 * C, &prm.level_scale[l], &grads.level_scale[l]);
    }
  }
  const WtconvPlan rule = make_wtconv_plan(p);
  // The backward as the library runs it (a strided one on the full grid, folded at stride 2); the
  // forward on the problem's own schedule, whatever make_wtconv_run would pick for it.
  auto run_of = [&](const WtconvTileHint& h, bool backward) {
    if (backward) return make_wtconv_run(p, true, h);
    WtconvRun r;
    r.plan = make_wtconv_plan(p, h);
    r.bytes = r.plan.fwd_bytes;
    return r;
  };
  std::vector<double> y_ref, dx_ref, g_ref;
  const char* dt = prec == Precision::kFP32 ? "fp32" : "fp16";
  for (const bool backward : {false, true}) {
    if (grid_mode && backward == fwd_grid) continue;
    // From the power-of-two tile the rule starts from (before its coverage step) down.
    const int cap = fwd_base_tile_cap(int(p.stride));
    const int th0 = backward ? pow2_at_least(rule.hl[1], 16) : pow2_at_least(rule.Ho, cap);
    const int tw0 = backward ? pow2_at_least(rule.wl[1], 32) : pow2_at_least(rule.Wo, 2 * cap);
    const WtconvTile& chosen = backward ? rule.bwd_base : rule.fwd_base;
    const int min_th = backward ? 4 : 8, min_tw = 8;
    std::vector<Case> cases;
    if (np_mode) {
      const int64_t np_max = std::min<int64_t>(p.batch, std::max(4, 3 * chosen.np));
      for (int np = 1; np <= np_max; ++np) cases.push_back({chosen.th, chosen.tw, np});
    } else if (grid_mode) {
      const int dh = backward ? 2 : 4;
      for (int th = th0; th >= min_th; th -= dh)
        for (int tw = tw0; tw >= min_tw; tw -= 4) cases.push_back({th, tw, 0});
    } else if (!fit_mode) {
      for (int th = th0; th >= min_th; th /= 2)
        for (int tw = tw0; tw >= min_tw; tw /= 2) cases.push_back({th, tw, 0});
    } else {
      const int64_t gh = backward ? rule.hl[1] : rule.Ho, gw = backward ? rule.wl[1] : rule.Wo;
      for (const auto& tile : fitted_tiles(gh, gw, th0, tw0, chosen.th, chosen.tw, backward))
        cases.push_back({tile.first, tile.second, 0});
    }
    double first_ms = 0;
    for (const Case& c : cases) {
      const int th = c.th, tw = c.tw;
      WtconvTileHint h;
      (backward ? h.bwd_th : h.fwd_th) = th;
      (backward ? h.bwd_tw : h.fwd_tw) = tw;
      (backward ? h.bwd_np : h.fwd_np) = c.np;
      const WtconvRun r = run_of(h, backward);
      const WtconvTile& t = backward ? r.plan.bwd_base : r.plan.fwd_base;
      if (t.th != th || t.tw != tw) continue;  // shrunk by the shared-memory fit: not this tile
      if (c.np > 0 && t.np != c.np) continue;  // past the shared-memory budget
      DevBuf ws(r.bytes);
      auto call = [&] {
        if (backward)
          CHECK_OK(wtconv_backward_cuda(r, prec, dy.p, x.p, prm, dx.p, grads, ws.p, nullptr));
        else
          CHECK_OK(wtconv_forward_cuda(r, prec, x.p, prm, y.p, ws.p, nullptr));
      };
      STRIP_BENCH_CHECK(cudaMemset(backward ? dx.p : y.p, 0xff, (backward ? n : no) * e));  // NaN
      if (backward) STRIP_BENCH_CHECK(cudaMemset(grad_buf.p, 0xff, nparam * 4));
      call();
      STRIP_BENCH_CHECK(cudaDeviceSynchronize());
      double diff;
      if (!backward) {
        std::vector<double> out = fetch(y, no, prec);
        if (y_ref.empty()) y_ref = out;
        diff = max_rel_diff(out, y_ref);
      } else {
        std::vector<double> out = fetch(dx, n, prec), g = fetch(grad_buf, nparam, Precision::kFP32);
        if (dx_ref.empty()) { dx_ref = out; g_ref = g; }
        diff = std::max(max_rel_diff(out, dx_ref), max_rel_diff(g, g_ref));
      }
      const double ms = strip_bench::median_ms(call, iters);  // the checked call above warmed up
      if (first_ms == 0) first_ms = ms;
      const int64_t gh = backward ? r.plan.hl[1] : r.plan.Ho, gw = backward ? r.plan.wl[1] : r.plan.Wo;
      const bool planner = th == chosen.th && tw == chosen.tw && (c.np == 0 || c.np == chosen.np);
      std::printf("%-28s %s %s %2dx%-3d np %-2d %8.4f %6.3f %5.2f %9.2e", s.name.c_str(), dt,
                  backward ? "bwd" : "fwd", th, tw, t.np, ms, ms / first_ms, kept(t, gh, gw), diff);
      if (np_mode) {
        const int k = r.plan.k;
        const int64_t model = base_tile_cost(t, backward, p.batch, C, gh, gw, k, int(p.stride));
        const int bound = backward ? bwd_base_blocks_per_sm(k) : fwd_base_blocks_per_sm(k);
        std::printf(" items %lld splits %d blocks/SM %zu model %lld", (long long)t.items, t.splits,
                    resident_blocks(t.smem, bound), (long long)model);
      }
      std::printf("%s\n", planner ? "  rule" : "");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SHAPES_CSV [fp32,fp16] [ITERS]\n", argv[0]);
    return 2;
  }
  const std::string dtypes = argc > 2 ? argv[2] : "fp32";
  const int iters = argc > 3 ? std::atoi(argv[3]) : 20;
  fit_mode = std::getenv("WTCONV_SWEEP_FIT") != nullptr;
  grid_mode = std::getenv("WTCONV_SWEEP_GRID") != nullptr;
  fwd_grid = grid_mode && std::string(std::getenv("WTCONV_SWEEP_GRID")) == "fwd";
  np_mode = std::getenv("WTCONV_SWEEP_NP") != nullptr;
  std::printf("%-28s %s %s %-5s %-5s %8s %6s %5s %9s\n", "shape", "dtype", "pass", "tile", "", "ms", "vs_first",
              "kept", "max_diff");
  for (const Shape& s : read_shapes(argv[1])) {
    if (dtypes.find("fp32") != std::string::npos) sweep(s, Precision::kFP32, iters);
    if (dtypes.find("fp16") != std::string::npos) sweep(s, Precision::kFP16, iters);
  }
  return 0;
}
