// EdgeSession: the core behind a JSON-in / JSON-out interface, for shells that drive plans
// asynchronously (the Worker awaits D1 between steps, so plans must outlive a call).
//
// Every operation returns one JSON text, a "step":
//   {"done": false, "handle": N, "batch": [<statement>...]}   run it, then Continue(N, result)
//   {"done": true, "response": <response>, "blob_deletes": [key...],
//    "pool"?: {"target", "reallocate": [{"node_id", "machine_id"}...]}}  (a maintenance tick's
//    core::PoolActions; absent when there are none)
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

#include "coordinator/core/blob_policy.h"
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

  // The core's blob transfer policy (coordinator/core/blob_policy.h) for the Worker, which only
  // moves bytes. {"op": ...} → {"ok": true, ...} or {"ok": false, "response": <refusal>}:
  //   {"op":"admit", "key", "put"}       a transfer slot (one upload per key, bounded reads per
  //                                      key and transfers in all, per isolate); "release" gives
  //                                      it back (always answers ok)
  //   {"op":"put_head", "grant", "content_length"}  (-1: none declared; the edge needs one)
  //   {"op":"put_body", "grant", "size", "sha256"}  the whole body against the URL
  //   {"op":"read", "size", "range"?}    → "status" (200/206), "first", "length", "headers"
  //   {"op":"budget", "elapsed_ms", "moved"} → "budget_ms" (<= 0: too slow, minimum rate)
  //   {"op":"refusal", "name"}           the table's answer for "too_slow", "body_unreadable",
  //                                      "no_such_object", "method_not_allowed"
  // "grant" is what AuthorizeBlob returned.
  std::string Blob(const std::string& json);

  // The core's settings table for the Worker to read its variables by (core/settings.h):
  // [{"name","env","kind","default","doc","value"?}], "value" (the setting text in force) once
  // Init succeeded. kind: "string" | "seconds" | "integer" | "boolean" | "rate".
  std::string Settings() const;

  // {"method","path","query","now_ms"} → {"ok":true,"grant":{key,method,max_size,sha256}}
  // (path as the URL has it, percent-encoded: decoded here by core::DecodePath)
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
  core::BlobAdmissionTable admission_{core::BlobAdmissionLimits{}};
  D1Statements statements_;
  int64_t next_handle_ = 1;
};

}  // namespace gleaner::edge
