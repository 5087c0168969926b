#include "bench_common.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>

namespace winconv::bench {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

void usage() {
  std::printf(
      "usage: winconv-bench [options]\n"
      "  --layers-file PATH   layer table (default bench/layers.csv)\n"
      "  --layers a,b,...     layers to run (default: all)\n"
      "  --precision LIST     fp32,fp16,bf16 (default fp32)\n"
      "  --layout LIST        nchw,nhwc (default both)\n"
      "  --impl LIST          winconv,winconv_materialized,winconv_onchip,cudnn_best,\n"
      "                       cudnn_implicit,im2col_cublas,direct (default: all)\n"
      "  --batch N            batch size (default 128 on the GPU, 1 on the CPU path)\n"
      "  --reps N             timed launches per configuration, median reported (default 30, min 20)\n"
      "  --out DIR            output folder (default bench/results/local)\n"
      "  --check-pixels N     output pixels checked against the FP64 reference (default 64)\n"
      "  --commit SHA         recorded in the summary\n"
      "  --cpu                run the CPU im2win path even when a GPU is present\n");
}

bool make_dirs(const std::string& path) {
  std::string cur;
  for (const std::string& part : split(path, '/')) {
    cur += (cur.empty() && path[0] != '/') ? part : "/" + part;
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

double geomean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / double(v.size()));
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

bool parse_options(int argc, char** argv, Options* opt, int* exit_code) {
  *exit_code = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "winconv-bench: %s needs a value\n", a.c_str());
        return false;
      }
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      usage();
      return false;
    } else if (a == "--cpu") {
      opt->cpu = true;
      continue;
    }
    if (!value(&v)) {
      *exit_code = 2;
      return false;
    }
    try {
      if (a == "--layers-file") opt->layers_file = v;
      else if (a == "--layers") opt->layers = split(v, ',');
      else if (a == "--impl") opt->impls = split(v, ',');
      else if (a == "--out") opt->out_dir = v;
      else if (a == "--commit") opt->commit = v;
      else if (a == "--batch") opt->batch = std::stoll(v);
      else if (a == "--reps") {
        opt->reps = std::stoi(v);
        opt->reps_given = true;
      }
      else if (a == "--check-pixels") opt->check_pixels = std::stoi(v);
      else if (a == "--precision") {
        opt->precisions.clear();
        for (const auto& p : split(v, ',')) {
          if (p == "fp32") opt->precisions.push_back(Precision::kFP32);
          else if (p == "fp16") opt->precisions.push_back(Precision::kFP16);
          else if (p == "bf16") opt->precisions.push_back(Precision::kBF16);
          else throw std::invalid_argument("precision " + p);
        }
      } else if (a == "--layout") {
        opt->layouts.clear();
        for (const auto& l : split(v, ',')) {
          if (l == "nchw") opt->layouts.push_back(Layout::kNCHW);
          else if (l == "nhwc") opt->layouts.push_back(Layout::kNHWC);
          else throw std::invalid_argument("layout " + l);
        }
      } else {
        std::fprintf(stderr, "winconv-bench: unknown option %s\n", a.c_str());
        usage();
        *exit_code = 2;
        return false;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "winconv-bench: bad value for %s: %s\n", a.c_str(), v.c_str());
      *exit_code = 2;
      return false;
    }
  }
  if (opt->reps < 20) {
    std::fprintf(stderr, "winconv-bench: --reps must be >= 20 (the median of at least 20 launches)\n");
    *exit_code = 2;
    return false;
  }
  if (opt->check_pixels < 1) {
    std::fprintf(stderr, "winconv-bench: --check-pixels must be >= 1\n");
    *exit_code = 2;
    return false;
  }
  if (opt->batch == 0 || opt->batch < -1) {
    std::fprintf(stderr, "winconv-bench: --batch must be >= 1\n");
    *exit_code = 2;
    return false;
  }
  return true;
}

std::vector<Layer> load_layers(const Options& opt, std::string* error) {
  std::ifstream in(opt.layers_file);
  std::vector<Layer> layers;
  if (!in) {
    *error = "cannot open layer table " + opt.layers_file;
    return layers;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("name,", 0) == 0) continue;
    auto f = split(line, ',');
    if (f.size() != 9) {
      *error = "bad line in " + opt.layers_file + ": " + line;
      return {};
    }
    Layer l{f[0], std::stoll(f[1]), std::stoll(f[2]), std::stoll(f[3]), std::stoll(f[4]),
            std::stoll(f[5]), std::stoll(f[6]), std::stoll(f[7]), std::stoll(f[8])};
    if (opt.layers.empty() || std::find(opt.layers.begin(), opt.layers.end(), l.name) != opt.layers.end())
      layers.push_back(l);
  }
  for (const auto& want : opt.layers) {
    if (std::none_of(layers.begin(), layers.end(), [&](const Layer& l) { return l.name == want; })) {
      *error = "layer " + want + " is not in " + opt.layers_file;
      return {};
    }
  }
  return layers;
}

bool load_layers_or_report(const std::string& path, std::vector<Layer>* layers) {
  Options opt;
  opt.layers_file = path;
  std::string error;
  *layers = load_layers(opt, &error);
  if (error.empty()) return true;
  std::fprintf(stderr, "%s\n", error.c_str());
  return false;
}

Conv2dConfig make_config(const Layer& layer, int64_t batch, Precision precision, Layout layout) {
  Conv2dConfig cfg;
  cfg.problem.n = batch;
  cfg.problem.c = layer.c;
  cfg.problem.h = layer.h;
  cfg.problem.w = layer.w;
  cfg.problem.k = layer.k;
  cfg.problem.r = layer.r;
  cfg.problem.s = layer.s;
  cfg.problem.stride_h = cfg.problem.stride_w = layer.stride;
  cfg.problem.pad_h = cfg.problem.pad_w = layer.pad;
  cfg.precision = precision;
  cfg.layout = layout;
  return cfg;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double relative_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (den == 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

std::string tflops_text(double tflops) { return tflops >= 1.0 ? fmt("%.2f", tflops) : fmt("%.4g", tflops); }

bool write_results(const Options& opt, const RunHeader& header, const std::vector<ResultRow>& rows,
                   std::string* error) {
  if (!make_dirs(opt.out_dir)) {
    *error = "cannot create " + opt.out_dir;
    return false;
  }
  std::ofstream csv(opt.out_dir + "/conv2d.csv"), detail(opt.out_dir + "/conv2d_detail.csv"),
      md(opt.out_dir + "/conv2d_summary.md");
  if (!csv || !detail || !md) {
    *error = "cannot write into " + opt.out_dir;
    return false;
  }
  csv << "layer,precision,layout,impl,ms,tflops,extra_bytes,rel_err\n";
  detail << "layer,precision,layout,impl,ms,tflops,extra_bytes,peak_bytes,rel_err,detail,skipped\n";
  for (const auto& r : rows) {
    detail << r.layer << ',' << r.precision << ',' << r.layout << ',' << r.impl << ',' << fmt("%.4f", r.ms) << ','
           << tflops_text(r.tflops) << ',' << r.extra_bytes << ',' << r.peak_bytes << ',' << fmt("%.3e", r.rel_err)
           << ",\"" << r.detail << "\",\"" << r.skipped << "\"\n";
    if (!r.skipped.empty()) continue;
    csv << r.layer << ',' << r.precision << ',' << r.layout << ',' << r.impl << ',' << fmt("%.4f", r.ms) << ','
        << tflops_text(r.tflops) << ',' << r.extra_bytes << ',' << fmt("%.3e", r.rel_err) << '\n';
  }

  // Summary: one table per (precision, layout) with TFLOPS per implementation and the ratios
  // the acceptance criteria speak of, each against baselines of this same run (only those that
  // ran: the CPU path has none, and a build may lack cuDNN or cuBLAS).
  md << "# conv2d results\n\n" << header.device << "  \ncommit " << opt.commit << ", batch "
     << (opt.batch > 0 ? std::to_string(opt.batch) : std::string("default")) << ", " << header.timing
     << ", TFLOPS = 2*N*K*P*Q*C*R*S / time.\n"
     << "rel_err: relative L2 error against an FP64 reference on " << opt.check_pixels
     << " random output pixels (all channels); every output element is also checked finite.\n\n";
  std::set<std::pair<std::string, std::string>> groups;
  std::vector<std::string> impl_order;
  for (const auto& r : rows) {
    groups.insert({r.precision, r.layout});
    if (std::find(impl_order.begin(), impl_order.end(), r.impl) == impl_order.end()) impl_order.push_back(r.impl);
  }
  for (const auto& [prec, layout] : groups) {
    std::map<std::string, std::vector<double>> ratios;
    std::vector<std::string> layer_order;
    std::map<std::pair<std::string, std::string>, const ResultRow*> cell;
    for (const auto& r : rows) {
      if (r.precision != prec || r.layout != layout) continue;
      if (std::find(layer_order.begin(), layer_order.end(), r.layer) == layer_order.end()) layer_order.push_back(r.layer);
      cell[{r.layer, r.impl}] = &r;
    }
    // The baselines with at least one row that ran in this group: a ratio column each.
    std::vector<const char*> bases;
    for (const char* base : {"cudnn_best", "cudnn_implicit", "im2col_cublas"})
      if (std::any_of(cell.begin(), cell.end(),
                      [&](const auto& c) { return c.first.second == base && c.second->skipped.empty(); }))
        bases.push_back(base);
    const bool have_im2col = std::find(bases.begin(), bases.end(), std::string("im2col_cublas")) != bases.end();
    md << "## " << prec << " " << layout << "\n\n| layer |";
    for (const auto& i : impl_order) md << ' ' << i << " |";
    for (const char* base : bases) md << " winconv/" << base << " |";
    if (have_im2col) md << " extra bytes winconv/im2col |";
    md << "\n|---|";
    for (size_t i = 0; i < impl_order.size() + bases.size() + (have_im2col ? 1 : 0); ++i) md << "---|";
    md << '\n';
    // A layer whose name extends another listed layer's (conv4c32 of conv4) is a variant of it:
    // shown, but not counted in the geometric means over the benchmark's twelve layers.
    auto is_variant = [&](const std::string& layer) {
      return std::any_of(layer_order.begin(), layer_order.end(), [&](const std::string& o) {
        // conv10 is not a variant of conv1: the extension must not continue the number.
        return o != layer && layer.size() > o.size() && layer.compare(0, o.size(), o) == 0 &&
               !std::isdigit(static_cast<unsigned char>(layer[o.size()]));
      });
    };
    for (const auto& layer : layer_order) {
      md << "| " << layer << (is_variant(layer) ? " (variant)" : "") << " |";
      for (const auto& i : impl_order) {
        auto it = cell.find({layer, i});
        if (it == cell.end() || !it->second->skipped.empty()) md << " - |";
        else md << ' ' << tflops_text(it->second->tflops) << " |";
      }
      auto ok = [&](const std::string& impl) -> const ResultRow* {
        auto it = cell.find({layer, impl});
        return (it != cell.end() && it->second->skipped.empty()) ? it->second : nullptr;
      };
      const ResultRow* ours = ok("winconv");
      for (const char* base : bases) {
        const ResultRow* b = ok(base);
        if (ours && b) {
          const double ratio = ours->tflops / b->tflops;
          if (!is_variant(layer)) ratios[base].push_back(ratio);
          md << ' ' << fmt("%.2fx", ratio) << " |";
        } else {
          md << " - |";
        }
      }
      const ResultRow* col = ok("im2col_cublas");
      if (have_im2col) {
        if (ours && col && col->extra_bytes > 0)
          md << ' ' << fmt("%.3f", double(ours->extra_bytes) / double(col->extra_bytes)) << " |";
        else
          md << " - |";
      }
      md << '\n';
    }
    if (bases.empty()) {
      md << "\nNo baseline ran in this group, so there are no ratios (the CPU path runs winconv alone).\n\n";
      continue;
    }
    md << "\nGeometric means of winconv's ratio (variants excluded):";
    for (const char* base : bases)
      md << ' ' << base << ' ' << fmt("%.3f", geomean(ratios[base])) << " (" << ratios[base].size() << " layers);";
    md << "\n\n";
  }
  bool any_skipped = false;
  for (const auto& r : rows) any_skipped |= !r.skipped.empty();
  if (any_skipped) {
    md << "## Not run\n\n";
    for (const auto& r : rows)
      if (!r.skipped.empty())
        md << "- " << r.layer << ' ' << r.precision << ' ' << r.layout << ' ' << r.impl << ": " << r.skipped << '\n';
  }
  return true;
}

}  // namespace winconv::bench
