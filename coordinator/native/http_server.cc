// The only file that talks to cpp-httplib in the coordinator (and catches its exceptions).
#include "coordinator/native/http_server.h"

#include <httplib.h>
#include <openssl/rand.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "coordinator/core/router.h"
#include "coordinator/dashboard/assets.h"
#include "coordinator/native/log.h"
#include "coordinator/native/metrics.h"
#include "shared/sha256.h"

namespace gleaner::native {

namespace {

using SteadyClock = std::chrono::steady_clock;

// Set by the pre-routing handler; read by the logger on the same worker thread.
thread_local SteadyClock::time_point t_request_start;

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&out[0]), int(n)) != 1) {
    // OpenSSL's CSPRNG failing is not recoverable in a sane way; fail closed loudly.
    LogError("RAND_bytes failed");
    std::abort();
  }
  return out;
}

void SendResponse(const core::HttpResponse& r, httplib::Response& res) {
  res.status = r.status;
  for (const auto& [name, value] : r.headers) res.set_header(name, value);
  if (!r.body.empty() || !r.content_type.empty()) {
    res.set_content(r.body, r.content_type.empty() ? "application/octet-stream" : r.content_type);
  }
}

void SendError(const Status& st, httplib::Response& res) {
  SendResponse(core::HttpResponse::Error(st), res);
}

// The rest of an unread request body is still on the socket: the connection cannot be reused.
void CloseAfter(httplib::Response& res) {
  res.set_header("Connection", "close");
}

// Bodies up to this size are read and discarded before an early error answer, so that simple
// clients that only read the response after sending everything still see it.
constexpr int64_t kDrainLimit = int64_t(8) << 20;

// Reads and discards the body of a refused request (up to kDrainLimit); marks the connection
// for closing unless the whole body was consumed.
void DrainBody(const httplib::Request& req, const httplib::ContentReader* reader,
               httplib::Response& res) {
  int64_t declared = -1;
  if (req.has_header("Content-Length")) {
    declared = std::strtoll(req.get_header_value("Content-Length").c_str(), nullptr, 10);
  }
  if (reader == nullptr || declared < 0 || declared > kDrainLimit) return CloseAfter(res);
  int64_t seen = 0;
  bool ok = (*reader)([&](const char*, size_t len) {
    seen += int64_t(len);
    return seen <= kDrainLimit;
  });
  if (!ok) CloseAfter(res);
}

bool SplitTarget(const httplib::Request& req, std::string* path, std::string* query) {
  const std::string& target = req.target.empty() ? req.path : req.target;
  size_t q = target.find('?');
  std::string raw_path = target.substr(0, q);
  *query = q == std::string::npos ? "" : target.substr(q + 1);
  return core::UrlDecode(raw_path, path, /*plus_is_space=*/false);
}

// The dashboard's embedded files: public (they hold no data; every API call needs a token).
void SendAsset(const dashboard::Asset& a, httplib::Response& res) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                 "frame-ancestors 'none'");
  res.set_content(reinterpret_cast<const char*>(a.data), a.size, a.content_type);
}

// Metrics and log label of a request: its route pattern, never the raw path.
std::string RouteLabel(const std::string& method, const std::string& path) {
  if (path.rfind("/blobs/", 0) == 0) return "/blobs/{key}";
  if ((method == "GET" || method == "HEAD") && dashboard::FindAsset(path) != nullptr) {
    return path == "/" ? "/" : "/dashboard/{file}";
  }
  const core::RouteInfo* r = core::FindRoute(method == "HEAD" ? "GET" : method, path);
  return r != nullptr ? r->pattern : "other";
}

int64_t DeclaredLength(const httplib::Request& req) {
  if (!req.has_header("Content-Length")) return -1;
  const std::string v = req.get_header_value("Content-Length");
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || n < 0) return -1;
  return n;
}

// An HTTPS server (TLS policy and certificate callback from TlsCredentials) or plain HTTP.
// If the TLS context cannot be made, *error says why and the (plain) server is never bound.
std::unique_ptr<httplib::Server> MakeServer(TlsCredentials* tls, std::string* error) {
  if (tls == nullptr) return std::make_unique<httplib::Server>();
  auto svr = std::make_unique<httplib::SSLServer>(
      [tls, error](SSL_CTX& ctx) { return tls->ConfigureServerContext(&ctx, error); });
  if (svr->is_valid()) return svr;
  if (error->empty()) *error = "SSL_CTX_new failed";
  return std::make_unique<httplib::Server>();
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o)
      : options(std::move(o)), owned(MakeServer(options.tls, &setup_error)), svr(*owned) {}
  HttpServerOptions options;
  std::string setup_error;  // non-empty: the TLS context could not be made; Bind() fails
  std::unique_ptr<httplib::Server> owned;
  httplib::Server& svr;
  std::atomic<bool> stopping{false};
  std::atomic<bool> serving{false};
  int listen_fd = -1;  // the listening socket, once bound

  const core::Coordinator* coord = nullptr;
  PlanRunner* runner = nullptr;
  BlobStore* blobs = nullptr;
  const Clock* clock = nullptr;

  void Dispatch(const httplib::Request& req, httplib::Response& res,
                const httplib::ContentReader* reader);
  void HandleApi(const httplib::Request& req, httplib::Response& res,
                 const httplib::ContentReader* reader, std::string path, std::string query);
  void HandleBlobPut(const httplib::Request& req, httplib::Response& res,
                     const httplib::ContentReader* reader, const std::string& path,
                     const std::string& query);
  void HandleBlobGet(const httplib::Request& req, httplib::Response& res, const std::string& path,
                     const std::string& query);
  void Install();
};

void HttpServer::Impl::Dispatch(const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader* reader) {
  try {
    std::string path, query;
    if (!SplitTarget(req, &path, &query)) {
      CloseAfter(res);
      return SendError(Status::Invalid("malformed percent-encoding in path"), res);
    }
    if (path.rfind("/blobs/", 0) == 0) {
      if (req.method == "PUT") return HandleBlobPut(req, res, reader, path, query);
      if (req.method == "GET" || req.method == "HEAD") return HandleBlobGet(req, res, path, query);
      CloseAfter(res);
      return SendError(Status(Code::kNotFound, "blobs support only PUT and GET"), res);
    }
    if (req.method == "GET" || req.method == "HEAD") {
      if (const dashboard::Asset* asset = dashboard::FindAsset(path)) return SendAsset(*asset, res);
    }
    HandleApi(req, res, reader, std::move(path), std::move(query));
  } catch (const std::exception& e) {
    LogError("request handler threw", {{"error", e.what()}});
    CloseAfter(res);
    SendError(Status::Internal("internal error"), res);
  }
}

void HttpServer::Impl::HandleApi(const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader* reader, std::string path,
                                 std::string query) {
  core::HttpRequest r;
  r.method = req.method == "HEAD" ? "GET" : req.method;
  r.path = std::move(path);
  r.query = std::move(query);
  const int64_t limit = coord->config().max_request_body;
  if (reader != nullptr) {
    if (DeclaredLength(req) > limit) {
      DrainBody(req, reader, res);
      return SendError(
          Status(Code::kTooLarge, "request body exceeds " + std::to_string(limit) + " bytes"), res);
    }
    bool too_large = false;
    bool ok = (*reader)([&](const char* data, size_t len) {
      if (int64_t(r.body.size() + len) > limit) {
        too_large = true;
        return false;
      }
      r.body.append(data, len);
      return true;
    });
    if (!ok) {
      CloseAfter(res);
      if (too_large) {
        return SendError(
            Status(Code::kTooLarge, "request body exceeds " + std::to_string(limit) + " bytes"),
            res);
      }
      return SendError(Status::Invalid("could not read the request body"), res);
    }
  } else {
    r.body = req.body;
  }
  r.headers.reserve(req.headers.size());
  for (const auto& [name, value] : req.headers) {
    std::string lower = name;
    for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
    r.headers.emplace_back(std::move(lower), value);
  }
  r.now_ms = clock->NowMs();
  r.entropy = RandomBytes(32);
  r.request_id = res.get_header_value("X-Request-Id");

  core::Plan plan = runner->Run(coord->Handle(r));
  // /metrics: the core's database gauges, then this process's counters and histograms.
  if (r.path == "/metrics" && plan.response().status == 200) {
    plan.response().body += ProcessMetrics().Text();
  }
  SendResponse(plan.response(), res);
  // The response is final; superseded objects go now, best-effort (the core already forgot them).
  for (const std::string& key : plan.blob_deletes()) {
    Status st = blobs->Delete(key);
    if (!st.ok()) LogWarn("blob delete failed", {{"key", key}, {"error", st.ToString()}});
  }
}

void HttpServer::Impl::HandleBlobPut(const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader* reader, const std::string& path,
                                     const std::string& query) {
  auto grant = coord->AuthorizeBlob("PUT", path, query, clock->NowMs());
  if (!grant.ok()) {
    DrainBody(req, reader, res);
    return SendError(grant.status(), res);
  }
  if (!BlobStore::ValidKey(grant->key) || reader == nullptr) {
    DrainBody(req, reader, res);
    return SendError(Status::Invalid("invalid blob key"), res);
  }
  const int64_t declared = DeclaredLength(req);
  if (grant->max_size >= 0 && declared > grant->max_size) {
    DrainBody(req, reader, res);
    return SendError(Status(Code::kTooLarge, "body exceeds the URL's limit of " +
                                                 std::to_string(grant->max_size) + " bytes"),
                     res);
  }
  auto writer = blobs->BeginPut(grant->key, grant->max_size);
  if (!writer.ok()) {
    LogError("blob put failed", {{"key", grant->key}, {"error", writer.status().ToString()}});
    CloseAfter(res);
    return SendError(writer.status(), res);
  }
  Status write_status;
  int64_t discarded = 0;
  bool ok = (*reader)([&](const char* data, size_t len) {
    if (write_status.ok()) {
      write_status = (*writer)->Append(data, len);
      if (write_status.ok() || write_status.code() == Code::kTooLarge) return write_status.ok();
    }
    // The disk failed: read and drop the rest of a modest body, so that a client still sending
    // it gets the 5xx answer instead of a connection reset.
    discarded += int64_t(len);
    return discarded <= kDrainLimit;
  });
  if (!ok || !write_status.ok()) {
    if (!ok) CloseAfter(res);
    if (write_status.ok()) write_status = Status::Invalid("could not read the request body");
    if (write_status.code() != Code::kTooLarge && write_status.code() != Code::kInvalidArgument) {
      LogError("blob write failed", {{"key", grant->key}, {"error", write_status.ToString()}});
    }
    return SendError(write_status, res);
  }
  auto stored = (*writer)->Finish(grant->sha256);
  if (stored.ok()) {
    // A committed checkpoint or output is never replaced by other bytes (409).
    core::Plan allowed = runner->Run(coord->BlobPlacePlan(grant->key, stored->sha256));
    if (allowed.response().status / 100 != 2) return SendResponse(allowed.response(), res);
    Status placed = (*writer)->Place();
    if (!placed.ok()) stored = placed;
  }
  if (!stored.ok()) {
    if (stored.status().code() != Code::kInvalidArgument) {
      LogError("blob commit failed", {{"key", grant->key}, {"error", stored.status().ToString()}});
    }
    return SendError(stored.status(), res);
  }
  ProcessMetrics().AddBlobBytesWritten(stored->size);
  core::Plan plan =
      runner->Run(coord->BlobStoredPlan(grant->key, stored->size, stored->sha256, clock->NowMs()));
  SendResponse(plan.response(), res);
}

void HttpServer::Impl::HandleBlobGet(const httplib::Request& req, httplib::Response& res,
                                     const std::string& path, const std::string& query) {
  auto grant = coord->AuthorizeBlob("GET", path, query, clock->NowMs());
  if (!grant.ok()) return SendError(grant.status(), res);
  auto opened = blobs->Open(grant->key);
  if (!opened.ok()) return SendError(opened.status(), res);
  std::shared_ptr<ReadableFile> file(std::move(opened).value());
  res.status = 200;
  // One byte range (resumable downloads); httplib slices the body and sets Content-Range.
  if (!req.ranges.empty()) {
    const int64_t size = file->size();
    const auto& range = req.ranges[0];
    bool satisfiable = req.ranges.size() == 1 && size > 0 &&
                       (range.first < 0 ? range.second > 0 : range.first < size) &&
                       (range.second < 0 || range.first < 0 || range.second >= range.first);
    if (!satisfiable) {
      res.set_header("Content-Range", "bytes */" + std::to_string(size));
      SendResponse(core::HttpResponse::Error(
                       Status::Invalid("range not satisfiable (one range within the object)")),
                   res);
      res.status = 416;
      return;
    }
    res.status = 206;
  }
  res.set_content_provider(size_t(file->size()), "application/octet-stream",
                           [file](size_t offset, size_t length, httplib::DataSink& sink) {
                             char buf[64 * 1024];
                             size_t n = std::min(length, sizeof buf);
                             auto got = file->ReadAt(int64_t(offset), n, buf);
                             if (!got.ok() || *got == 0) return false;
                             return sink.write(buf, *got);
                           });
}

void HttpServer::Impl::Install() {
  // Blob bodies are bounded by their signed grant and JSON bodies by max_request_body, both
  // enforced while streaming by the handlers; httplib's own cap must let the largest object by.
  const core::CoreConfig& config = coord->config();
  svr.set_payload_max_length(
      size_t(std::max({config.max_request_body, config.max_upload_bytes,
                       config.max_checkpoint_bytes, config.max_output_bytes})));
  const int64_t max_body = config.max_request_body;
  svr.set_pre_routing_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    t_request_start = SteadyClock::now();
    res.set_header("X-Request-Id", "req_" + HexEncode(RandomBytes(8).data(), 8));
    // Methods without a streaming handler would have httplib buffer the whole body: refuse
    // anything but a small one before it is read.
    bool streamed = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                    req.method == "DELETE";
    if (!streamed && (DeclaredLength(req) > max_body || req.has_header("Transfer-Encoding"))) {
      CloseAfter(res);
      SendError(Status(Code::kTooLarge, "request body not allowed here"), res);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto with_body = [this](const httplib::Request& req, httplib::Response& res,
                          const httplib::ContentReader& reader) { Dispatch(req, res, &reader); };
  auto without_body = [this](const httplib::Request& req, httplib::Response& res) {
    Dispatch(req, res, nullptr);
  };
  svr.Get(".*", without_body);
  svr.Options(".*", without_body);
  svr.Post(".*", with_body);
  svr.Put(".*", with_body);
  svr.Patch(".*", with_body);
  svr.Delete(".*", with_body);

  // Errors produced by httplib itself (bad request line, unknown method, body over its limit)
  // still get the API's error envelope.
  svr.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty() || res.is_chunked_content_provider_ || res.content_length_ > 0) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        Code code = res.status == 404   ? Code::kNotFound
                    : res.status == 413 ? Code::kTooLarge
                    : res.status >= 500 ? Code::kInternal
                                        : Code::kInvalidArgument;
        SendError(Status(code, "HTTP " + std::to_string(res.status)), res);
        return httplib::Server::HandlerResponse::Handled;
      }));
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        LogError("request handler threw", {{"error", what}});
        CloseAfter(res);
        SendError(Status::Internal("internal error"), res);
      });
  svr.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    if (req.method.empty()) return;  // no request was parsed (connection closed or garbage)
    std::string route = RouteLabel(req.method, req.path);
    Json fields = {
        {"method", req.method}, {"path", req.path}, {"route", route}, {"status", res.status}};
    std::string id = res.get_header_value("X-Request-Id");
    if (!id.empty()) {
      double seconds = std::chrono::duration<double>(SteadyClock::now() - t_request_start).count();
      fields["request_id"] = id;
      fields["latency_ms"] = seconds * 1000.0;
      ProcessMetrics().ObserveRequest(route, req.method, res.status, seconds);
    }
    Log(res.status >= 500 ? LogLevel::kWarn : LogLevel::kInfo, "request", fields);
  });
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() {
  Stop();
}

Result<int> HttpServer::Bind() {
  if (!impl_->setup_error.empty()) {
    return Status::Internal("cannot set up TLS: " + impl_->setup_error);
  }
  try {
    // Socket options apply to the listening socket (accepted sockets inherit them), so they must
    // be set before binding. Without TCP_NODELAY every keep-alive response after the first
    // waits ~40 ms for a delayed ACK.
    httplib::Server& svr = impl_->svr;
    svr.set_tcp_nodelay(true);
    // httplib listens with a backlog of 5: a burst of connections (every agent reconnecting
    // after a restart) while the accept loop is busy or not yet running would have SYNs dropped
    // and wait 1-3 s to retry. Remember the socket, and listen again with a full backlog below.
    svr.set_socket_options([impl = impl_.get()](socket_t sock) {
      httplib::default_socket_options(sock);
      impl->listen_fd = int(sock);
    });
    const size_t threads = size_t(impl_->options.threads);
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    svr.set_keep_alive_timeout(time_t(std::ceil(impl_->options.keep_alive_timeout_s)));
    // httplib closes a keep-alive connection after 5 requests by default: every agent and
    // client would reconnect (and queue for a worker again) every 5 requests.
    svr.set_keep_alive_max_count(100000);
    // Uploads from home connections stall now and then; httplib's default (5 s) is too eager.
    const double io = impl_->options.io_timeout_s;
    const time_t io_s = time_t(io), io_us = time_t((io - double(io_s)) * 1e6);
    svr.set_read_timeout(io_s, io_us);
    svr.set_write_timeout(io_s, io_us);
    int port;
    if (impl_->options.port == 0) {
      port = impl_->svr.bind_to_any_port(impl_->options.host);
    } else {
      port = impl_->svr.bind_to_port(impl_->options.host, impl_->options.port) ? impl_->options.port
                                                                               : -1;
    }
    if (port <= 0) {
      return Status::Io("cannot listen on " + impl_->options.host + ":" +
                        std::to_string(impl_->options.port) + " (address in use or invalid?)");
    }
    if (impl_->listen_fd >= 0 && ::listen(impl_->listen_fd, SOMAXCONN) != 0) {
      return Status::Io(std::string("cannot enlarge the listen backlog: ") + std::strerror(errno));
    }
    return port;
  } catch (const std::exception& e) {
    return Status::Io(std::string("cannot listen: ") + e.what());
  }
}

Status HttpServer::Serve(const core::Coordinator* coordinator, PlanRunner* runner, BlobStore* blobs,
                         const Clock* clock) {
  impl_->coord = coordinator;
  impl_->runner = runner;
  impl_->blobs = blobs;
  impl_->clock = clock;
  try {
    impl_->Install();
    impl_->serving = true;
    if (impl_->stopping) return Status::Ok();
    bool ok = impl_->svr.listen_after_bind();
    impl_->serving = false;
    if (!ok && !impl_->stopping) return Status::Io("HTTP server stopped unexpectedly");
    return Status::Ok();
  } catch (const std::exception& e) {
    impl_->serving = false;
    return Status::Internal(std::string("HTTP server failed: ") + e.what());
  }
}

void HttpServer::Stop() {
  impl_->stopping = true;
  // listen_after_bind() may not have started yet; stop() is a no-op until it has.
  for (int i = 0; i < 400 && impl_->serving && !impl_->svr.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  try {
    impl_->svr.stop();
  } catch (...) {
  }
}

}  // namespace gleaner::native
