#include "coordinator/native/group_commit.h"

#include <algorithm>
#include <vector>

namespace gleaner::native {

Result<std::unique_ptr<GroupCommitter>> GroupCommitter::Start(const SqliteOptions& db,
                                                              size_t max_group) {
  auto opened = SqliteExecutor::Open(db);
  if (!opened.ok()) return opened.status();
  return std::unique_ptr<GroupCommitter>(
      new GroupCommitter(std::move(opened).value(), std::max<size_t>(1, max_group)));
}

GroupCommitter::GroupCommitter(std::unique_ptr<SqliteExecutor> db, size_t max_group)
    : db_(std::move(db)), max_group_(max_group) {
  thread_ = std::thread([this] { Loop(); });
}

GroupCommitter::~GroupCommitter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

core::BatchResult GroupCommitter::Execute(const core::Batch& batch) {
  Pending p;
  p.batch = &batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      p.result.status = Status::Unavailable("shutting down");
      return std::move(p.result);
    }
    queue_.push_back(&p);
    if (queue_.size() == 1) work_cv_.notify_one();
  }
  std::unique_lock<std::mutex> wait(p.mu);
  p.cv.wait(wait, [&] { return p.done; });
  return std::move(p.result);
}

GroupCommitter::Stats GroupCommitter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

size_t GroupCommitter::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void GroupCommitter::Loop() {
  std::vector<Pending*> group;
  std::vector<const core::Batch*> batches;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    group.clear();
    batches.clear();
    while (!queue_.empty() && group.size() < max_group_) {
      group.push_back(queue_.front());
      batches.push_back(queue_.front()->batch);
      queue_.pop_front();
    }
    stats_.in_flight = group.size();
    lock.unlock();
    std::vector<core::BatchResult> results = db_->ExecuteGroup(batches);
    lock.lock();
    stats_.in_flight = 0;
    stats_.groups += 1;
    stats_.batches += int64_t(group.size());
    stats_.largest = std::max(stats_.largest, group.size());
    lock.unlock();  // stats first: a caller that returns sees its group counted
    for (size_t i = 0; i < group.size(); ++i) {
      Pending* p = group[i];
      std::lock_guard<std::mutex> done(p->mu);
      p->result = std::move(results[i]);
      p->done = true;
      p->cv.notify_one();  // under p->mu: p lives on the caller's stack until it sees done
    }
    lock.lock();
  }
}

}  // namespace gleaner::native
