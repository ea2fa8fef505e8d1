// The HTTP/1.1 event loop (see event_loop.h for what it does and why).
#include "coordinator/native/http/event_loop.h"

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
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "coordinator/native/log.h"

namespace gleaner::native {

namespace {

using State = HttpConn::State;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

// A few threads for work the loop must not wait for: taken-over connections, background tasks.
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
    pthread_setname_np(pthread_self(), "http-worker");
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
  std::function<void(HttpConn*)> fn;  // Post(): run on the loop
  bool handed_back = false;           // a worker finished with a taken-over connection
  bool keep_alive = false;            // handed_back: it can serve another request
};

using TakeOverTask = std::function<bool(HttpConn&)>;

}  // namespace

HeadAction HeadAction::ReadBody(int64_t max_body) {
  HeadAction a;
  a.max_body = max_body;
  return a;
}

HeadAction HeadAction::Answer(core::HttpResponse r) {
  HeadAction a;
  a.kind = Kind::kAnswer;
  a.answer = std::move(r);
  return a;
}

HeadAction HeadAction::TakeOver(std::function<bool(HttpConn& conn)> task) {
  HeadAction a;
  a.kind = Kind::kTakeOver;
  a.take_over = std::move(task);
  return a;
}

struct EventLoop::Impl {
  explicit Impl(EventLoopOptions o)
      : options(std::move(o)),
        epoll_fd(::epoll_create1(EPOLL_CLOEXEC)),
        wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Impl();

  EventLoopOptions options;
  SSL_CTX* ssl_ctx = nullptr;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;   // eventfd: completions queued, or Stop()
  int spare_fd = -1;  // closed and reopened to refuse a connection when out of descriptors
  std::atomic<bool> stop_requested{false};

  HttpHandler* handler = nullptr;
  std::unique_ptr<Workers> workers;
  http::Limits limits;

  std::mutex done_mu;
  std::vector<Completion> done;  // filled by other threads, swapped out by the loop

  std::vector<HttpConn*> conns;   // open connections (not the dead ones waiting for a handler)
  size_t dead = 0;                // closed connections a handler's Post is still due for
  std::vector<HttpConn*> closed;  // closed this turn; freed at its end (pointers stay valid)
  std::vector<HttpConn*> ready;   // to read and parse again (next pipelined request)
  // Connections to hand to a worker at the end of this turn, with their task.
  std::vector<std::pair<HttpConn*, TakeOverTask>> detach;
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

EventLoop::Impl::~Impl() {
  for (HttpConn* c : conns) delete c;
  for (HttpConn* c : closed) delete c;
  if (listen_fd >= 0) ::close(listen_fd);
  if (epoll_fd >= 0) ::close(epoll_fd);
  if (wake_fd >= 0) ::close(wake_fd);
  if (spare_fd >= 0) ::close(spare_fd);
  if (ssl_ctx != nullptr) SSL_CTX_free(ssl_ctx);
}

void EventLoop::Impl::Post(Completion c) {
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

namespace {
// The text of an accepted peer's address ("127.0.0.1", "2001:db8::1"; an IPv4-mapped IPv6
// address as IPv4), "" for other families.
std::string PeerAddress(const sockaddr_storage& peer) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (peer.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    if (::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf) == nullptr) return "";
  } else if (peer.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    if (::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf) == nullptr) return "";
    std::string text = buf;
    if (text.rfind("::ffff:", 0) == 0 && text.find('.') != std::string::npos) return text.substr(7);
    return text;
  } else {
    return "";
  }
  return buf;
}
}  // namespace

void EventLoop::Impl::Accept() {
  for (int i = 0; i < 256; ++i) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
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
    c->peer_addr = PeerAddress(peer);
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

void EventLoop::Impl::OnEvent(HttpConn* c, uint32_t events) {
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

void EventLoop::Impl::ReadAndProcess(HttpConn* c) {
  char buf[64 * 1024];
  while (c->state == State::kHead || c->state == State::kBody || c->state == State::kLinger) {
    // Parse what is buffered first (pipelined requests, bytes left from a taken-over request).
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
void EventLoop::Impl::Process(HttpConn* c) {
  const char* data = c->in.data() + c->in_pos;
  const size_t len = c->in.size() - c->in_pos;
  size_t used = 0;
  const int64_t max_body = c->max_body;
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

void EventLoop::Impl::OnHead(HttpConn* c) {
  const http::Request& req = c->parser.request();
  c->meta = RequestMeta();
  c->meta.start = SteadyClock::now();
  c->meta.method = req.method;
  c->meta.http10 = req.version_minor == 0;
  c->keep_alive = req.keep_alive && !draining;
  c->body.clear();
  if (!SplitTarget(req.target, &c->meta.path, &c->meta.query)) {
    return RespondAndClose(c, core::MalformedTarget(), true);
  }
  HeadAction action = handler->OnHead(c);
  switch (action.kind) {
    case HeadAction::Kind::kAnswer:
      // An announced body is not read: the connection ends after the answer.
      if (req.body == http::BodyKind::kNone) return Respond(c, action.answer);
      return RespondAndClose(c, action.answer, /*linger=*/true);
    case HeadAction::Kind::kTakeOver:
      // A worker takes the connection over; it gets the bytes after the head in c->in.
      // Handed over at the end of this turn, when the loop no longer touches it.
      c->state = State::kDetached;
      detach.emplace_back(c, std::move(action.take_over));
      return;
    case HeadAction::Kind::kReadBody:
      break;
  }
  c->max_body = action.max_body;
  if (req.body == http::BodyKind::kLength && req.content_length > c->max_body) {
    return RespondAndClose(
        c, FramingError(413, "request body exceeds " + std::to_string(c->max_body) + " bytes"),
        true);
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

// The request is complete: the handler has it until it answers.
void EventLoop::Impl::Dispatch(HttpConn* c) {
  c->state = State::kWaiting;
  handler->OnRequest(c);
}

void EventLoop::Impl::Respond(HttpConn* c, const core::HttpResponse& r) {
  if (draining) c->keep_alive = false;
  AppendResponse(&c->out, r, c->meta, c->keep_alive);
  handler->Answered(c->meta, r.status);
  c->state = State::kFlushing;
  Flush(c);
}

// Answers and ends the connection; with linger the client's remaining bytes are read and
// dropped for a while, so that it sees the answer rather than a reset.
void EventLoop::Impl::RespondAndClose(HttpConn* c, const core::HttpResponse& r, bool linger) {
  c->keep_alive = false;
  c->in.clear();
  c->in_pos = 0;
  AppendResponse(&c->out, r, c->meta, false);
  if (!c->meta.method.empty()) handler->Answered(c->meta, r.status);
  c->linger = linger;
  c->lingered = 0;
  c->state = State::kFlushing;
  Flush(c);
}

void EventLoop::Impl::Flush(HttpConn* c) {
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
void EventLoop::Impl::Finished(HttpConn* c) {
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

void EventLoop::Impl::Close(HttpConn* c) {
  if (c->closed) return;
  c->closed = true;
  c->transport.Close();
  // Out of the list (swap with the last).
  HttpConn* last = conns.back();
  conns[c->index] = last;
  last->index = c->index;
  conns.pop_back();
  if (c->state == State::kWaiting) {
    c->dead = true;  // the handler's Post for it is still to come: deleted then
    ++dead;
    return;
  }
  closed.push_back(c);
}

void EventLoop::Impl::RunCompletions() {
  std::vector<Completion> batch;
  {
    std::lock_guard<std::mutex> lock(done_mu);
    batch.swap(done);
  }
  for (Completion& d : batch) {
    HttpConn* c = d.conn;
    if (d.handed_back) {
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
    d.fn(c);
  }
}

// What a turn of the loop left for its end: connections to read again, the handler's grouped
// work, connections to hand to workers, closed connections to free.
void EventLoop::Impl::EndTurn() {
  while (!ready.empty()) {
    std::vector<HttpConn*> again;
    again.swap(ready);
    for (HttpConn* c : again) {
      c->queued = false;
      if (!c->closed) ReadAndProcess(c);
    }
  }
  handler->EndTurn();
  for (auto& [c, task] : detach) {
    workers->Post([this, c = c, task = std::move(task)] {
      Completion back;
      back.conn = c;
      back.handed_back = true;
      back.keep_alive = task(*c);
      Post(std::move(back));
    });
  }
  detach.clear();
  for (HttpConn* c : closed) delete c;
  closed.clear();
}

void EventLoop::Impl::Sweep() {
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
      case State::kWaiting:
      case State::kDetached:
        break;
    }
  }
}

void EventLoop::Impl::BeginDrain() {
  draining = true;
  if (listen_fd >= 0) {
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
    ::close(listen_fd);
    listen_fd = -1;
  }
  Sweep();  // idle connections go now; the others answer with Connection: close
  EndTurn();
}

void EventLoop::Impl::Loop() {
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

Status EventLoop::Impl::Setup() {
  workers = std::make_unique<Workers>(options.workers);
  spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (epoll_fd < 0 || wake_fd < 0) return Status::Io(std::string("epoll: ") + std::strerror(errno));
  return Status::Ok();
}

EventLoop::EventLoop(EventLoopOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

EventLoop::~EventLoop() {
  Stop();
}

Result<int> EventLoop::Bind() {
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

Status EventLoop::Serve(HttpHandler* handler) {
  Impl& s = *impl_;
  if (s.listen_fd < 0) return Status::Internal("Serve before Bind");
  s.handler = handler;
  Status st = s.Setup();
  if (!st.ok()) return st;
  s.now = SteadyMs();
  s.Loop();
  // Every connection is closed; the workers finish what was posted to them.
  s.workers.reset();
  return Status::Ok();
}

void EventLoop::Stop() {
  impl_->stop_requested = true;
  if (impl_->wake_fd >= 0) {
    uint64_t one = 1;
    ssize_t w = ::write(impl_->wake_fd, &one, sizeof one);
    (void)w;
  }
}

const std::atomic<bool>* EventLoop::stopping() const {
  return &impl_->stop_requested;
}

const EventLoopOptions& EventLoop::options() const {
  return impl_->options;
}

void EventLoop::Respond(HttpConn* conn, const core::HttpResponse& r) {
  impl_->Respond(conn, r);
}

void EventLoop::Post(HttpConn* conn, std::function<void(HttpConn*)> fn) {
  Completion c;
  c.conn = conn;
  c.fn = std::move(fn);
  impl_->Post(std::move(c));
}

void EventLoop::RunOnWorker(std::function<void()> task) {
  impl_->workers->Post(std::move(task));
}

}  // namespace gleaner::native
