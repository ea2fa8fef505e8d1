// MaintenanceLoop: runs the core's MaintenancePlan every period on its own thread and logs the
// summary. Several processes on one database may each run it: the core's SQL is conditional, so
// concurrent ticks do each change at most once.
// Threading: Start/Stop from one controlling thread; TickOnce from any thread.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "coordinator/core/coordinator.h"
#include "coordinator/native/clock.h"
#include "coordinator/native/plan_runner.h"

namespace gleaner::native {

class MaintenanceLoop {
 public:
  MaintenanceLoop(const core::Coordinator* coordinator, PlanRunner* runner, const Clock* clock,
                  double period_s);
  ~MaintenanceLoop();  // Stop()s

  void Start();
  // Wakes the thread and joins it; a tick in progress finishes first. Idempotent.
  void Stop();
  // Runs one tick now on the calling thread; returns the core's response.
  core::HttpResponse TickOnce();

 private:
  void Loop();

  const core::Coordinator* coordinator_;
  PlanRunner* runner_;
  const Clock* clock_;
  double period_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gleaner::native
