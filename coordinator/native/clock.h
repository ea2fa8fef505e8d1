// Clock: the native shell's source of "now", injected so tests can control time.
// Threading: implementations must be safe to call from any thread.
#pragma once

#include <cstdint>

namespace gleaner::native {

class Clock {
 public:
  virtual ~Clock() = default;
  // Unix time in milliseconds.
  virtual int64_t NowMs() const = 0;
};

// The wall clock (CLOCK_REALTIME).
class SystemClock : public Clock {
 public:
  int64_t NowMs() const override;
};

// Process-wide SystemClock instance.
const Clock& DefaultClock();

}  // namespace gleaner::native
