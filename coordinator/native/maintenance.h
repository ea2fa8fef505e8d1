// MaintenanceLoop: runs the core's MaintenancePlan every period on its own thread and logs the
// summary. With a pool provider, each tick first asks it for the current node count (recorded
// with the decision), then applies the decision through it (pool_provider.h). Objects the tick
// forgot (Plan::blob_deletes: unreferenced after the grace) are deleted from the blob store.
// Several processes on one database may each run it: the core's SQL is conditional, so concurrent
// ticks do each change at most once. Threading: Start/Stop from one controlling thread; TickOnce
// from any thread.
#pragma once

#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "coordinator/core/coordinator.h"
#include "coordinator/native/blob/blob_store.h"
#include "coordinator/native/clock.h"
#include "coordinator/native/db/plan_runner.h"
#include "coordinator/native/pool/pool_provider.h"

namespace gleaner::native {

class MaintenanceLoop {
 public:
  // pool and blobs may be nullptr (no provider; objects are not deleted); they must outlive
  // the loop.
  MaintenanceLoop(const core::Coordinator* coordinator, PlanRunner* runner, const Clock* clock,
                  double period_s, PoolProvider* pool = nullptr, BlobStore* blobs = nullptr);
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
  PoolProvider* pool_;
  BlobStore* blobs_;
  std::set<std::string> reallocated_;  // machines already recycled by this process
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gleaner::native
