// The backward's auto schedule (kernels/hopper/flash_bwd_launch.cuh use_persistent_bwd: one CTA per SM chaining
// tiles, or one CTA per tile), checked on the CPU at written-out shapes, so a change of the rule is a change of this
// table too. Built for the host with nvcc by tests/test_fast_div.py; prints one line per failure and "; N failures".
#include <cstdio>

#include "flash_bwd_launch.cuh"
#include "host_fail.h"

struct Case {
  int headdim;
  bool causal;
  int group, seqlen_q;
  bool skips_empty_tiles, panel_split, persistent;
};

// clang-format off
constexpr Case kCases[] = {
    // d64 (and the rule's default): non-causal up to 1024 query rows per tile, causal up to 4096; GQA counts the group.
    {64, false, 1, 512, false, false, true},    {64, false, 1, 1024, false, false, true},
    {64, false, 1, 2048, false, false, false},  {64, true, 1, 4096, false, false, true},
    {64, true, 1, 8192, false, false, false},   {64, true, 2, 2048, false, false, true},
    {64, true, 4, 2048, false, false, false},
    // d128: causal tiles of 2048-8192 rows only.
    {128, true, 1, 1024, false, false, false},  {128, true, 1, 2048, false, false, true},
    {128, true, 1, 8192, false, false, true},   {128, true, 1, 16384, false, false, false},
    {128, false, 1, 512, false, false, false},  {128, true, 4, 2048, false, false, true},
    // d256: never (s44b).
    {256, false, 1, 512, false, false, false},  {256, true, 1, 512, false, false, false},
    {256, true, 1, 4096, false, false, false},
    // varlen / windows (tiles that may be empty) and MLA's panel split: never.
    {64, false, 1, 512, true, false, false},    {128, true, 1, 2048, true, false, false},
    {192, true, 1, 2048, false, true, false},
};
// clang-format on

int main() {
  int failures = 0;
  for (const Case& c : kCases) {
    const bool got = fa3nn::hopper::host::use_persistent_bwd(c.headdim, c.causal, c.group, c.seqlen_q,
                                                              c.skips_empty_tiles, c.panel_split);
    if (got != c.persistent) {
      ++failures;
      std::printf("FAIL headdim %d causal %d group %d seqlen_q %d skips_empty %d panel_split %d: persistent %d\n",
                  c.headdim, c.causal, c.group, c.seqlen_q, c.skips_empty_tiles, c.panel_split, got);
    }
  }
  std::printf("%zu backward schedules checked; %d failures\n", sizeof(kCases) / sizeof(kCases[0]), failures);
  return failures != 0;
}
