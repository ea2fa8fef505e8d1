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

 private:
  Plan() = default;
  Batch batch_;
  Continuation then_;
  HttpResponse response_;
  std::vector<std::string> blob_deletes_;
};

// Runs a plan to completion on a synchronous executor.
// Returns the final plan (response + blob deletes).
Plan Drive(Plan plan, SqlExecutor& executor);

}  // namespace gleaner::core
