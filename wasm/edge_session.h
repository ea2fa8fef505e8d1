// EdgeSession: the core behind a JSON-in / JSON-out interface, for shells that drive plans
// asynchronously (the Worker awaits D1 between steps, so plans must outlive a call).
//
// Every operation returns one JSON text, a "step":
//   {"done": false, "handle": N, "batch": [<statement>...]}   run it, then Continue(N, result)
//   {"done": true, "response": <response>, "blob_deletes": [key...]}
// (shapes in wasm/wire_json.h; batches in the ForD1 form). Bad input
// from the shell becomes a done step with a 500/400 error response, never a crash. A handle is
// valid until its plan finishes or is dropped.
//
// Threading: single-threaded (one wasm instance); plans of interleaved requests coexist.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "coordinator/core/coordinator.h"
#include "wasm/wire_json.h"

namespace gleaner::edge {

class EdgeSession {
 public:
  // Builds the Coordinator from a config JSON text (wire_json.h). Returns "" on success, else a
  // one-line error. May be called again to replace the configuration, but only while no plan
  // is open (their continuations point into the current Coordinator).
  std::string Init(const std::string& config_json);
  bool ready() const { return coordinator_ != nullptr; }

  // Starts an operation. op_json is one of:
  //   {"op":"request", "request": <request>}   (entropy: used when the request carries none;
  //                                             at least 32 bytes)
  //   {"op":"migrate"}
  //   {"op":"bootstrap", "token": T, "now_ms": N}
  //   {"op":"maintenance", "now_ms": N}
  //   {"op":"blob_stored", "key": K, "size": S, "sha256": H, "now_ms": N}
  //   {"op":"blob_place", "key": K, "sha256": H or "", "now_ms": N}  (Coordinator::BlobPlacePlan)
  std::string Start(const std::string& op_json, const std::string& entropy = "");

  // Feeds the result of the handle's batch (wire result JSON) and returns the next step.
  std::string Continue(int64_t handle, const std::string& result_json);

  // Forgets an unfinished plan (the shell gave up on it).
  void Drop(int64_t handle);
  size_t open_plans() const { return plans_.size(); }

  // {"method","path","query","now_ms"} → {"ok":true,"grant":{key,method,max_size,sha256}}
  // or {"ok":false,"response":<error response>}.
  std::string AuthorizeBlob(const std::string& json);

 private:
  std::string Step(core::Plan plan);

  // Rate-limit buckets and remembered callers of this instance (per isolate); both outlive
  // coordinator_ (declared first).
  core::BucketTable limiter_;
  core::CallerTable callers_;
  std::unique_ptr<core::Coordinator> coordinator_;
  std::map<int64_t, core::Plan> plans_;
  D1Statements statements_;
  int64_t next_handle_ = 1;
};

}  // namespace gleaner::edge
