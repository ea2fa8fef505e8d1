#include "coordinator/native/clock.h"

#include <time.h>

namespace gleaner::native {

int64_t SystemClock::NowMs() const {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

const Clock& DefaultClock() {
  static const SystemClock clock;
  return clock;
}

}  // namespace gleaner::native
