// GLEANER_SKIP(message): this test case cannot run here (a fixture or tool is missing).
//
// Contract: outside CI the case prints "SKIP: <message>" and ends its process with exit code 77,
// which CTest reports as "Skipped" (every test case is its own CTest test, registered with
// SKIP_RETURN_CODE 77), never as a pass. In CI (environment CI set and not "0"/"false") every
// input must be present, so the case FAILs instead. Catch2 v2 (Debian 12) has no SKIP of its own.
// Use it only at the top of a TEST_CASE, before anything needs cleaning up. Test programs without
// Catch2 return SkipOrFail(message) from main; scripts use tests/skip.mjs or the same rule.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

namespace gleaner::testing {

inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0' && std::strcmp(ci, "0") != 0 && std::strcmp(ci, "false") != 0;
}

constexpr int kSkipExitCode = 77;

// For test programs without Catch2: prints the message and returns the exit code to end with:
// 77 (skipped) outside CI, 1 (failed) in CI.
inline int SkipOrFail(const std::string& message) {
  if (InCi()) {
    std::fprintf(stderr, "FAIL: missing in CI (every input must be present): %s\n",
                 message.c_str());
    return 1;
  }
  std::fprintf(stdout, "SKIP: %s\n", message.c_str());
  std::fflush(stdout);
  return kSkipExitCode;
}

}  // namespace gleaner::testing

#define GLEANER_SKIP(message)                                           \
  do {                                                                  \
    if (::gleaner::testing::InCi()) {                                   \
      FAIL("missing in CI (every input must be present): " << message); \
    }                                                                   \
    std::ostringstream gleaner_skip_os_;                                \
    gleaner_skip_os_ << message;                                        \
    std::fprintf(stdout, "SKIP: %s\n", gleaner_skip_os_.str().c_str()); \
    std::fflush(stdout);                                                \
    std::_Exit(::gleaner::testing::kSkipExitCode);                      \
  } while (0)
