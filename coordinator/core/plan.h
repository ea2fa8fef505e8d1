// Plan: what the core asks a shell to do next for one request (or one maintenance tick).
//
// A Plan is either finished (a response) or a Batch plus a continuation that turns the batch's
// result into the next Plan. Shells loop:
//     Plan p = coordinator.Handle(request);
//     while (!p.done()) p = p.Continue(executor.Execute(p.batch()));
//     send(p.response()); then delete p.blob_deletes() best-effort.
// Drive() does exactly that for synchronous executors.
// Ownership: a Plan owns its continuation; it is move-only and single-use.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/core/http.h"
#include "coordinator/core/sql.h"

namespace gleaner::core {

// What a maintenance tick asks of the shell's pool provider (typed, so no shell parses the
// tick's JSON summary): instances of quarantined nodes to reallocate, then the autoscaler's
// target. Empty for every other plan.
struct PoolActions {
  struct Reallocation {
    std::string node_id;
    std::string machine_id;
  };
  std::vector<Reallocation> reallocate;
  int64_t target = -1;  // nodes wanted; -1 = no decision (the tick failed or none ran)
  bool empty() const { return reallocate.empty() && target < 0; }
};

class Plan {
 public:
  using Continuation = std::function<Plan(BatchResult)>;

  static Plan Respond(HttpResponse response);
  static Plan Fail(const Status& st) { return Respond(HttpResponse::Error(st)); }
  static Plan Run(Batch batch, Continuation then);

  Plan(Plan&&) = default;
  Plan& operator=(Plan&&) = default;

  bool done() const { return !then_; }
  const Batch& batch() const { return batch_; }
  // Feeds the result of batch() to the continuation. Requires !done().
  Plan Continue(BatchResult result);

  HttpResponse& response() { return response_; }
  // Blob keys the shell should delete after responding (superseded checkpoints).
  std::vector<std::string>& blob_deletes() { return blob_deletes_; }
  Plan&& WithBlobDeletes(std::vector<std::string> keys) && {
    blob_deletes_ = std::move(keys);
    return std::move(*this);
  }
  // The pool provider's actions (a finished maintenance plan only).
  const PoolActions& pool_actions() const { return pool_actions_; }
  Plan&& WithPoolActions(PoolActions actions) && {
    pool_actions_ = std::move(actions);
    return std::move(*this);
  }

 private:
  Plan() = default;
  Batch batch_;
  Continuation then_;
  HttpResponse response_;
  std::vector<std::string> blob_deletes_;
  PoolActions pool_actions_;
};

// Runs a plan to completion on a synchronous executor.
// Returns the final plan (response + blob deletes).
Plan Drive(Plan plan, SqlExecutor& executor);

}  // namespace gleaner::core
