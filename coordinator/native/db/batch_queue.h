// What GroupCommitter and ReadPool share: a batch handed to their threads with the callback that
// gets its result, taking a group off the queue, and the answer to batches a stopped pool will
// never run. Threading: plain values and functions; callers hold their own locks.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "coordinator/core/sql.h"
#include "shared/status.h"

namespace gleaner::native {

using BatchDone = std::function<void(core::BatchResult)>;
// Batches handed over together, in order; each must stay alive until its callback runs.
using BatchItems = std::vector<std::pair<const core::Batch*, BatchDone>>;

struct QueuedBatch {
  const core::Batch* batch = nullptr;
  BatchDone done;
};

// Moves up to max batches from the front of *queue into *group, their batches into *batches.
inline void TakeGroup(std::deque<QueuedBatch>* queue, size_t max, std::vector<QueuedBatch>* group,
                      std::vector<const core::Batch*>* batches) {
  while (!queue->empty() && group->size() < max) {
    group->push_back(std::move(queue->front()));
    batches->push_back(group->back().batch);
    queue->pop_front();
  }
}

// Answers every batch with kUnavailable: the pool stopped and will not run them.
template <typename Items>
void AnswerShuttingDown(Items& items) {
  for (auto& [batch, done] : items) {
    core::BatchResult r;
    r.status = Status::Unavailable("shutting down");
    done(std::move(r));
  }
}

}  // namespace gleaner::native
