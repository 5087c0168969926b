// The fuzz tests' case count and first seed: a few cases in every run of the suite, and a longer
// campaign on demand, e.g. WINCONV_FUZZ_CASES=500 WINCONV_FUZZ_SEED=7 winconv_tests_gpu
// --gtest_filter='*Fuzz*' (winconv_tests_cpu likewise). A value that is not a positive integer
// keeps the default.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace winconv::testing {

inline int64_t fuzz_env(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (*end == '\0' && n > 0) ? int64_t(n) : fallback;
}
inline int64_t fuzz_cases(int64_t fallback) { return fuzz_env("WINCONV_FUZZ_CASES", fallback); }
inline uint64_t fuzz_seed(uint64_t fallback) { return uint64_t(fuzz_env("WINCONV_FUZZ_SEED", int64_t(fallback))); }

}  // namespace winconv::testing
