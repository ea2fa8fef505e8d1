// EventLoop: a generic HTTP/1.1 server loop: one epoll thread, no thread per connection.
//
// It accepts, reads and frames requests (http_parser.h), writes responses, enforces the limits
// and deadlines below and drains on Stop(). It knows nothing of what a request means: an
// HttpHandler decides, and may answer at once or later. It speaks in the core's plain HTTP
// values (coordinator/core/http.h) and nothing else of the coordinator.
//   - OnHead (loop thread): a request head is complete. The handler answers at once, asks for
//     the body (read here, 413 past the size it allows, then OnRequest), or takes the
//     connection over:
//     the task runs on a worker thread with exclusive use of the connection, which comes back
//     to the loop afterwards (for transfers that stream or fsync, which the loop must not wait
//     for). An answer before an announced body closes the connection after it (lingering, so
//     the client sees the answer rather than a reset).
//   - OnRequest (loop thread): a request with its body. The handler answers with Respond, now
//     or later: work done elsewhere comes back through Post(conn, fn), which runs fn on the loop
//     (or drops it, and frees the connection, if that closed meanwhile). Handlers that group
//     work (several requests' database batches) hand it on in EndTurn, once per loop turn.
//   - Limits: request head 16 KiB (431), request-target 8 KiB (414), the handler's body limit
//     (413, answered before the body is read when its length is announced); a whole-request head
//     deadline (header_timeout_s: a client dribbling its head is answered 408 and closed),
//     io_timeout_s without progress while reading a body or writing a response, the keep-alive idle
//     timeout, and max_connections (further connections are accepted and closed at once).
//   - Stop() drains: the listening socket closes, idle connections close, requests in progress
//     are answered (with Connection: close), then Serve returns.
// With EventLoopOptions::tls set it serves HTTPS only (OpenSSL, non-blocking; the TLS policy and
// certificate rotation are TlsCredentials' business, see tls.h).
// Threading: Bind and Serve from one thread; Stop from any thread (not from a signal handler);
// Post and RunOnWorker from any thread; everything else on the loop thread (handler calls).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "coordinator/core/http.h"
#include "coordinator/native/http/http_conn.h"
#include "coordinator/native/http/tls.h"
#include "shared/status.h"

namespace gleaner::native {

struct EventLoopOptions {
  std::string host = "127.0.0.1";
  int port = 8080;   // 0: any free port
  int workers = 64;  // threads for taken-over connections and background tasks
  int max_connections = 10000;
  double header_timeout_s = 10;  // a request head must be complete this long after its first byte
  double keep_alive_timeout_s = 5;
  double io_timeout_s = 30;       // a read or write that makes no progress this long fails
  TlsCredentials* tls = nullptr;  // set: HTTPS with these (loaded) credentials; must outlive us
};

// What the handler does with a request head.
struct HeadAction {
  enum class Kind { kReadBody, kAnswer, kTakeOver };
  Kind kind = Kind::kReadBody;
  int64_t max_body = 0;       // kReadBody: larger bodies are answered 413
  core::HttpResponse answer;  // kAnswer
  // kTakeOver: runs on a worker with exclusive use of the connection (its bytes after the head
  // are in conn.in); writes the whole answer and returns whether the connection can serve
  // another request.
  std::function<bool(HttpConn& conn)> take_over;

  static HeadAction ReadBody(int64_t max_body);
  static HeadAction Answer(core::HttpResponse r);
  static HeadAction TakeOver(std::function<bool(HttpConn& conn)> task);
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // conn->meta (method, path, query) and conn->parser.request() hold the head.
  virtual HeadAction OnHead(HttpConn* conn) = 0;
  // The request is complete (conn->body). Answer with EventLoop::Respond, now or from Post.
  virtual void OnRequest(HttpConn* conn) = 0;
  // Once per loop turn, after every request of the turn had its OnHead / OnRequest.
  virtual void EndTurn() {}
  // Every answer the loop wrote for a request (the handler's and the loop's own 4xx).
  virtual void Answered(const RequestMeta& meta, int status) = 0;
};

class EventLoop {
 public:
  explicit EventLoop(EventLoopOptions options);
  ~EventLoop();

  // Binds the listening socket; returns the bound port.
  Result<int> Bind();
  // Serves until Stop(), then returns when every connection is closed. handler must outlive it.
  Status Serve(HttpHandler* handler);
  void Stop();
  // Set once Stop() was called: answers from now on carry Connection: close.
  const std::atomic<bool>* stopping() const;
  const EventLoopOptions& options() const;

  // Loop thread: answers the request conn is on (HEAD: without the body).
  void Respond(HttpConn* conn, const core::HttpResponse& r);
  // Any thread: runs fn(conn) on the loop thread, unless conn closed meanwhile (then fn is
  // dropped and conn freed). A connection waiting for a handler's answer is kept for this.
  void Post(HttpConn* conn, std::function<void(HttpConn*)> fn);
  // Any thread: runs task on a worker thread (work the loop must not wait for).
  void RunOnWorker(std::function<void()> task);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gleaner::native
