// The launchers' fail() (defined in the C API units) for the host checks that include a launcher header: prints
// the message on one line and returns 1, as the checks' output is read line by line.
#pragma once
#include <cstdio>

namespace fa3nn::hopper::host {
int fail(const char* fmt, const char* detail) {
  std::printf(fmt, detail);
  std::printf("\n");
  return 1;
}
}  // namespace fa3nn::hopper::host
