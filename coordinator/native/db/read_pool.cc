#include "coordinator/native/db/read_pool.h"

#include <pthread.h>

#include <chrono>

namespace gleaner::native {

Result<std::unique_ptr<ReadPool>> ReadPool::Start(const SqliteOptions& db, int threads,
                                                  size_t max_group) {
  std::vector<std::unique_ptr<SqliteExecutor>> dbs;
  for (int i = 0; i < std::max(1, threads); ++i) {
    auto opened = SqliteExecutor::Open(db);
    if (!opened.ok()) return opened.status();
    dbs.push_back(std::move(opened).value());
  }
  return std::unique_ptr<ReadPool>(new ReadPool(std::move(dbs), std::max<size_t>(1, max_group)));
}

ReadPool::ReadPool(std::vector<std::unique_ptr<SqliteExecutor>> dbs, size_t max_group)
    : max_group_(max_group), dbs_(std::move(dbs)) {
  for (auto& db : dbs_) {
    SqliteExecutor* d = db.get();
    threads_.emplace_back([this, d] { Work(d); });
  }
}

ReadPool::~ReadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  AnswerShuttingDown(queue_);
}

void ReadPool::SubmitAll(BatchItems items) {
  if (items.empty()) return;
  bool wake;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) {
      lock.unlock();
      AnswerShuttingDown(items);
      return;
    }
    wake = idle_ > 0 && queue_.empty();
    for (auto& [batch, done] : items) queue_.push_back({batch, std::move(done)});
  }
  // A thread that is running a group looks at the queue again before it sleeps.
  if (wake) cv_.notify_one();
}

void ReadPool::Work(SqliteExecutor* db) {
  pthread_setname_np(pthread_self(), "db-reader");
  std::vector<QueuedBatch> group;
  std::vector<const core::Batch*> batches;
  for (;;) {
    group.clear();
    batches.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      --idle_;
      if (stop_) return;
      TakeGroup(&queue_, max_group_, &group, &batches);
      // More left for another idle thread.
      if (!queue_.empty() && idle_ > 0) cv_.notify_one();
    }
    std::vector<core::BatchResult> results = db->ExecuteReadGroup(batches);
    for (size_t i = 0; i < group.size(); ++i) {
      int backoff_ms = 5;
      for (int attempt = 0; attempt < 4 && results[i].status.code() == Code::kUnavailable;
           ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
        backoff_ms *= 3;
        results[i] = db->Execute(*group[i].batch);
      }
      group[i].done(std::move(results[i]));
    }
  }
}

}  // namespace gleaner::native
