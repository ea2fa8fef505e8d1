// Blob transfers of the HTTP front end: PUT and GET/HEAD of /blobs/<key>?<signed query>, run on a
// worker thread that has taken the connection over from the event loop (they stream large bodies
// and fsync files, which the loop must never wait for).
//   PUT: the URL's size limit (413 before reading; the loop checked the URL), Expect:
//        100-continue, the body (Content-Length or chunked) streamed into the BlobStore while
//        hashed, Finish (fsync, sha256 check), BlobPlacePlan (a committed object is never
//        replaced: 409), Place (rename), BlobStoredPlan.
//   GET: one byte range or the whole object, streamed from the file.
// What is allowed and every refusal's answer are the core's (coordinator/core/blob_policy.h);
// this file only moves bytes. A refused request's body is read and dropped (up to 8 MiB) so that a
// client still sending it sees the answer; past that the connection is closed. Who may start a
// transfer at all (one upload per key, bounded per key and in all) is decided on the loop before a
// worker is taken: blob_admission.h. Threading: ServeBlob runs on a worker thread with exclusive
// use of the connection; the dependencies are thread-safe (PlanRunner, BlobStore, Coordinator's
// const calls).
#pragma once

#include <atomic>
#include <functional>

#include "coordinator/core/blob_policy.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/native/blob/blob_store.h"
#include "coordinator/native/clock.h"
#include "coordinator/native/db/plan_runner.h"
#include "coordinator/native/http/http_conn.h"

namespace gleaner::native {

struct BlobDeps {
  const core::Coordinator* coord = nullptr;
  PlanRunner* runner = nullptr;
  BlobStore* blobs = nullptr;
  const Clock* clock = nullptr;
  int io_timeout_ms = 30000;  // no progress this long on the socket ends the transfer
  // The core's minimum average rate (blob_policy.h): a client dribbling bytes is cut off at
  // once when it falls behind (an upload is answered 408 and closed; a download is cut). Each
  // byte no longer buys another io_timeout.
  core::BlobRateLimit rate;
  // Set once the server drains (may be null): answers then carry Connection: close.
  const std::atomic<bool>* stopping = nullptr;
};

// Answers the blob request whose head conn.parser holds (conn.meta filled; grant: the URL as
// checked on the loop with Coordinator::AuthorizeBlob, for PUT and GET/HEAD; conn.in holds bytes
// received after the head). Writes the whole response and logs it. Returns whether the
// connection can serve another request (the body was consumed and nothing broke); unparsed bytes
// after the body stay in conn.in. before_answer (may be empty) is called once, just before an
// answer (an upload's result or any error) is written: the caller releases there what the next
// request may need (its admission ticket), so a client that read the answer never finds it held.
bool ServeBlob(const BlobDeps& deps, const core::BlobGrant& grant, HttpConn& conn,
               std::function<void()> before_answer = nullptr);

}  // namespace gleaner::native
