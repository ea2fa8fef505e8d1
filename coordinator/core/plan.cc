#include "coordinator/core/plan.h"

namespace gleaner::core {

Plan Plan::Respond(HttpResponse response) {
  Plan p;
  p.response_ = std::move(response);
  return p;
}

Plan Plan::Run(Batch batch, Continuation then) {
  Plan p;
  p.batch_ = std::move(batch);
  p.then_ = std::move(then);
  return p;
}

Plan Plan::Continue(BatchResult result) {
  Continuation then = std::move(then_);
  then_ = nullptr;
  Plan next = then(std::move(result));
  // Deletes requested by earlier steps survive into the final plan.
  if (!blob_deletes_.empty()) {
    next.blob_deletes_.insert(next.blob_deletes_.begin(), blob_deletes_.begin(),
                              blob_deletes_.end());
  }
  return next;
}

Plan Drive(Plan plan, SqlExecutor& executor) {
  while (!plan.done()) plan = plan.Continue(executor.Execute(plan.batch()));
  return plan;
}

}  // namespace gleaner::core
