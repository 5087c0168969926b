// Shared pieces of winconv-bench: options, the layer table, result rows and the files written
// from them (conv2d.csv in DESIGN.md's format, a detail CSV and a markdown summary).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "winconv/conv2d.h"

namespace winconv::bench {

struct Layer {
  std::string name;
  int64_t c, h, w, k, r, s, stride, pad;
};

struct Options {
  std::string layers_file = "bench/layers.csv";
  std::vector<std::string> layers;  // empty: all
  std::vector<Precision> precisions{Precision::kFP32};
  std::vector<Layout> layouts{Layout::kNCHW, Layout::kNHWC};
  std::vector<std::string> impls;  // empty: all
  int64_t batch = -1;              // -1: 128 on the GPU, 1 on the CPU path
  std::string out_dir = "bench/results/local";
  int reps = 30;
  bool reps_given = false;  // --reps was passed (the CPU path otherwise takes 3)
  int warmup = 5;
  int check_pixels = 64;  // output pixels (all channels) compared with the FP64 reference per row
  std::string commit = "unknown";
  bool cpu = false;  // force the CPU path
};

// Parses argv; on --help or a bad option prints usage and returns false with *exit_code set.
bool parse_options(int argc, char** argv, Options* opt, int* exit_code);

// Reads the layer table (name,C,H,W,K,R,S,stride,pad; '#' comments) and keeps opt.layers.
std::vector<Layer> load_layers(const Options& opt, std::string* error);
// Every layer of a table file, for the dev tools: false, with the reason on stderr, when it cannot be read.
bool load_layers_or_report(const std::string& path, std::vector<Layer>* layers);

Conv2dConfig make_config(const Layer& layer, int64_t batch, Precision precision, Layout layout);

struct ResultRow {
  std::string layer, precision, layout, impl;
  double ms = 0, tflops = 0;
  size_t extra_bytes = 0, peak_bytes = 0;
  double rel_err = 0;
  std::string detail;   // algorithm / tile chosen
  std::string skipped;  // non-empty: why this implementation did not run (no row in conv2d.csv)
};

// What the summary says of the run, set by the path that ran it: the device, and how its times
// were taken (the GPU path and the CPU path time differently).
struct RunHeader {
  std::string device;
  std::string timing;
};

// Writes conv2d.csv, conv2d_detail.csv and conv2d_summary.md into opt.out_dir.
bool write_results(const Options& opt, const RunHeader& header, const std::vector<ResultRow>& rows,
                   std::string* error);

// A rate as the result files print it: two decimals, or four significant digits below 1 TFLOPS
// (the CPU path's rates would otherwise all read 0.01 or 0.02).
std::string tflops_text(double tflops);

// Median of a sample (copied; the input is left in order).
double median(std::vector<double> v);

// Relative L2 error of got against ref; infinity when got holds NaN/Inf or ref is all zero.
double relative_l2(const std::vector<double>& got, const std::vector<double>& ref);

}  // namespace winconv::bench
