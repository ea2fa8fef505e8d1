// Retrying calls to the coordinator and storage: transient failures (kUnavailable, kIo) are
// retried with exponential backoff and jitter until `give_up()` says stop; every other status
// (success, conflict, bad request...) is returned at once.
#pragma once

#include <functional>
#include <string>

#include "agent/supervisor/backoff.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/stop.h"
#include "shared/status.h"

namespace gleaner::agent {

inline bool IsTransient(const Status& s) {
  return s.code() == Code::kUnavailable || s.code() == Code::kIo;
}

// `wake` interrupts the waits between attempts (a stop request); give_up is checked before each
// retry. Returns the last status.
inline Status Retry(const std::string& what, const std::function<Status()>& fn,
                    const std::function<bool()>& give_up, const StopToken* wake,
                    double cap_s = 5.0) {
  Backoff backoff(0.1, cap_s);
  for (;;) {
    Status s = fn();
    if (s.ok() || !IsTransient(s)) return s;
    if (give_up()) return s;
    double d = backoff.Next();
    if (backoff.attempts() == 1 || backoff.attempts() % 10 == 0) {
      Log("%s: %s (retrying)", what.c_str(), s.ToString().c_str());
    }
    if (wake != nullptr) {
      wake->WaitFor(d);
    } else {
      StopToken never;
      never.WaitFor(d);
    }
    if (give_up()) return s;
  }
}

}  // namespace gleaner::agent
