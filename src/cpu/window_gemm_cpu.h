// The GEMM of the CPU im2win path over one output row: every output (q, k) of row (n, p) is the
// sum over the row's window runs of (p, q) times filter k, computed in register blocks of output
// columns x filters with the filters as vectors, once per vector instruction set, the widest
// the CPU runs chosen at run time.
#pragma once

#include <cstdint>

#include "winconv/conv2d.h"

namespace winconv {

// The vector instruction sets the row GEMM is compiled for; kAuto is the widest this CPU runs.
enum class CpuVectorIsa { kAuto, kSse42, kAvx2, kAvx512 };
bool cpu_runs(CpuVectorIsa isa);
CpuVectorIsa widest_cpu_isa();
const char* cpu_isa_name(CpuVectorIsa isa);

// The packed filter holds K rounded up to whole blocks of this many filters (zeros past K), so
// that every register block of every instruction set reads whole vectors.
constexpr int64_t kCpuFilterBlock = 32;
int64_t packed_filter_k(const Conv2dProblem& pb);  // K rounded up to kCpuFilterBlock
int64_t packed_filter_elements(const Conv2dProblem& pb);
int64_t packed_block_elements(const Conv2dProblem& pb);  // one block: kCpuFilterBlock * C*R*S
// The filter as the row GEMM reads it: [block][group][run element][k in block], K padded to whole
// blocks of kCpuFilterBlock. NCHW: a group per input channel, run element s*R + r; NHWC: one group,
// run element (s*R + r)*C + c (the order of a window run, im2win_cpu.h). A block's filters are one
// contiguous stream: with K-wide rows instead, a block read 128 bytes every K*4 bytes, a stride
// that maps into a few cache sets, so a deep layer's block fell out of L2 between column blocks.
void pack_filter_cpu(const Conv2dConfig& config, const float* w, float* packed);
// Block `block` of it, the filters [block * kCpuFilterBlock, (block + 1) * kCpuFilterBlock), into
// dst (packed_block_elements; blocks can be packed in parallel, or one at a time into a buffer),
// with the instruction set given (kAuto: the widest; AVX-512 transposes whole tiles in registers).
void pack_filter_block_cpu(const Conv2dConfig& config, const float* w, float* dst, int64_t block,
                           CpuVectorIsa isa = CpuVectorIsa::kAuto);

// The operands of one output row, or of several consecutive output rows of one image taken as one
// row of their pixels (rows of few columns, so that a register block holds more of them).
struct WindowRow {
  const float* a;        // the run of output pixel 0, group 0, in the window tensor
  int64_t q_stride;      // elements between the runs of adjacent output columns
  int64_t row_q = 0;     // columns per output row when the pixels span rows (0: one row of q)
  int64_t row_stride = 0;  // elements between the runs of vertically adjacent output pixels
  int64_t g_stride;      // elements between the runs of adjacent groups (NCHW: input channels)
  int64_t groups, len;   // groups (C for NCHW, 1 for NHWC) and elements of one run
  const float* b;        // the packed block of filters [k0, k1)
  float* y;              // output (pixel q, filter k) at y + q * y_q + k * y_k
  int64_t y_q, y_k;
  int64_t q;             // output pixels in the row
  int64_t k0, k1;        // the filters [k0, k1) to compute: one block's, k0 a multiple of kCpuFilterBlock
};
// isa must be one that cpu_runs (not kAuto).
void window_row_gemm(CpuVectorIsa isa, const WindowRow& row);

}  // namespace winconv
