// The GPU path of winconv-bench. Per (layer, precision, layout): fresh random x and w, then for
// each implementation: prepare (workspace, algorithm search), poison y with NaN, run once and
// check (every element finite, sampled pixels against the FP64 reference), warm up, and time
// `reps` launches one by one with CUDA events, flushing L2 before each; report the median.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <thread>

#include "baselines/baseline.h"
#include "bench_paths.h"
#include "winconv_impl.h"

namespace winconv::bench {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

template <typename T>
__device__ double to_double(T v) { return double(v); }
template <>
__device__ double to_double<__half>(__half v) { return double(__half2float(v)); }
template <>
__device__ double to_double<__nv_bfloat16>(__nv_bfloat16 v) { return double(__bfloat162float(v)); }

template <typename T>
__global__ void count_nonfinite(const T* y, int64_t n, unsigned long long* bad) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    local += !isfinite(to_double(y[i]));
  if (local) atomicAdd(bad, local);
}

template <typename T>
__global__ void gather_samples(const T* y, const int64_t* idx, int count, double* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = to_double(y[idx[i]]);
}

// Device copy of a host float tensor in the benchmark's precision; `rounded` receives the
// values actually stored (so the reference sees the same inputs as the kernels).
struct DeviceTensor {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~DeviceTensor() { if (ptr) cudaFree(ptr); }
};

void upload(const std::vector<float>& host, Precision prec, DeviceTensor* dev, std::vector<float>* rounded) {
  rounded->resize(host.size());
  if (prec == Precision::kFP32) {
    *rounded = host;
    dev->bytes = host.size() * 4;
    check(cudaMalloc(&dev->ptr, dev->bytes), "cudaMalloc");
    check(cudaMemcpy(dev->ptr, host.data(), dev->bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    return;
  }
  dev->bytes = host.size() * 2;
  check(cudaMalloc(&dev->ptr, dev->bytes), "cudaMalloc");
  if (prec == Precision::kFP16) {
    std::vector<__half> h(host.size());
    for (size_t i = 0; i < host.size(); ++i) h[i] = __float2half(host[i]), (*rounded)[i] = __half2float(h[i]);
    check(cudaMemcpy(dev->ptr, h.data(), dev->bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  } else {
    std::vector<__nv_bfloat16> h(host.size());
    for (size_t i = 0; i < host.size(); ++i) h[i] = __float2bfloat16(host[i]), (*rounded)[i] = __bfloat162float(h[i]);
    check(cudaMemcpy(dev->ptr, h.data(), dev->bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
}

std::unique_ptr<Conv2dImpl> make_impl(const std::string& name, std::string* missing) {
  if (auto w = make_winconv(name)) return w;
  if (name == "cudnn_best") return make_cudnn_best(missing);
  if (name == "cudnn_implicit") return make_cudnn_implicit(missing);
  if (name == "im2col_cublas") return make_im2col_cublas(missing);
  if (name == "direct") return make_direct(missing);
  *missing = "unknown implementation " + name;
  return nullptr;
}

const char* kAllImpls[] = {"winconv", "winconv_onchip", "winconv_materialized", "cudnn_best",
                           "cudnn_implicit", "im2col_cublas", "direct"};

struct Checker {
  std::vector<int64_t> indices;  // sampled output elements
  std::vector<double> reference;
  int64_t y_elements = 0;
};

Checker build_checker(const Conv2dConfig& cfg, const std::vector<float>& x, const std::vector<float>& w,
                      int pixels, std::mt19937_64& rng) {
  const Conv2dProblem& pb = cfg.problem;
  Checker ck;
  ck.y_elements = pb.y_elements();
  struct Pixel { int64_t n, p, q; };
  std::vector<Pixel> pix(static_cast<size_t>(pixels));
  for (auto& px : pix)
    px = {int64_t(rng() % uint64_t(pb.n)), int64_t(rng() % uint64_t(pb.p())), int64_t(rng() % uint64_t(pb.q()))};
  std::vector<double> ref(size_t(pixels) * size_t(pb.k));
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = t; i < pix.size(); i += threads)
        conv2d_reference_pixel(cfg, x.data(), w.data(), pix[i].n, pix[i].p, pix[i].q, ref.data() + i * size_t(pb.k));
    });
  for (auto& th : pool) th.join();
  for (size_t i = 0; i < pix.size(); ++i)
    for (int64_t k = 0; k < pb.k; ++k) {
      const auto [n, p, q] = pix[i];
      ck.indices.push_back(cfg.layout == Layout::kNCHW ? ((n * pb.k + k) * pb.p() + p) * pb.q() + q
                                                       : ((n * pb.p() + p) * pb.q() + q) * pb.k + k);
      ck.reference.push_back(ref[i * size_t(pb.k) + size_t(k)]);
    }
  return ck;
}

// Runs the implementation once on poisoned y and returns the relative L2 error (inf on NaN).
double check_output(Conv2dImpl& impl, const Checker& ck, Precision prec, const void* x, const void* w, void* y,
                    size_t y_bytes, cudaStream_t stream) {
  check(cudaMemsetAsync(y, 0xFF, y_bytes, stream), "poison y");  // all-ones bits: NaN in every precision
  impl.run(x, w, y, stream);
  check(cudaStreamSynchronize(stream), "run");
  unsigned long long* bad = nullptr;
  int64_t* idx = nullptr;
  double* vals = nullptr;
  const int count = int(ck.indices.size());
  check(cudaMalloc(&bad, sizeof *bad), "cudaMalloc");
  check(cudaMalloc(&idx, sizeof(int64_t) * count), "cudaMalloc");
  check(cudaMalloc(&vals, sizeof(double) * count), "cudaMalloc");
  check(cudaMemset(bad, 0, sizeof *bad), "cudaMemset");
  check(cudaMemcpy(idx, ck.indices.data(), sizeof(int64_t) * count, cudaMemcpyHostToDevice), "cudaMemcpy");
  const int grid = 1024, block = 256;
  if (prec == Precision::kFP32) {
    count_nonfinite<<<grid, block, 0, stream>>>(static_cast<const float*>(y), ck.y_elements, bad);
    gather_samples<<<(count + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(y), idx, count, vals);
  } else if (prec == Precision::kFP16) {
    count_nonfinite<<<grid, block, 0, stream>>>(static_cast<const __half*>(y), ck.y_elements, bad);
    gather_samples<<<(count + 255) / 256, 256, 0, stream>>>(static_cast<const __half*>(y), idx, count, vals);
  } else {
    count_nonfinite<<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(y), ck.y_elements, bad);
    gather_samples<<<(count + 255) / 256, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(y), idx, count, vals);
  }
  check(cudaStreamSynchronize(stream), "check kernels");
  unsigned long long nonfinite = 0;
  std::vector<double> got(static_cast<size_t>(count));
  check(cudaMemcpy(&nonfinite, bad, sizeof nonfinite, cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(got.data(), vals, sizeof(double) * count, cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(bad);
  cudaFree(idx);
  cudaFree(vals);
  if (nonfinite) return std::numeric_limits<double>::infinity();
  return relative_l2(got, ck.reference);
}

}  // namespace

bool gpu_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

bool run_gpu_bench(const Options& opt, const std::vector<Layer>& layers, std::vector<ResultRow>* rows,
                   RunHeader* header, std::string* error) {
  try {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    header->device = std::string(prop.name) + ", " + std::to_string(prop.multiProcessorCount) + " SMs, L2 " +
                   std::to_string(prop.l2CacheSize >> 20) + " MiB, CUDA driver " + std::to_string(driver) +
                   ", runtime " + std::to_string(runtime);
    header->timing = "median of " + std::to_string(opt.reps) + " launches (CUDA events, L2 flushed before each)";
    std::printf("%s\n", header->device.c_str());
    const int64_t batch = opt.batch > 0 ? opt.batch : 128;
    cudaStream_t stream;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    // Flushing L2 (a write over twice its size) before every timed launch: each launch starts
    // cold, whatever the size of its working set.
    DeviceTensor flush;
    flush.bytes = size_t(prop.l2CacheSize) * 2;
    check(cudaMalloc(&flush.ptr, flush.bytes), "cudaMalloc flush");
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");
    std::mt19937_64 rng(20261129);
    std::vector<std::string> impls = opt.impls;
    if (impls.empty()) impls.assign(std::begin(kAllImpls), std::end(kAllImpls));

    for (const Layer& layer : layers) {
      for (Precision prec : opt.precisions) {
        for (Layout layout : opt.layouts) {
          const Conv2dConfig cfg = make_config(layer, batch, prec, layout);
          const Conv2dProblem& pb = cfg.problem;
          std::vector<float> hx(size_t(pb.x_elements())), hw(size_t(pb.w_elements())), rx, rw;
          fill_random(hx.data(), hx.size(), rng());
          fill_random(hw.data(), hw.size(), rng());
          DeviceTensor dx, dw, dy;
          upload(hx, prec, &dx, &rx);
          upload(hw, prec, &dw, &rw);
          hx.clear();
          hx.shrink_to_fit();
          dy.bytes = size_t(pb.y_elements()) * precision_bytes(prec);
          check(cudaMalloc(&dy.ptr, dy.bytes), "cudaMalloc y");
          Conv2dConfig ref_cfg = cfg;
          ref_cfg.precision = Precision::kFP32;  // the reference reads the rounded values as float
          const Checker ck = build_checker(ref_cfg, rx, rw, opt.check_pixels, rng);
          for (const std::string& name : impls) {
            ResultRow row{layer.name, precision_name(prec), layout_name(layout), name};
            std::string missing;
            std::unique_ptr<Conv2dImpl> impl = make_impl(name, &missing);
            if (!impl) {
              row.skipped = "not built: " + missing + " was not found at build time";
              rows->push_back(row);
              std::printf("%-9s %s %s %-21s skipped (%s)\n", layer.name.c_str(), row.precision.c_str(),
                          row.layout.c_str(), name.c_str(), row.skipped.c_str());
              continue;
            }
            try {
              std::string why;
              if (!impl->prepare(cfg, dx.ptr, dw.ptr, dy.ptr, &why)) throw std::runtime_error(why);
              row.rel_err = check_output(*impl, ck, prec, dx.ptr, dw.ptr, dy.ptr, dy.bytes, stream);
              for (int i = 0; i < opt.warmup; ++i) impl->run(dx.ptr, dw.ptr, dy.ptr, stream);
              std::vector<double> times;
              for (int i = 0; i < opt.reps; ++i) {
                check(cudaMemsetAsync(flush.ptr, i & 0xFF, flush.bytes, stream), "flush");
                check(cudaEventRecord(start, stream), "event");
                impl->run(dx.ptr, dw.ptr, dy.ptr, stream);
                check(cudaEventRecord(stop, stream), "event");
                check(cudaEventSynchronize(stop), "timed run");
                float ms = 0;
                check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
                times.push_back(ms);
              }
              row.ms = median(times);
              row.tflops = pb.flops() / (row.ms * 1e-3) / 1e12;
              row.extra_bytes = impl->extra_bytes();
              row.peak_bytes = dx.bytes + dw.bytes + dy.bytes + row.extra_bytes;
              row.detail = impl->detail();
            } catch (const std::exception& e) {
              row.skipped = e.what();
              cudaGetLastError();
            }
            rows->push_back(row);
            if (row.skipped.empty())
              std::printf("%-9s %s %s %-21s %9.4f ms %7.2f TFLOPS extra %12zu B rel_err %.2e %s\n",
                          layer.name.c_str(), row.precision.c_str(), row.layout.c_str(), name.c_str(), row.ms,
                          row.tflops, row.extra_bytes, row.rel_err, row.detail.c_str());
            else
              std::printf("%-9s %s %s %-21s skipped (%s)\n", layer.name.c_str(), row.precision.c_str(),
                          row.layout.c_str(), name.c_str(), row.skipped.c_str());
            std::fflush(stdout);
          }
        }
      }
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
  return true;
}

}  // namespace winconv::bench
