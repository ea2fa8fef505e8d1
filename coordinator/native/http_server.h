// HttpServer: gleaner-coordinator served over HTTP: the shell that drives the core's plans on
// the generic event loop (http/event_loop.h), which does the sockets, framing and deadlines.
//   - API requests: Coordinator::Handle on the loop thread; each batch of the plan goes to the
//     ReadPool (read-only batches: several requests' reads share one read transaction) or to the
//     GroupCommitter (writes: one transaction and one fsync per group), handed over once per
//     loop turn; the continuation runs on the loop again when the result comes back. Requests
//     that arrive together thus travel together, with a few thread wake-ups per group instead
//     of several per request.
//   - PUT/GET /blobs/<key>?… : the URL's signature is checked on the loop first (a refused
//     request never holds a worker), then a worker thread takes the connection over and
//     streams the body to or from the BlobStore (blob/blob_transfer.h).
//   - The dashboard's files (embedded), and /metrics with this process's counters appended.
//   - Every request is logged as one JSON line and counted in the process metrics.
// Stop() drains (see event_loop.h).
// Threading: Bind and Serve from one thread; Stop from any thread (not from a signal handler).
#pragma once

#include <memory>
#include <string>

#include "coordinator/core/coordinator.h"
#include "coordinator/native/blob/blob_store.h"
#include "coordinator/native/clock.h"
#include "coordinator/native/db/plan_runner.h"
#include "coordinator/native/http/event_loop.h"
#include "shared/status.h"

namespace gleaner::native {

struct HttpServerOptions {
  // Listening, TLS and deadlines; its workers run blob transfers (each holds one while it runs).
  EventLoopOptions loop;
  int db_readers = 4;  // connections (threads) running read-only batches
  // Blob transfers: admission bounds (blob_admission.h) derived from loop.workers; the minimum
  // rate is the core's setting (CoreConfig::blob_rate()).
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();

  // Binds the listening socket; returns the bound port.
  Result<int> Bind();

  // Serves until Stop(): stops accepting, lets in-flight requests finish, then returns.
  // The referenced objects must outlive this call.
  Status Serve(const core::Coordinator* coordinator, PlanRunner* runner, BlobStore* blobs,
               const Clock* clock);

  void Stop();

 private:
  int db_readers_;
  EventLoop loop_;
};

}  // namespace gleaner::native
