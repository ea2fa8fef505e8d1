#include "coordinator/native/maintenance.h"

#include <chrono>

#include "coordinator/native/log.h"

namespace gleaner::native {

MaintenanceLoop::MaintenanceLoop(const core::Coordinator* coordinator, PlanRunner* runner,
                                 const Clock* clock, double period_s, PoolProvider* pool,
                                 BlobStore* blobs)
    : coordinator_(coordinator),
      runner_(runner),
      clock_(clock),
      period_s_(period_s),
      pool_(pool),
      blobs_(blobs) {}

MaintenanceLoop::~MaintenanceLoop() {
  Stop();
}

void MaintenanceLoop::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void MaintenanceLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

core::HttpResponse MaintenanceLoop::TickOnce() {
  auto start = std::chrono::steady_clock::now();
  core::PoolObservation observed;
  if (pool_ != nullptr) {
    observed.provider = pool_->name();
    auto current = pool_->Current();
    if (current.ok()) {
      observed.current = *current;
    } else {
      LogWarn("pool: reading the current size failed",
              {{"provider", observed.provider}, {"error", current.status().ToString()}});
    }
  }
  core::Plan plan = runner_->Run(coordinator_->MaintenancePlan(clock_->NowMs(), observed));
  if (blobs_ != nullptr) {
    for (const std::string& key : plan.blob_deletes()) {
      Status st = blobs_->Delete(key);
      if (!st.ok()) LogWarn("blob delete failed", {{"key", key}, {"error", st.ToString()}});
    }
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  core::HttpResponse& r = plan.response();
  Json fields = {{"status", r.status}, {"latency_ms", ms}};
  auto summary = ParseJson(r.body);
  if (summary.ok()) {
    fields["summary"] = *summary;
  } else {
    fields["body"] = r.body;
  }
  if (r.status >= 400) {
    LogWarn("maintenance failed", fields);
  } else {
    LogInfo("maintenance", fields);
    ApplyPoolActions(pool_, plan.pool_actions(), &reallocated_);
  }
  return std::move(plan.response());
}

void MaintenanceLoop::Loop() {
  auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(period_s_));
  auto next = std::chrono::steady_clock::now() + period;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (cv_.wait_until(lock, next, [this] { return stop_; })) break;
    lock.unlock();
    TickOnce();
    lock.lock();
    next = std::max(next + period, std::chrono::steady_clock::now());
  }
}

}  // namespace gleaner::native
