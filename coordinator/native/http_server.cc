// The event loop of the HTTP front end (see http_server.h for what it does and why).
#include "coordinator/native/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "coordinator/native/blob/blob_transfer.h"
#include "coordinator/native/db/read_pool.h"
#include "coordinator/native/http/http_conn.h"
#include "coordinator/native/log.h"
#include "coordinator/native/metrics.h"
#include "shared/sha256.h"

namespace gleaner::native {

namespace {

using State = HttpConn::State;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

// A few threads for work the loop must not wait for: blob transfers and blob deletes.
class Workers {
 public:
  explicit Workers(int n) {
    for (int i = 0; i < std::max(1, n); ++i) threads_.emplace_back([this] { Run(); });
  }
  ~Workers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    pthread_setname_np(pthread_self(), "blob-worker");
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, and everything posted has run
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// What comes back to the loop from other threads.
struct Completion {
  HttpConn* conn = nullptr;
  bool blob_done = false;  // a worker finished a blob transfer on conn
  bool keep_alive = false;
  core::BatchResult result;  // a batch of conn's plan finished
};

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o)
      : options(std::move(o)),
        epoll_fd(::epoll_create1(EPOLL_CLOEXEC)),
        wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Impl();

  HttpServerOptions options;
  SSL_CTX* ssl_ctx = nullptr;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;   // eventfd: completions queued, or Stop()
  int spare_fd = -1;  // closed and reopened to refuse a connection when out of descriptors
  std::atomic<bool> stop_requested{false};

  const core::Coordinator* coord = nullptr;
  PlanRunner* runner = nullptr;
  BlobStore* blobs = nullptr;
  const Clock* clock = nullptr;
  GroupCommitter* committer = nullptr;
  std::unique_ptr<ReadPool> reads;
  std::unique_ptr<Workers> workers;
  BlobDeps blob_deps;
  http::Limits limits;
  int64_t max_body = 0;

  std::mutex done_mu;
  std::vector<Completion> done;  // filled by other threads, swapped out by the loop

  std::vector<HttpConn*> conns;   // open connections (not the dead ones waiting for a batch)
  size_t dead = 0;                // closed connections whose batch is still in flight
  std::vector<HttpConn*> closed;  // closed this turn; freed at its end (pointers stay valid)
  std::vector<HttpConn*> ready;   // to read and parse again (next pipelined request)
  std::vector<HttpConn*> detach;  // blob requests to hand to a worker at the end of this turn
  // Batches of this turn, handed over together at its end (one wake-up each).
  BatchItems read_batches, write_batches;
  bool draining = false;
  int64_t now = 0;  // steady ms, updated once per loop turn

  Status Setup();
  void Loop();
  void Accept();
  void OnEvent(HttpConn* c, uint32_t events);
  void ReadAndProcess(HttpConn* c);
  void Process(HttpConn* c);
  void OnHead(HttpConn* c);
  void Dispatch(HttpConn* c);
  void Advance(HttpConn* c);
  void Respond(HttpConn* c, const core::HttpResponse& r);
  void RespondAndClose(HttpConn* c, const core::HttpResponse& r, bool linger);
  void Flush(HttpConn* c);
  void Finished(HttpConn* c);
  void Close(HttpConn* c);
  void Post(Completion c);
  void RunCompletions();
  void EndTurn();
  void Sweep();
  void BeginDrain();
};

HttpServer::Impl::~Impl() {
  for (HttpConn* c : conns) delete c;
  for (HttpConn* c : closed) delete c;
  if (listen_fd >= 0) ::close(listen_fd);
  if (epoll_fd >= 0) ::close(epoll_fd);
  if (wake_fd >= 0) ::close(wake_fd);
  if (spare_fd >= 0) ::close(spare_fd);
  if (ssl_ctx != nullptr) SSL_CTX_free(ssl_ctx);
}

void HttpServer::Impl::Post(Completion c) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(done_mu);
    first = done.empty();
    done.push_back(std::move(c));
  }
  // The loop swaps the whole vector out: one wake-up per burst of completions.
  if (first) {
    uint64_t one = 1;
    ssize_t w = ::write(wake_fd, &one, sizeof one);
    (void)w;
  }
}

void HttpServer::Impl::Accept() {
  for (int i = 0; i < 256; ++i) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
        // Out of descriptors: take the connection with the spare one and close it, so the
        // client learns at once instead of waiting in the backlog forever.
        ::close(spare_fd);
        int refused = ::accept(listen_fd, nullptr, nullptr);
        if (refused >= 0) ::close(refused);
        spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        LogWarn("out of file descriptors: connection refused");
        continue;
      }
      return;  // EAGAIN, or an error of the one connection (ECONNABORTED...)
    }
    if (draining || conns.size() >= size_t(options.max_connections)) {
      ::close(fd);
      continue;
    }
    // Without TCP_NODELAY every keep-alive response after the first waits for a delayed ACK.
    int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    auto* c = new HttpConn(fd, ssl_ctx, limits);
    if (!c->transport.ok()) {
      delete c;
      continue;
    }
    c->idle_since_ms = c->progress_ms = now;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = c;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      delete c;
      continue;
    }
    c->index = conns.size();
    conns.push_back(c);
  }
}

void HttpServer::Impl::OnEvent(HttpConn* c, uint32_t events) {
  if (c->closed || c->state == State::kDetached) return;  // (the worker reads a detached one)
  if (events & EPOLLERR) return Close(c);
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) c->readable = true;
  if (events & (EPOLLRDHUP | EPOLLHUP)) c->peer_closed = true;  // EOF follows the data
  if ((events & EPOLLOUT) && c->state == State::kFlushing) Flush(c);
  // TLS may need to write to go on reading (and the other way round): try both on any event.
  if (c->state == State::kHead || c->state == State::kBody || c->state == State::kLinger) {
    if (c->readable || c->transport.Pending()) ReadAndProcess(c);
  }
}

void HttpServer::Impl::ReadAndProcess(HttpConn* c) {
  char buf[64 * 1024];
  while (c->state == State::kHead || c->state == State::kBody || c->state == State::kLinger) {
    // Parse what is buffered first (pipelined requests, bytes left from a blob transfer).
    if (c->in_pos < c->in.size() && c->state != State::kLinger) {
      size_t before = c->in_pos;
      Process(c);
      if (c->in_pos != before) continue;
    }
    if (!c->readable && !c->transport.Pending()) return;
    size_t n = 0;
    Transport::Io io = c->transport.Read(buf, sizeof buf, &n);
    if (io == Transport::Io::kAgain) {
      c->readable = false;
      return;
    }
    if (io != Transport::Io::kOk) return Close(c);  // EOF or error; a partial request is lost
    // A short read drained the socket; new bytes will raise a new edge (TLS: read on).
    if (n < sizeof buf && ssl_ctx == nullptr && !c->peer_closed) c->readable = false;
    c->progress_ms = now;
    if (c->state == State::kLinger) {
      c->lingered += int64_t(n);
      if (c->lingered > (int64_t(8) << 20)) return Close(c);
      continue;
    }
    if (c->in_pos == c->in.size()) {
      c->in.assign(buf, n);
      c->in_pos = 0;
    } else {
      c->in.append(buf, n);
    }
  }
}

// Parses buffered bytes in kHead/kBody; may start a request.
void HttpServer::Impl::Process(HttpConn* c) {
  const char* data = c->in.data() + c->in_pos;
  const size_t len = c->in.size() - c->in_pos;
  size_t used = 0;
  if (c->state == State::kHead) {
    auto st = c->parser.Parse(data, len, &used);
    c->in_pos += used;
    if (c->head_started_ms < 0 && c->parser.started()) c->head_started_ms = now;
    if (st == http::RequestParser::State::kError) {
      c->meta = RequestMeta();
      c->meta.start = SteadyClock::now();
      return RespondAndClose(c, FramingError(c->parser.error_status(), c->parser.error_message()),
                             /*linger=*/true);
    }
    if (st == http::RequestParser::State::kDone) OnHead(c);
  } else if (c->state == State::kBody) {
    auto st = c->decoder.Decode(data, len, &used, &c->body);
    c->in_pos += used;
    if (st == http::BodyDecoder::State::kError) {
      return RespondAndClose(c, FramingError(400, c->decoder.error_message()), true);
    }
    if (c->decoder.decoded() > max_body) {
      return RespondAndClose(
          c, FramingError(413, "request body exceeds " + std::to_string(max_body) + " bytes"),
          true);
    }
    if (st == http::BodyDecoder::State::kDone) Dispatch(c);
  }
  if (c->state != State::kDetached && c->in_pos == c->in.size()) {
    c->in.clear();
    c->in_pos = 0;
  }
}

void HttpServer::Impl::OnHead(HttpConn* c) {
  const http::Request& req = c->parser.request();
  c->meta = RequestMeta();
  c->meta.start = SteadyClock::now();
  c->meta.method = req.method;
  c->meta.http10 = req.version_minor == 0;
  c->keep_alive = req.keep_alive && !draining;
  c->body.clear();
  if (!SplitTarget(req.target, &c->meta.path, &c->meta.query)) {
    return RespondAndClose(c, FramingError(400, "malformed request target"), true);
  }
  if (c->meta.path.rfind("/blobs/", 0) == 0) {
    c->meta.request_id = "req_" + HexEncode(RandomBytes(8).data(), 8);
    // The signature is checked here, before a worker is taken: a request without a valid URL
    // must not hold one while it waits for (or dribbles) a body it announced.
    if (req.method == "PUT" || req.method == "GET" || req.method == "HEAD") {
      auto grant = coord->AuthorizeBlob(req.method == "PUT" ? "PUT" : "GET", c->meta.path,
                                        c->meta.query, clock->NowMs());
      if (!grant.ok()) {
        core::HttpResponse refusal = core::HttpResponse::Error(grant.status());
        if (req.body == http::BodyKind::kNone) return Respond(c, refusal);
        return RespondAndClose(c, refusal, /*linger=*/true);
      }
      c->blob_grant = std::move(grant).value();  // the worker acts on it
    }
    // A worker takes the connection over; it gets the bytes after the head in c->in.
    // Handed over at the end of this turn, when the loop no longer touches it.
    c->state = State::kDetached;
    detach.push_back(c);
    return;
  }
  if (req.body == http::BodyKind::kLength && req.content_length > max_body) {
    return RespondAndClose(
        c, FramingError(413, "request body exceeds " + std::to_string(max_body) + " bytes"), true);
  }
  c->decoder = http::BodyDecoder(req.body, req.content_length);
  if (c->decoder.done()) return Dispatch(c);
  if (req.expect_continue) {
    // Written like a response (a pipelined client may not have read the previous one yet);
    // the body is read once it is out.
    c->out += "HTTP/1.1 100 Continue\r\n\r\n";
    c->continue_sent = true;
    c->state = State::kFlushing;
    return Flush(c);
  }
  c->state = State::kBody;
}

void HttpServer::Impl::Dispatch(HttpConn* c) {
  const std::string& method = c->meta.method;
  if (method == "GET" || method == "HEAD") {
    if (const dashboard::Asset* asset = dashboard::FindAsset(c->meta.path)) {
      return Respond(c, AssetResponse(*asset));
    }
  }
  http::Request& req = c->parser.request();
  core::HttpRequest r;
  r.method = method == "HEAD" ? "GET" : method;
  r.path = c->meta.path;
  r.query = std::move(c->meta.query);
  r.headers = std::move(req.headers);
  r.body = std::move(c->body);
  r.now_ms = clock->NowMs();
  std::string random = RandomBytes(40);
  r.entropy = random.substr(0, 32);
  c->meta.request_id = "req_" + HexEncode(random.data() + 32, 8);
  r.request_id = c->meta.request_id;
  c->plan = coord->Handle(r);
  Advance(c);
}

// Runs the plan as far as it goes without the database; hands its next batch over.
void HttpServer::Impl::Advance(HttpConn* c) {
  if (c->plan.done()) {
    core::HttpResponse& resp = c->plan.response();
    // /metrics: the core's database gauges, then this process's counters and histograms.
    if (c->meta.path == "/metrics" && resp.status == 200) resp.body += ProcessMetrics().Text();
    std::vector<std::string> deletes = std::move(c->plan.blob_deletes());
    Respond(c, resp);
    // The response is final; superseded objects go now, best-effort (the core forgot them).
    if (!deletes.empty()) {
      BlobStore* store = blobs;
      workers->Post([store, deletes] {
        for (const std::string& key : deletes) {
          Status st = store->Delete(key);
          if (!st.ok()) LogWarn("blob delete failed", {{"key", key}, {"error", st.ToString()}});
        }
      });
    }
    return;
  }
  c->state = State::kRunning;
  auto done = [this, c](core::BatchResult r) {
    Completion d;
    d.conn = c;
    d.result = std::move(r);
    Post(std::move(d));
  };
  (runner->ReadOnly(c->plan.batch()) ? read_batches : write_batches)
      .emplace_back(&c->plan.batch(), std::move(done));
}

void HttpServer::Impl::Respond(HttpConn* c, const core::HttpResponse& r) {
  if (draining) c->keep_alive = false;
  AppendResponse(&c->out, r, c->meta, c->keep_alive);
  LogExchange(c->meta, r.status);
  c->state = State::kFlushing;
  Flush(c);
}

// Answers and ends the connection; with linger the client's remaining bytes are read and
// dropped for a while, so that it sees the answer rather than a reset.
void HttpServer::Impl::RespondAndClose(HttpConn* c, const core::HttpResponse& r, bool linger) {
  c->keep_alive = false;
  c->in.clear();
  c->in_pos = 0;
  AppendResponse(&c->out, r, c->meta, false);
  if (!c->meta.method.empty()) LogExchange(c->meta, r.status);
  c->linger = linger;
  c->lingered = 0;
  c->state = State::kFlushing;
  Flush(c);
}

void HttpServer::Impl::Flush(HttpConn* c) {
  while (c->out_pos < c->out.size()) {
    size_t n = 0;
    Transport::Io io =
        c->transport.Write(c->out.data() + c->out_pos, c->out.size() - c->out_pos, &n);
    if (io == Transport::Io::kAgain) return;  // EPOLLOUT comes when there is room
    if (io != Transport::Io::kOk) return Close(c);
    c->out_pos += n;
    c->progress_ms = now;
  }
  c->out.clear();
  c->out_pos = 0;
  Finished(c);
}

// The response (or a 100 Continue) is written.
void HttpServer::Impl::Finished(HttpConn* c) {
  if (c->continue_sent) {  // that was the 100 Continue: now the body
    c->continue_sent = false;
    c->state = State::kBody;
    if ((c->in_pos < c->in.size() || c->readable) && !c->queued) {
      c->queued = true;
      ready.push_back(c);
    }
    return;
  }
  if (!c->keep_alive) {
    if (!c->linger) return Close(c);
    c->transport.ShutdownWrite();
    c->state = State::kLinger;
    c->idle_since_ms = now;
    return;
  }
  c->state = State::kHead;
  c->parser.Reset();
  c->head_started_ms = -1;
  c->idle_since_ms = now;
  // The next request (pipelined, or bytes that came meanwhile) is read at the end of the turn,
  // not from here: no recursion through a stream of pipelined requests.
  if ((c->in_pos < c->in.size() || c->readable) && !c->queued) {
    c->queued = true;
    ready.push_back(c);
  }
}

void HttpServer::Impl::Close(HttpConn* c) {
  if (c->closed) return;
  c->closed = true;
  c->transport.Close();
  // Out of the list (swap with the last).
  HttpConn* last = conns.back();
  conns[c->index] = last;
  last->index = c->index;
  conns.pop_back();
  if (c->state == State::kRunning) {
    c->dead = true;  // its batch still refers to c->plan: deleted when the result comes
    ++dead;
    return;
  }
  closed.push_back(c);
}

void HttpServer::Impl::RunCompletions() {
  std::vector<Completion> batch;
  {
    std::lock_guard<std::mutex> lock(done_mu);
    batch.swap(done);
  }
  for (Completion& d : batch) {
    HttpConn* c = d.conn;
    if (d.blob_done) {
      c->state = State::kHead;
      if (!d.keep_alive || draining) {
        Close(c);
        continue;
      }
      c->parser.Reset();
      c->head_started_ms = -1;
      c->idle_since_ms = c->progress_ms = now;
      c->readable = true;  // edges that came while the worker had it were not looked at
      if (!c->queued) {
        c->queued = true;
        ready.push_back(c);
      }
      continue;
    }
    if (c->dead) {
      --dead;
      delete c;
      continue;
    }
    c->plan = c->plan.Continue(std::move(d.result));
    Advance(c);
  }
}

// What a turn of the loop left for its end: connections to read again, batches to hand to the
// database threads, blob requests to hand to workers, closed connections to free.
void HttpServer::Impl::EndTurn() {
  while (!ready.empty()) {
    std::vector<HttpConn*> again;
    again.swap(ready);
    for (HttpConn* c : again) {
      c->queued = false;
      if (!c->closed) ReadAndProcess(c);
    }
  }
  if (!read_batches.empty()) reads->SubmitAll(std::move(read_batches));
  if (!write_batches.empty()) committer->SubmitAll(std::move(write_batches));
  read_batches.clear();
  write_batches.clear();
  for (HttpConn* c : detach) {
    workers->Post([this, c] {
      Completion done;
      done.conn = c;
      done.blob_done = true;
      done.keep_alive = ServeBlob(blob_deps, *c);
      Post(std::move(done));
    });
  }
  detach.clear();
  for (HttpConn* c : closed) delete c;
  closed.clear();
}

void HttpServer::Impl::Sweep() {
  const int64_t keep_alive_ms = int64_t(options.keep_alive_timeout_s * 1000);
  const int64_t header_ms = int64_t(options.header_timeout_s * 1000);
  const int64_t io_ms = int64_t(options.io_timeout_s * 1000);
  // Walk backwards: Close swaps the last connection into the closed one's place.
  for (size_t i = conns.size(); i-- > 0;) {
    HttpConn* c = conns[i];
    switch (c->state) {
      case State::kHead:
        if (c->head_started_ms < 0) {
          if (draining || now - c->idle_since_ms >= keep_alive_ms) Close(c);
        } else if (now - c->head_started_ms >= header_ms || now - c->progress_ms >= io_ms) {
          c->meta = RequestMeta();
          c->meta.start = SteadyClock::now();
          RespondAndClose(c, FramingError(408, "request head not received in time"), false);
        }
        break;
      case State::kBody:
        if (now - c->progress_ms >= io_ms) {
          RespondAndClose(c, FramingError(408, "request body not received in time"), false);
        }
        break;
      case State::kFlushing:
        if (now - c->progress_ms >= io_ms) Close(c);
        break;
      case State::kLinger:
        if (now - c->idle_since_ms >= 2000 || draining) Close(c);
        break;
      case State::kRunning:
      case State::kDetached:
        break;
    }
  }
}

void HttpServer::Impl::BeginDrain() {
  draining = true;
  if (listen_fd >= 0) {
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
    ::close(listen_fd);
    listen_fd = -1;
  }
  Sweep();  // idle connections go now; the others answer with Connection: close
  EndTurn();
}

void HttpServer::Impl::Loop() {
  pthread_setname_np(pthread_self(), "http-loop");
  static char listen_tag, wake_tag;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &listen_tag;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
  ev.data.ptr = &wake_tag;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
  epoll_event events[256];
  int64_t next_sweep = 0;
  for (;;) {
    int n = ::epoll_wait(epoll_fd, events, 256, draining ? 20 : 100);
    now = SteadyMs();
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &listen_tag) {
        if (!draining) Accept();
      } else if (tag == &wake_tag) {
        uint64_t count;
        ssize_t r = ::read(wake_fd, &count, sizeof count);
        (void)r;
      } else {
        OnEvent(static_cast<HttpConn*>(tag), events[i].events);
      }
    }
    RunCompletions();
    EndTurn();
    if (stop_requested && !draining) BeginDrain();
    if (now >= next_sweep) {
      Sweep();
      EndTurn();
      next_sweep = now + 100;
    }
    if (draining && conns.empty() && dead == 0) return;
  }
}

Status HttpServer::Impl::Setup() {
  committer = nullptr;
  auto c = runner->Committer();
  if (!c.ok()) return c.status();
  committer = *c;
  auto pool = ReadPool::Start(runner->db(), options.db_readers);
  if (!pool.ok()) return pool.status();
  reads = std::move(pool).value();
  workers = std::make_unique<Workers>(options.threads);
  blob_deps.coord = coord;
  blob_deps.runner = runner;
  blob_deps.blobs = blobs;
  blob_deps.clock = clock;
  blob_deps.io_timeout_ms = int(options.io_timeout_s * 1000);
  blob_deps.stopping = &stop_requested;
  max_body = coord->config().max_request_body;
  spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (epoll_fd < 0 || wake_fd < 0) return Status::Io(std::string("epoll: ") + std::strerror(errno));
  return Status::Ok();
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() {
  Stop();
}

Result<int> HttpServer::Bind() {
  Impl& s = *impl_;
  // Each connection is a descriptor: allow as many as the hard limit does.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (s.options.tls != nullptr && s.ssl_ctx == nullptr) {
    s.ssl_ctx = SSL_CTX_new(TLS_server_method());
    std::string error;
    if (s.ssl_ctx == nullptr || !s.options.tls->ConfigureServerContext(s.ssl_ctx, &error)) {
      if (error.empty()) error = "SSL_CTX_new failed";
      return Status::Internal("cannot set up TLS: " + error);
    }
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(s.options.port);
  const std::string where = s.options.host + ":" + port;
  if (::getaddrinfo(s.options.host.c_str(), port.c_str(), &hints, &found) != 0 || !found) {
    return Status::Io("cannot listen on " + where + " (unknown host)");
  }
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    // A full backlog: a burst of connections (every agent reconnecting after a restart) must
    // not have SYNs dropped.
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      s.listen_fd = fd;
      break;
    }
    error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (s.listen_fd < 0) {
    return Status::Io("cannot listen on " + where + " (" + error + ")");
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return addr.ss_family == AF_INET6 ? int(ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port))
                                    : int(ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port));
}

Status HttpServer::Serve(const core::Coordinator* coordinator, PlanRunner* runner, BlobStore* blobs,
                         const Clock* clock) {
  Impl& s = *impl_;
  if (s.listen_fd < 0) return Status::Internal("Serve before Bind");
  s.coord = coordinator;
  s.runner = runner;
  s.blobs = blobs;
  s.clock = clock;
  Status st = s.Setup();
  if (!st.ok()) return st;
  s.now = SteadyMs();
  s.Loop();
  // Every connection is closed; blob workers are idle. Stop the pools before the runner goes.
  s.workers.reset();
  s.reads.reset();
  return Status::Ok();
}

void HttpServer::Stop() {
  impl_->stop_requested = true;
  if (impl_->wake_fd >= 0) {
    uint64_t one = 1;
    ssize_t w = ::write(impl_->wake_fd, &one, sizeof one);
    (void)w;
  }
}

}  // namespace gleaner::native
