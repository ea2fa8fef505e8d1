// The coordinator's HTTP shell (see http_server.h): core plans driven on the event loop.
#include "coordinator/native/http_server.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "coordinator/dashboard/assets.h"
#include "coordinator/native/blob/blob_admission.h"
#include "coordinator/native/blob/blob_transfer.h"
#include "coordinator/native/db/read_pool.h"
#include "coordinator/native/http/event_loop.h"
#include "coordinator/native/log.h"
#include "coordinator/native/metrics.h"
#include "coordinator/native/request_log.h"
#include "shared/sha256.h"

namespace gleaner::native {

namespace {

using PlanPtr = std::shared_ptr<core::Plan>;

// An embedded dashboard file (public: it holds no data; every API call needs a token).
core::HttpResponse AssetResponse(const dashboard::Asset& a) {
  core::HttpResponse r;
  r.status = 200;
  r.content_type = a.content_type;
  r.body.assign(reinterpret_cast<const char*>(a.data), a.size);
  r.headers = {{"Cache-Control", "no-cache"},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Frame-Options", "DENY"},
               {"Content-Security-Policy",
                "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                "frame-ancestors 'none'"}};
  return r;
}

// Requests to the core's plans, on the loop thread. A plan lives in the callbacks that wait for
// its batches, so a connection that closes meanwhile takes nothing with it.
class PlanHandler : public HttpHandler {
 public:
  PlanHandler(EventLoop* loop, const core::Coordinator* coord, GroupCommitter* committer,
              ReadPool* reads, BlobDeps blob_deps, BlobAdmission* admission)
      : loop_(loop),
        coord_(coord),
        committer_(committer),
        reads_(reads),
        blob_deps_(blob_deps),
        admission_(admission),
        max_body_(coord->config().max_request_body) {}

  HeadAction OnHead(HttpConn* c) override;
  void OnRequest(HttpConn* c) override;
  void EndTurn() override;
  void Answered(const RequestMeta& meta, int status) override { LogExchange(meta, status); }

 private:
  // Runs the plan as far as it goes without the database; hands its next batch over.
  void Advance(HttpConn* c, PlanPtr plan);

  EventLoop* loop_;
  const core::Coordinator* coord_;
  GroupCommitter* committer_;
  ReadPool* reads_;
  BlobDeps blob_deps_;
  BlobAdmission* admission_;
  int64_t max_body_;
  // Batches of this loop turn, handed over together at its end (one wake-up each).
  BatchItems read_batches_, write_batches_;
};

HeadAction PlanHandler::OnHead(HttpConn* c) {
  if (c->meta.path.rfind("/blobs/", 0) != 0) return HeadAction::ReadBody(max_body_);
  const std::string& method = c->meta.method;
  c->meta.request_id = NewRequestId();
  core::BlobGrant grant;
  // The signature is checked here, before a worker is taken: a request without a valid URL
  // must not hold one while it waits for (or dribbles) a body it announced.
  if (method == "PUT" || method == "GET" || method == "HEAD") {
    auto checked = coord_->AuthorizeBlob(method == "PUT" ? "PUT" : "GET", c->meta.path,
                                         c->meta.query, blob_deps_.clock->NowMs());
    if (!checked.ok()) return HeadAction::Answer(core::HttpResponse::Error(checked.status()));
    grant = std::move(checked).value();
  }
  // One upload per key, bounded transfers per key and in all: refused here, on the loop, so a
  // refused client never holds a worker.
  std::shared_ptr<BlobAdmission::Ticket> ticket;
  if (!grant.key.empty()) {
    core::HttpResponse refused;
    ticket = admission_->Admit(grant.key, method == "PUT", &refused);
    if (!ticket) return HeadAction::Answer(std::move(refused));
  }
  return HeadAction::TakeOver(
      [deps = blob_deps_, grant = std::move(grant), ticket](HttpConn& conn) mutable {
        // The slot is freed before the answer is written (a PUT's next PUT must find it free),
        // and at the latest when the transfer ends (a download's body).
        bool keep = ServeBlob(deps, grant, conn, [&ticket] { ticket.reset(); });
        ticket.reset();
        return keep;
      });
}

void PlanHandler::OnRequest(HttpConn* c) {
  const std::string& method = c->meta.method;
  if (method == "GET" || method == "HEAD") {
    if (const dashboard::Asset* asset = dashboard::FindAsset(c->meta.path)) {
      return loop_->Respond(c, AssetResponse(*asset));
    }
  }
  core::HttpRequest r;
  r.method = method == "HEAD" ? "GET" : method;
  r.path = c->meta.path;
  r.query = std::move(c->meta.query);
  r.headers = std::move(c->parser.request().headers);
  r.body = std::move(c->body);
  r.now_ms = blob_deps_.clock->NowMs();
  r.entropy = RandomBytes(32);
  r.client_addr = c->peer_addr;
  c->meta.request_id = NewRequestId();
  r.request_id = c->meta.request_id;
  Advance(c, std::make_shared<core::Plan>(coord_->Handle(r)));
}

void PlanHandler::Advance(HttpConn* c, PlanPtr plan) {
  if (plan->done()) {
    core::HttpResponse& resp = plan->response();
    // /metrics: the core's database gauges, then this process's counters and histograms.
    if (c->meta.path == "/metrics" && resp.status == 200) resp.body += ProcessMetrics().Text();
    std::vector<std::string> deletes = std::move(plan->blob_deletes());
    loop_->Respond(c, resp);
    // The response is final; superseded objects go now, best-effort (the core forgot them).
    if (!deletes.empty()) {
      BlobStore* store = blob_deps_.blobs;
      loop_->RunOnWorker([store, deletes] {
        for (const std::string& key : deletes) {
          Status st = store->Delete(key);
          if (!st.ok()) LogWarn("blob delete failed", {{"key", key}, {"error", st.ToString()}});
        }
      });
    }
    return;
  }
  auto done = [this, c, plan](core::BatchResult result) {
    loop_->Post(c, [this, plan, result = std::move(result)](HttpConn* conn) mutable {
      *plan = plan->Continue(std::move(result));
      Advance(conn, plan);
    });
  };
  (plan->batch().writes() ? write_batches_ : read_batches_)
      .emplace_back(&plan->batch(), std::move(done));
}

void PlanHandler::EndTurn() {
  if (!read_batches_.empty()) reads_->SubmitAll(std::move(read_batches_));
  if (!write_batches_.empty()) committer_->SubmitAll(std::move(write_batches_));
  read_batches_.clear();
  write_batches_.clear();
}

}  // namespace

HttpServer::HttpServer(HttpServerOptions options)
    : db_readers_(options.db_readers), loop_(std::move(options.loop)) {}

HttpServer::~HttpServer() {
  Stop();
}

Result<int> HttpServer::Bind() {
  return loop_.Bind();
}

Status HttpServer::Serve(const core::Coordinator* coordinator, PlanRunner* runner, BlobStore* blobs,
                         const Clock* clock) {
  auto committer = runner->Committer();
  if (!committer.ok()) return committer.status();
  auto reads = ReadPool::Start(runner->db(), db_readers_);
  if (!reads.ok()) return reads.status();
  BlobDeps deps;
  deps.coord = coordinator;
  deps.runner = runner;
  deps.blobs = blobs;
  deps.clock = clock;
  deps.io_timeout_ms = int(loop_.options().io_timeout_s * 1000);
  deps.stopping = loop_.stopping();
  deps.rate = coordinator->config().blob_rate();
  // Transfers hold workers; a few are always left for background tasks and for the transfers
  // of other clients.
  const int workers = loop_.options().workers;
  core::BlobAdmissionLimits limits;
  limits.max_total = std::max(1, workers - std::max(2, workers / 8));
  limits.max_per_key = std::max(1, std::min(8, limits.max_total / 4));
  BlobAdmission admission(limits);
  PlanHandler handler(&loop_, coordinator, *committer, reads->get(), deps, &admission);
  // Returns once every connection is closed and the workers are idle; the read pool goes after.
  return loop_.Serve(&handler);
}

void HttpServer::Stop() {
  loop_.Stop();
}

}  // namespace gleaner::native
