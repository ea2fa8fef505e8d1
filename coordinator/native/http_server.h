// HttpServer: the cpp-httplib adapter of gleaner-coordinator. It only moves bytes:
//   - every request except /blobs/* becomes a core::HttpRequest (lowercase header names, now_ms
//     from the Clock, 32 bytes of OpenSSL entropy, a request id) → Coordinator::Handle → Plan
//     driven by the PlanRunner → response; then the plan's blob deletes are done best-effort;
//   - PUT/GET /blobs/<key>?… are authorised by Coordinator::AuthorizeBlob and streamed to/from
//     the BlobStore (PUT: size limit, sha256, durable write, then BlobStoredPlan).
// Request bodies are read by the shell with a limit (CoreConfig::max_request_body → 413), never
// buffered past it. This file is where httplib's exceptions are caught; none escape.
// Every request is logged as one JSON line (request_id, method, path, status, latency_ms).
// With HttpServerOptions::tls set it serves HTTPS only (OpenSSL through httplib's SSLServer; the
// TLS policy and certificate rotation are TlsCredentials' business, see tls.h).
// Threading: Bind and Serve from one thread; Stop from any thread (not from a signal handler).
#pragma once

#include <memory>
#include <string>

#include "coordinator/core/coordinator.h"
#include "coordinator/native/blob_store.h"
#include "coordinator/native/clock.h"
#include "coordinator/native/plan_runner.h"
#include "coordinator/native/tls.h"
#include "shared/status.h"

namespace gleaner::native {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  int threads = 64;
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
