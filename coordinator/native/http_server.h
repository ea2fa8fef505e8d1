// HttpServer: the HTTP/1.1 front end of gleaner-coordinator: one epoll event loop thread, no
// per-connection threads.
//   - The loop accepts, reads and parses (http_parser.h), and runs every API request's core Plan
//     without blocking: Coordinator::Handle on the loop thread, each batch handed to the ReadPool
//     (read-only batches: several requests' reads share one read transaction) or to the
//     GroupCommitter (writes: one transaction and one fsync per group), the continuation again on
//     the loop when the result comes back through an eventfd. Requests that arrive together thus
//     travel together, with a few thread wake-ups per group instead of several per request.
//   - PUT/GET /blobs/<key>?… go to a worker thread, which takes the connection over, streams the
//     body to or from the BlobStore (blob_transfer.h) and hands the connection back. The URL's
//     signature is checked on the loop first: a refused request never holds a worker.
//   - Limits: request head 16 KiB (431), request-target 8 KiB (414), API bodies
//     CoreConfig::max_request_body (413, answered before the body is read), a whole-request head
//     deadline (header_timeout_s: a client dribbling its head slowly is answered 408 and closed),
//     io_timeout_s without progress while reading a body or writing a response, keep-alive idle
//     timeout, and max_connections (further connections are accepted and closed at once).
//   - Every request is logged as one JSON line and counted in the process metrics.
// With HttpServerOptions::tls set it serves HTTPS only (OpenSSL, non-blocking; the TLS policy and
// certificate rotation are TlsCredentials' business, see tls.h).
// Stop() drains: the listening socket closes, idle connections close, requests in progress are
// answered (with Connection: close), then Serve returns.
// Threading: Bind and Serve from one thread; Stop from any thread (not from a signal handler).
#pragma once

#include <memory>
#include <string>

#include "coordinator/core/coordinator.h"
#include "coordinator/native/blob/blob_store.h"
#include "coordinator/native/clock.h"
#include "coordinator/native/db/plan_runner.h"
#include "coordinator/native/http/tls.h"
#include "shared/status.h"

namespace gleaner::native {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;     // 0: any free port
  int threads = 64;    // worker threads for blob transfers (each transfer holds one while it runs)
  int db_readers = 4;  // connections (threads) running read-only batches
  int max_connections = 10000;
  double header_timeout_s = 10;  // a request head must be complete this long after its first byte
  double keep_alive_timeout_s = 5;
  double io_timeout_s =
      30;  // a read or write on a connection that makes no progress this long fails
  TlsCredentials* tls =
      nullptr;  // set: HTTPS with these (loaded) credentials; must outlive the server
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
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gleaner::native
