#include "coordinator/native/db/plan_runner.h"

#include <atomic>
#include <chrono>

#include "coordinator/native/log.h"

namespace gleaner::native {

namespace {
std::atomic<uint64_t> g_next_runner_id{1};
// This thread's executor of the runner it used last (no lock, no map lookup on the hot path).
thread_local uint64_t t_runner_id = 0;
thread_local SqliteExecutor* t_executor = nullptr;
}  // namespace

PlanRunner::PlanRunner(SqliteOptions db, int busy_retries)
    : id_(g_next_runner_id++), db_(std::move(db)), busy_retries_(busy_retries) {}

Result<SqliteExecutor*> PlanRunner::ThisThreadExecutor() {
  if (t_runner_id == id_) return t_executor;
  auto found = LookUpThisThreadExecutor();
  if (found.ok()) {
    t_runner_id = id_;
    t_executor = *found;
  }
  return found;
}

Result<SqliteExecutor*> PlanRunner::LookUpThisThreadExecutor() {
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

Result<GroupCommitter*> PlanRunner::Committer() {
  std::lock_guard<std::mutex> lock(committer_mu_);
  if (!committer_) {
    auto started = GroupCommitter::Start(db_, db_.group_commit ? 256 : 1);
    if (!started.ok()) return started.status();
    committer_ = std::move(started).value();
  }
  return committer_.get();
}

core::BatchResult PlanRunner::Execute(const core::Batch& batch) {
  auto exec = ThisThreadExecutor();
  if (!exec.ok()) {
    core::BatchResult r;
    r.status = Status::Unavailable(exec.status().message());
    return r;
  }
  GroupCommitter* committer = nullptr;
  if (db_.group_commit && db_.path != ":memory:" && batch.writes()) {
    auto c = Committer();
    if (!c.ok()) {
      core::BatchResult r;
      r.status = Status::Unavailable(c.status().message());
      return r;
    }
    committer = *c;
  }
  auto run = [&] { return committer ? committer->Execute(batch) : (*exec)->Execute(batch); };
  core::BatchResult r = run();
  int backoff_ms = 5;
  for (int attempt = 0; attempt < busy_retries_ && r.status.code() == Code::kUnavailable;
       ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms *= 3;
    r = run();
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
