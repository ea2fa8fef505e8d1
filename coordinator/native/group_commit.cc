#include "coordinator/native/group_commit.h"

#include <algorithm>
#include <vector>

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
    : db_(std::move(db)), max_group_(max_group) {}

GroupCommitter::~GroupCommitter() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
}

core::BatchResult GroupCommitter::Execute(const core::Batch& batch) {
  Pending p;
  p.batch = &batch;
  bool lead = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      p.result.status = Status::Unavailable("shutting down");
      return std::move(p.result);
    }
    queue_.push_back(&p);
    if (!leading_) lead = leading_ = true;
  }
  if (!lead) {
    Pending* next = nullptr;
    {
      std::unique_lock<std::mutex> wait(p.mu);
      p.cv.wait(wait, [&] { return p.done || p.lead; });
      next = p.wake_next;
    }
    if (p.done) {
      // `next` is still waiting (nobody else sets its done), so it is alive.
      if (next != nullptr) Wake(next);
      return std::move(p.result);
    }
  }
  Lead(&p);
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

void GroupCommitter::Wake(Pending* p) {
  std::lock_guard<std::mutex> done(p->mu);
  p->done = true;
  p->cv.notify_one();  // under p->mu: p lives on its caller's stack until it sees done
}

void GroupCommitter::Lead(Pending* self) {
  std::vector<Pending*> group;
  std::vector<const core::Batch*> batches;
  for (;;) {
    group.clear();
    batches.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!queue_.empty() && group.size() < max_group_) {
        group.push_back(queue_.front());
        batches.push_back(queue_.front()->batch);
        queue_.pop_front();
      }
      stats_.in_flight = group.size();
    }
    std::vector<core::BatchResult> results = db_->ExecuteGroup(batches);
    Pending* next = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.in_flight = 0;
      stats_.groups += 1;
      stats_.batches += int64_t(group.size());
      stats_.largest = std::max(stats_.largest, group.size());
      if (queue_.empty()) {
        leading_ = false;
      } else {
        next = queue_.front();
      }
    }
    // The next group starts before this one's callers are woken. If the oldest queued caller is
    // this thread's own (its batch did not fit into this group), keep leading.
    if (next != nullptr && next != self) {
      std::lock_guard<std::mutex> handover(next->mu);
      next->lead = true;
      next->cv.notify_one();
    }
    // Results go in while every other caller still waits (they read them only after done,
    // set under their lock); then the first is woken and the wake-ups chain from there.
    Pending* first = nullptr;
    Pending* last = nullptr;
    for (size_t i = 0; i < group.size(); ++i) {
      Pending* p = group[i];
      p->result = std::move(results[i]);
      if (p == self) continue;
      if (last != nullptr) {
        last->wake_next = p;
      } else {
        first = p;
      }
      last = p;
    }
    self->done = self->done || std::find(group.begin(), group.end(), self) != group.end();
    if (first != nullptr) Wake(first);
    if (next != self) return;
  }
}

}  // namespace gleaner::native
