#include "coordinator/native/db/group_commit.h"

#include <pthread.h>

#include <algorithm>
#include <vector>

#include "coordinator/native/metrics.h"

namespace gleaner::native {

Result<std::unique_ptr<GroupCommitter>> GroupCommitter::Start(const SqliteOptions& db,
                                                              size_t max_group) {
  // Every write goes through this one connection, so its page cache stays valid across commits
  // (readers' caches are dropped whenever the database changed): a large cache keeps the pages
  // that writes touch in memory instead of re-reading them from the file system.
  SqliteOptions options = db;
  if (options.cache_kib == 0) options.cache_kib = kCommitterCacheKib;
  auto opened = SqliteExecutor::Open(options);
  if (!opened.ok()) return opened.status();
  return std::unique_ptr<GroupCommitter>(
      new GroupCommitter(std::move(opened).value(), std::max<size_t>(1, max_group)));
}

GroupCommitter::GroupCommitter(std::unique_ptr<SqliteExecutor> db, size_t max_group)
    : db_(std::move(db)), max_group_(max_group) {
  writer_ = std::thread([this] { WriterLoop(); });
}

GroupCommitter::~GroupCommitter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

core::BatchResult GroupCommitter::Execute(const core::Batch& batch) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    core::BatchResult result;
  } w;
  Submit(&batch, [&w](core::BatchResult r) {
    std::lock_guard<std::mutex> lock(w.mu);
    w.result = std::move(r);
    w.done = true;
    w.cv.notify_one();  // under w.mu: w lives on the caller's stack until it sees done
  });
  std::unique_lock<std::mutex> lock(w.mu);
  w.cv.wait(lock, [&] { return w.done; });
  return std::move(w.result);
}

void GroupCommitter::Submit(const core::Batch* batch, Done done) {
  BatchItems one;
  one.emplace_back(batch, std::move(done));
  SubmitAll(std::move(one));
}

void GroupCommitter::SubmitAll(BatchItems items) {
  if (items.empty()) return;
  bool wake;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) {
      lock.unlock();
      AnswerShuttingDown(items);
      return;
    }
    wake = queue_.empty();
    for (auto& [batch, done] : items) queue_.push_back({batch, std::move(done)});
  }
  // A non-empty queue means the writer is awake or will look at the queue before sleeping.
  if (wake) cv_.notify_one();
}

GroupCommitter::Stats GroupCommitter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

size_t GroupCommitter::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void GroupCommitter::WriterLoop() {
  pthread_setname_np(pthread_self(), "db-writer");
  std::vector<QueuedBatch> group;
  std::vector<const core::Batch*> batches;
  for (;;) {
    group.clear();
    batches.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) break;
      TakeGroup(&queue_, max_group_, &group, &batches);
      stats_.in_flight = group.size();
    }
    std::vector<core::BatchResult> results = db_->ExecuteGroup(batches);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.in_flight = 0;
      stats_.groups += 1;
      stats_.batches += int64_t(group.size());
      stats_.largest = std::max(stats_.largest, group.size());
    }
    ProcessMetrics().AddCommitGroup(group.size());
    for (size_t i = 0; i < group.size(); ++i) group[i].done(std::move(results[i]));
  }
  // Shutting down: nothing queued runs any more.
  std::deque<QueuedBatch> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(queue_);
  }
  AnswerShuttingDown(left);
}

}  // namespace gleaner::native
