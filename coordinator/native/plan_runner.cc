#include "coordinator/native/plan_runner.h"

#include <chrono>

#include "coordinator/native/log.h"

namespace gleaner::native {

PlanRunner::PlanRunner(SqliteOptions db, int busy_retries)
    : db_(std::move(db)), busy_retries_(busy_retries) {}

Result<SqliteExecutor*> PlanRunner::ThisThreadExecutor() {
  std::thread::id id = std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = executors_.find(id);
    if (it != executors_.end()) return it->second.get();
  }
  // Open outside the lock: opening may wait on SQLite's busy timeout.
  auto opened = SqliteExecutor::Open(db_);
  if (!opened.ok()) return opened.status();
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = executors_[id];
  slot = std::move(opened).value();
  return slot.get();
}

core::BatchResult PlanRunner::Execute(const core::Batch& batch) {
  auto exec = ThisThreadExecutor();
  if (!exec.ok()) {
    core::BatchResult r;
    r.status = Status::Unavailable(exec.status().message());
    return r;
  }
  core::BatchResult r = (*exec)->Execute(batch);
  int backoff_ms = 5;
  for (int attempt = 0; attempt < busy_retries_ && r.status.code() == Code::kUnavailable;
       ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms *= 3;
    r = (*exec)->Execute(batch);
  }
  if (!r.status.ok() && r.status.code() != Code::kConflict) {
    LogWarn("batch failed", {{"error", r.status.ToString()}});
  }
  return r;
}

core::Plan PlanRunner::Run(core::Plan plan) {
  while (!plan.done()) plan = plan.Continue(Execute(plan.batch()));
  return plan;
}

}  // namespace gleaner::native
