// WTConv dev harness: checks the fused forward/backward against the float64 CPU oracle on many
// shapes (every option: odd sizes, k 1..15, levels 1..8, stride 1..3, fp32/fp16/bf16; outputs
// poisoned with NaN first; two runs must be bit-identical), then times the benchmark shapes.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -DWINCONV_HAVE_CUDA=1 -Iinclude -Isrc \
//     dev/cuda/wtconv_check.cu src/cuda/wtconv/*.cu src/cuda/common/*.cu src/capi/wtconv_api.cpp \
//     src/cpu/wtconv_reference.cpp src/common/status.cpp src/common/names.cpp -o wtconv_check
//   ./wtconv_check check | bench [shapes.csv [dtypes, e.g. fp32,fp16]]   (shapes: bench/wtconv_shapes*.csv
//   format, the stride column optional)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/wtconv_reference.h"
#include "winconv/wtconv.h"

using namespace winconv;

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                  \
    }                                                                                \
  } while (0)

static size_t esize(Precision p) { return p == Precision::kFP32 ? 4 : 2; }
static const char* pname(Precision p) { return p == Precision::kFP32 ? "fp32" : p == Precision::kFP16 ? "fp16" : "bf16"; }

// Host activations: values rounded to the precision (so the oracle sees what the GPU sees).
static void to_device_format(Precision p, const std::vector<float>& v, std::vector<uint16_t>* h16, std::vector<float>* rounded) {
  rounded->resize(v.size());
  if (p == Precision::kFP32) { *rounded = v; return; }
  h16->resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (p == Precision::kFP16) {
      __half h = __float2half_rn(v[i]);
      std::memcpy(&(*h16)[i], &h, 2);
      (*rounded)[i] = __half2float(h);
    } else {
      __nv_bfloat16 h = __float2bfloat16_rn(v[i]);
      std::memcpy(&(*h16)[i], &h, 2);
      (*rounded)[i] = __bfloat162float(h);
    }
  }
}
static std::vector<double> from_device_format(Precision p, const std::vector<char>& raw, size_t n) {
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (p == Precision::kFP32) { float f; std::memcpy(&f, raw.data() + 4 * i, 4); out[i] = f; }
    else if (p == Precision::kFP16) { __half h; std::memcpy(&h, raw.data() + 2 * i, 2); out[i] = __half2float(h); }
    else { __nv_bfloat16 h; std::memcpy(&h, raw.data() + 2 * i, 2); out[i] = __bfloat162float(h); }
  }
  return out;
}

static double rel_l2(const std::vector<double>& got, const std::vector<double>& ref, bool* nan) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) *nan = true;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

struct Dev {
  void* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t bytes) : n(bytes) { CK(cudaMalloc(&p, bytes ? bytes : 1)); }
  ~Dev() { cudaFree(p); }
  template <typename T> T* as() const { return static_cast<T*>(p); }
};

struct Case {
  int64_t B, C, H, W, k, L, s;
  Precision prec;
  bool bias;
};

struct Buffers {
  WtconvProblem pr;
  std::vector<float> x, dy, w0, b0, s0, wl[8], sl[8];  // rounded host values
  Dev *dx_in = nullptr, *ddy = nullptr, *dy_out = nullptr, *ddx = nullptr, *dfw = nullptr, *dbw = nullptr;
  Dev *dw0 = nullptr, *db0 = nullptr, *ds0 = nullptr, *dwl[8] = {}, *dsl[8] = {};
  Dev *gw0 = nullptr, *gb0 = nullptr, *gs0 = nullptr, *gwl[8] = {}, *gsl[8] = {};
  WtconvParams prm;
  WtconvParamGrads grd;
  size_t fws = 0, bws = 0;
};

static Dev* upload(const std::vector<float>& v) {
  Dev* d = new Dev(v.size() * 4);
  CK(cudaMemcpy(d->p, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return d;
}

// Large activations for timing only: a counter-based hash gives uniform values of unit variance
// (fresh and random, never constant), drawn on the device in the activation type, so a 10^9-element
// shape costs no host time; the checked cases keep the normal draws on the host.
__global__ void fill_uniform_kernel(void* out, size_t n, uint64_t seed, Precision prec) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float v = (float(z >> 40) * (1.f / 16777216.f) - 0.5f) * 3.4641016f;
    if (prec == Precision::kFP32) static_cast<float*>(out)[i] = v;
    else if (prec == Precision::kFP16) static_cast<__half*>(out)[i] = __float2half_rn(v);
    else static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
  }
}

static Dev* device_uniform(size_t n, uint64_t seed, Precision prec) {
  Dev* d = new Dev(n * esize(prec));
  fill_uniform_kernel<<<1024, 256>>>(d->p, n, seed, prec);
  CK(cudaGetLastError());
  return d;
}

static Buffers* make_buffers(const Case& cs, uint32_t seed, bool fast_activations = false) {
  Buffers* bf = new Buffers;
  WtconvProblem& pr = bf->pr;
  pr.batch = cs.B; pr.channels = cs.C; pr.height = cs.H; pr.width = cs.W;
  pr.kernel_size = cs.k; pr.levels = cs.L; pr.stride = cs.s; pr.precision = cs.prec;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto randv = [&](size_t n, float sc, float mean) { std::vector<float> v(n); for (auto& e : v) e = mean + sc * nd(rng); return v; };
  const size_t kk = size_t(cs.k * cs.k);
  if (fast_activations) {  // timing only: no host copies (bf->x, bf->dy stay empty)
    bf->dx_in = device_uniform(pr.x_elements(), seed, cs.prec);
    bf->ddy = device_uniform(pr.y_elements(), seed + 1, cs.prec);
  } else {
    std::vector<uint16_t> h16;
    const std::vector<float> xr = randv(pr.x_elements(), 1.f, 0.f), dyr = randv(pr.y_elements(), 1.f, 0.f);
    to_device_format(cs.prec, xr, &h16, &bf->x);
    bf->dx_in = new Dev(pr.x_elements() * esize(cs.prec));
    CK(cudaMemcpy(bf->dx_in->p, cs.prec == Precision::kFP32 ? (void*)bf->x.data() : (void*)h16.data(), bf->dx_in->n, cudaMemcpyHostToDevice));
    to_device_format(cs.prec, dyr, &h16, &bf->dy);
    bf->ddy = new Dev(pr.y_elements() * esize(cs.prec));
    CK(cudaMemcpy(bf->ddy->p, cs.prec == Precision::kFP32 ? (void*)bf->dy.data() : (void*)h16.data(), bf->ddy->n, cudaMemcpyHostToDevice));
  }
  const float wsc = 1.f / float(cs.k);
  bf->w0 = randv(cs.C * kk, wsc, 0.f); bf->b0 = randv(cs.C, 0.5f, 0.f); bf->s0 = randv(cs.C, 0.3f, 1.f);
  bf->dw0 = upload(bf->w0); bf->ds0 = upload(bf->s0);
  if (cs.bias) bf->db0 = upload(bf->b0);
  bf->prm.base_weight = bf->dw0->as<float>(); bf->prm.base_scale = bf->ds0->as<float>();
  bf->prm.base_bias = cs.bias ? bf->db0->as<float>() : nullptr;
  bf->gw0 = new Dev(cs.C * kk * 4); bf->gb0 = new Dev(cs.C * 4); bf->gs0 = new Dev(cs.C * 4);
  bf->grd.base_weight = bf->gw0->as<float>(); bf->grd.base_scale = bf->gs0->as<float>();
  bf->grd.base_bias = cs.bias ? bf->gb0->as<float>() : nullptr;
  for (int l = 0; l < cs.L; ++l) {
    bf->wl[l] = randv(4 * cs.C * kk, wsc, 0.f); bf->sl[l] = randv(4 * cs.C, 0.3f, 0.5f);
    bf->dwl[l] = upload(bf->wl[l]); bf->dsl[l] = upload(bf->sl[l]);
    bf->prm.level_weight[l] = bf->dwl[l]->as<float>(); bf->prm.level_scale[l] = bf->dsl[l]->as<float>();
    bf->gwl[l] = new Dev(4 * cs.C * kk * 4); bf->gsl[l] = new Dev(4 * cs.C * 4);
    bf->grd.level_weight[l] = bf->gwl[l]->as<float>(); bf->grd.level_scale[l] = bf->gsl[l]->as<float>();
  }
  bf->dy_out = new Dev(pr.y_elements() * esize(cs.prec));
  bf->ddx = new Dev(pr.x_elements() * esize(cs.prec));
  Status st = wtconv_forward_workspace_size(pr, &bf->fws);
  if (st.ok()) st = wtconv_backward_workspace_size(pr, &bf->bws);
  if (!st.ok()) { std::printf("workspace query failed: %s\n", st.to_string().c_str()); std::exit(2); }
  bf->dfw = new Dev(bf->fws); bf->dbw = new Dev(bf->bws);
  return bf;
}

static void free_buffers(Buffers* b) {
  delete b->dx_in; delete b->ddy; delete b->dy_out; delete b->ddx; delete b->dfw; delete b->dbw;
  delete b->dw0; delete b->db0; delete b->ds0; delete b->gw0; delete b->gb0; delete b->gs0;
  for (int l = 0; l < 8; ++l) { delete b->dwl[l]; delete b->dsl[l]; delete b->gwl[l]; delete b->gsl[l]; }
  delete b;
}

static Status run_fwd(Buffers* b, cudaStream_t st) {
  return wtconv_forward(b->pr, b->dx_in->p, b->prm, b->dy_out->p, b->dfw->p, b->fws, st);
}
static Status run_bwd(Buffers* b, cudaStream_t st) {
  return wtconv_backward(b->pr, b->ddy->p, b->dx_in->p, b->prm, b->ddx->p, b->grd, b->dbw->p, b->bws, st);
}

static std::vector<char> fetch(const Dev* d) {
  std::vector<char> h(d->n);
  CK(cudaMemcpy(h.data(), d->p, d->n, cudaMemcpyDeviceToHost));
  return h;
}
static std::vector<double> fetch_f32(const Dev* d, size_t n) {
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), d->p, n * 4, cudaMemcpyDeviceToHost));
  return std::vector<double>(h.begin(), h.end());
}

static void poison(Buffers* b) {
  CK(cudaMemset(b->dy_out->p, 0xFF, b->dy_out->n));
  CK(cudaMemset(b->ddx->p, 0xFF, b->ddx->n));
  CK(cudaMemset(b->gw0->p, 0xFF, b->gw0->n)); CK(cudaMemset(b->gb0->p, 0xFF, b->gb0->n)); CK(cudaMemset(b->gs0->p, 0xFF, b->gs0->n));
  for (int l = 0; l < b->pr.levels; ++l) { CK(cudaMemset(b->gwl[l]->p, 0xFF, b->gwl[l]->n)); CK(cudaMemset(b->gsl[l]->p, 0xFF, b->gsl[l]->n)); }
  CK(cudaMemset(b->dfw->p, 0xFF, b->dfw->n)); CK(cudaMemset(b->dbw->p, 0xFF, b->dbw->n));
}

// Returns true when every output and gradient passes.
static bool check_case(const Case& cs, uint32_t seed) {
  Buffers* b = make_buffers(cs, seed);
  poison(b);
  Status s1 = run_fwd(b, 0), s2 = run_bwd(b, 0);
  CK(cudaDeviceSynchronize());
  if (!s1.ok() || !s2.ok()) {
    std::printf("FAIL status %s / %s\n", s1.to_string().c_str(), s2.to_string().c_str());
    free_buffers(b);
    return false;
  }
  std::vector<char> y1 = fetch(b->dy_out), dx1 = fetch(b->ddx), gw01 = fetch(b->gw0), gs01 = fetch(b->gs0), gb01 = fetch(b->gb0);
  std::vector<std::vector<char>> gwl1, gsl1;
  for (int l = 0; l < cs.L; ++l) { gwl1.push_back(fetch(b->gwl[l])); gsl1.push_back(fetch(b->gsl[l])); }

  WtconvParams hp;
  hp.base_weight = b->w0.data(); hp.base_scale = b->s0.data(); hp.base_bias = cs.bias ? b->b0.data() : nullptr;
  for (int l = 0; l < cs.L; ++l) { hp.level_weight[l] = b->wl[l].data(); hp.level_scale[l] = b->sl[l].data(); }
  std::vector<double> yref;
  wtconv_reference_forward(b->pr, b->x.data(), hp, &yref);
  WtconvReferenceGrads gref;
  wtconv_reference_backward(b->pr, b->dy.data(), b->x.data(), hp, &gref);

  const double tol = cs.prec == Precision::kFP32 ? 1e-5 : 1e-2;
  bool nan = false, ok = true;
  double worst = 0;
  std::string worst_name;
  auto cmp = [&](const char* name, const std::vector<double>& got, const std::vector<double>& ref) {
    bool n = false;
    const double e = rel_l2(got, ref, &n);
    if (n) { nan = true; std::printf("  NaN in %s\n", name); }
    if (!(e <= tol)) { ok = false; std::printf("  %s rel err %.3e\n", name, e); }
    if (e > worst || std::isnan(e)) { worst = e; worst_name = name; }
  };
  cmp("y", from_device_format(cs.prec, y1, yref.size()), yref);
  cmp("dx", from_device_format(cs.prec, dx1, gref.dx.size()), gref.dx);
  cmp("dW0", fetch_f32(b->gw0, gref.base_weight.size()), gref.base_weight);
  cmp("ds0", fetch_f32(b->gs0, gref.base_scale.size()), gref.base_scale);
  if (cs.bias) cmp("db0", fetch_f32(b->gb0, gref.base_bias.size()), gref.base_bias);
  for (int l = 0; l < cs.L; ++l) {
    std::string nw = "dW" + std::to_string(l + 1), ns = "ds" + std::to_string(l + 1);
    cmp(nw.c_str(), fetch_f32(b->gwl[l], gref.level_weight[l].size()), gref.level_weight[l]);
    cmp(ns.c_str(), fetch_f32(b->gsl[l], gref.level_scale[l].size()), gref.level_scale[l]);
  }
  // Determinism: a second run (after re-poisoning) must be bit-identical.
  poison(b);
  s1 = run_fwd(b, 0); s2 = run_bwd(b, 0);
  CK(cudaDeviceSynchronize());
  bool same = fetch(b->dy_out) == y1 && fetch(b->ddx) == dx1 && fetch(b->gw0) == gw01 && fetch(b->gs0) == gs01;
  if (cs.bias) same = same && fetch(b->gb0) == gb01;
  for (int l = 0; l < cs.L; ++l) same = same && fetch(b->gwl[l]) == gwl1[l] && fetch(b->gsl[l]) == gsl1[l];
  if (!same) std::printf("  runs differ (not deterministic)\n");
  ok = ok && !nan && same;
  // FNV-1a of every output and gradient: two builds of the kernels that print the same hash for a
  // case computed the same bits (a schedule change meant to be bit-identical is checked this way).
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](const std::vector<char>& v) {
    for (char c : v) hash = (hash ^ uint8_t(c)) * 1099511628211ull;
  };
  mix(y1); mix(dx1); mix(gw01); mix(gs01);
  if (cs.bias) mix(gb01);
  for (int l = 0; l < cs.L; ++l) { mix(gwl1[l]); mix(gsl1[l]); }
  std::printf("%s B%lld C%lld %lldx%lld k%lld L%lld s%lld %s bias%d  worst %s %.2e  hash %016llx\n",
              ok ? "ok  " : "FAIL", (long long)cs.B, (long long)cs.C, (long long)cs.H, (long long)cs.W,
              (long long)cs.k, (long long)cs.L, (long long)cs.s, pname(cs.prec), int(cs.bias), worst_name.c_str(),
              worst, (unsigned long long)hash);
  free_buffers(b);
  return ok;
}

static int run_checks() {
  std::vector<Case> cases;
  const Precision P[3] = {Precision::kFP32, Precision::kFP16, Precision::kBF16};
  // Fixed odd/edge shapes.
  const int sizes[][2] = {{1, 6}, {5, 3}, {7, 10}, {13, 9}, {2, 2}, {1, 1}, {17, 33}, {40, 37}};
  int idx = 0;
  for (auto& hw : sizes)
    for (int k : {1, 3, 5, 7}) {
      const int L = 1 + (idx % 5), s = 1 + (idx % 3);
      cases.push_back({2, 3, hw[0], hw[1], k, L, s, P[idx % 3], idx % 4 != 3});
      ++idx;
    }
  std::mt19937 rng(1234);
  for (int i = 0; i < 40; ++i) {
    Case c;
    c.k = 1 + 2 * (rng() % 8);
    c.L = 1 + rng() % 8;
    c.s = 1 + rng() % 3;
    c.H = 1 + rng() % (c.k > 9 ? 24 : 70);
    c.W = 1 + rng() % (c.k > 9 ? 24 : 70);
    c.B = 1 + rng() % 4;
    c.C = 1 + rng() % 5;
    c.prec = P[rng() % 3];
    c.bias = rng() % 4 != 0;
    cases.push_back(c);
  }
  // A few shapes with many planes per block / many splits, k 3/5/7 specialisations and the generic path.
  cases.push_back({64, 8, 7, 7, 5, 2, 1, Precision::kFP32, true});
  cases.push_back({16, 6, 14, 14, 5, 3, 1, Precision::kFP32, true});
  cases.push_back({3, 2, 64, 96, 7, 4, 1, Precision::kFP32, true});
  cases.push_back({2, 2, 130, 70, 3, 8, 1, Precision::kFP32, false});
  cases.push_back({2, 2, 50, 45, 15, 3, 2, Precision::kFP32, true});
  cases.push_back({2, 2, 33, 31, 9, 5, 3, Precision::kFP32, true});
  cases.push_back({4, 4, 56, 56, 5, 5, 1, Precision::kBF16, true});
  // L = 2, where level 2 reads the activations (4-aligned rows: vector loads; odd widths: scalar).
  cases.push_back({2, 3, 36, 40, 5, 2, 1, Precision::kFP16, true});
  cases.push_back({3, 2, 33, 44, 3, 2, 1, Precision::kBF16, false});
  cases.push_back({2, 2, 29, 48, 7, 2, 1, Precision::kFP32, true});
  cases.push_back({2, 3, 21, 27, 9, 2, 1, Precision::kFP16, true});
  cases.push_back({2, 2, 28, 32, 5, 2, 2, Precision::kFP32, true});
  // 16-bit L = 2 with W % 8 == 0 and even r: the level-2 kernels stage block pairs (pair_staging),
  // with an odd height (a pair's last pixel rows outside the plane), r = 4 and r = 0.
  cases.push_back({2, 3, 37, 48, 5, 2, 1, Precision::kBF16, true});
  cases.push_back({2, 2, 30, 64, 9, 2, 1, Precision::kFP16, false});
  cases.push_back({3, 2, 9, 8, 1, 2, 1, Precision::kBF16, true});
  cases.push_back({1, 2, 3, 4, 5, 2, 1, Precision::kFP32, true});
  // L = 2 forwards that fuse level 2 into the base kernel (k = 5, stride 1, rows of whole 16 bytes),
  // with many planes per block and an odd height (appended: the cases before keep their seeds).
  cases.push_back({16, 3, 8, 8, 5, 2, 1, Precision::kFP32, true});
  cases.push_back({8, 2, 13, 16, 5, 2, 1, Precision::kBF16, false});
  // L = 2 fp32 backwards that fuse level 2 into the base kernel (k = 5, stride 1, tiles of whole
  // column quads): one plane and many planes per block, odd sizes, several tiles per plane.
  cases.push_back({2, 3, 64, 64, 5, 2, 1, Precision::kFP32, true});
  cases.push_back({16, 3, 16, 16, 5, 2, 1, Precision::kFP32, false});
  cases.push_back({2, 2, 67, 100, 5, 2, 1, Precision::kFP32, true});
  // The same for 16-bit activations (boxes converted into float tiles, X_1 and G_1 rounded as the
  // level kernel rounds them).
  cases.push_back({2, 3, 64, 64, 5, 2, 1, Precision::kFP16, true});
  cases.push_back({2, 2, 37, 80, 5, 2, 1, Precision::kBF16, false});
  cases.push_back({4, 2, 16, 40, 5, 2, 1, Precision::kFP16, true});
  int fails = 0;
  for (size_t i = 0; i < cases.size(); ++i) fails += check_case(cases[i], 1000 + uint32_t(i)) ? 0 : 1;
  std::printf("CHECK SUMMARY: %d of %zu cases failed\n", fails, cases.size());
  return fails ? 1 : 0;
}

// HBM bytes the kernels move (halo re-reads not counted): the library's model, docs/wtconv.md.
static void bytes_model(const WtconvProblem& p, double* fwd, double* bwd) {
  uint64_t f = 0, b = 0;
  if (!wtconv_io_bytes(p, &f, &b).ok()) f = b = 0;
  *fwd = double(f);
  *bwd = double(b);
}

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

static int run_bench(const char* csv, const std::string& dtypes) {
  FILE* f = std::fopen(csv, "r");
  if (!f) { std::printf("cannot open %s\n", csv); return 1; }
  struct Shape { std::string name; int64_t B, C, H, W, k, L, s; };
  std::vector<Shape> shapes;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    if (line[0] == '#' || std::strncmp(line, "name", 4) == 0) continue;
    char name[128]; long long B, C, H, W, k, L, st = 1;  // the stride column is optional
    if (std::sscanf(line, "%127[^,],%lld,%lld,%lld,%lld,%lld,%lld,%lld", name, &B, &C, &H, &W, &k, &L, &st) >= 7)
      shapes.push_back({name, B, C, H, W, k, L, st});
  }
  std::fclose(f);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  std::printf("BENCH shape,dtype,fwd_ms,train_ms,fwd_MB,train_MB,fwd_GBps,train_GBps\n");
  for (Precision prec : {Precision::kFP32, Precision::kFP16, Precision::kBF16})
    for (const Shape& s : shapes) {
      if (dtypes.find(pname(prec)) == std::string::npos) continue;
      Case cs{s.B, s.C, s.H, s.W, s.k, s.L, s.s, prec, true};
      Buffers* b = make_buffers(cs, 7, true);
      for (int i = 0; i < 3; ++i) { run_fwd(b, 0); run_bwd(b, 0); }
      CK(cudaDeviceSynchronize());
      std::vector<float> tf, tt;
      for (int i = 0; i < 20; ++i) {
        float ms;
        CK(cudaEventRecord(e0)); run_fwd(b, 0); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1)); tf.push_back(ms);
        CK(cudaEventRecord(e0)); run_fwd(b, 0); run_bwd(b, 0); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1)); tt.push_back(ms);
      }
      CK(cudaGetLastError());
      double fb, bb;
      bytes_model(b->pr, &fb, &bb);
      const float mf = median(tf), mt = median(tt);
      std::printf("BENCH %s,%s,%.3f,%.3f,%.1f,%.1f,%.0f,%.0f\n", s.name.c_str(), pname(prec), mf, mt, fb / 1e6,
                  (fb + bb) / 1e6, fb / mf / 1e6, (fb + bb) / mt / 1e6);
      std::fflush(stdout);
      free_buffers(b);
    }
  return 0;
}

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { std::printf("no CUDA device\n"); return 0; }
  const std::string mode = argc > 1 ? argv[1] : "check";
  if (mode == "check") return run_checks();
  return run_bench(argc > 2 ? argv[2] : "bench/wtconv_shapes.csv", argc > 3 ? argv[3] : "fp32,fp16,bf16");
}
