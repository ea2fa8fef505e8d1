#include "coordinator/native/blob/blob_transfer.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "coordinator/core/blob_policy.h"
#include "coordinator/native/http/http_exchange.h"
#include "coordinator/native/log.h"
#include "coordinator/native/metrics.h"
#include "coordinator/native/request_log.h"

namespace gleaner::native {

namespace {

// Bodies up to this size are read and discarded before an early error answer, so that simple
// clients that only read the response after sending everything still see it.
constexpr int64_t kDrainLimit = int64_t(8) << 20;

class Exchange {
 public:
  Exchange(const BlobDeps& deps, const core::BlobGrant& grant, HttpConn& conn,
           std::function<void()> before_answer)
      : before_answer_(std::move(before_answer)),
        deps_(deps),
        grant_(grant),
        c_(conn),
        req_(conn.parser.request()),
        start_(std::chrono::steady_clock::now()) {
    c_.decoder = http::BodyDecoder(req_.body, req_.content_length);
    keep_alive_ = req_.keep_alive;
  }

  bool Put();
  bool Get();

 private:
  enum class Read { kDone, kStopped, kBroken };
  // Decodes the body from conn.in and then the socket, handing decoded bytes to sink until the
  // body ends (kDone), sink returns false (kStopped) or the connection fails (kBroken: timeout,
  // EOF, framing error).
  template <typename Sink>
  Read ReadBody(Sink sink);
  // Reads and drops the rest of the body (up to kDrainLimit); keep-alive only if all of it came.
  void Drain();
  std::function<void()> before_answer_;  // called once, before an answer is written
  bool Respond(const core::HttpResponse& r);
  // Refuses before the body was read: drains it (unless the client waits for 100-continue).
  bool Refuse(const core::HttpResponse& r) {
    if (req_.expect_continue && !sent_continue_) {
      keep_alive_ = false;  // the client may or may not send the body now: the stream is unknown
    } else {
      Drain();
    }
    return Respond(r);
  }
  // How long the next socket read, or the write of `extra` more bytes, may wait (ms): the core's
  // minimum-rate budget, at most io_timeout. <= 0: too slow already.
  int BudgetMs(int64_t extra = 0) const {
    const int64_t elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - start_)
                                .count();
    return int(std::min<int64_t>(core::BlobTransferBudgetMs(deps_.rate, elapsed, moved_, extra),
                                 deps_.io_timeout_ms));
  }
  // The server drains: this answer is the connection's last (it says Connection: close).
  bool Stopping() const { return deps_.stopping != nullptr && deps_.stopping->load(); }
  bool SendContinue() {
    if (!req_.expect_continue || sent_continue_) return true;
    sent_continue_ = true;
    static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    return c_.transport.WriteAll(kContinue, sizeof kContinue - 1, deps_.io_timeout_ms);
  }

  const BlobDeps& deps_;
  const core::BlobGrant& grant_;  // checked by the loop
  HttpConn& c_;
  const http::Request& req_;
  bool keep_alive_ = true;
  bool sent_continue_ = false;
  bool too_slow_ = false;  // a body fell below the minimum rate
  const std::chrono::steady_clock::time_point start_;
  int64_t moved_ = 0;  // body bytes read or written on the socket
  std::string chunk_;
};

template <typename Sink>
Exchange::Read Exchange::ReadBody(Sink sink) {
  char buf[64 * 1024];
  for (;;) {
    if (c_.decoder.done()) return Read::kDone;
    if (c_.in_pos < c_.in.size()) {
      size_t used = 0;
      chunk_.clear();
      auto st =
          c_.decoder.Decode(c_.in.data() + c_.in_pos, c_.in.size() - c_.in_pos, &used, &chunk_);
      c_.in_pos += used;
      if (c_.in_pos == c_.in.size()) {
        c_.in.clear();
        c_.in_pos = 0;
      }
      if (st == http::BodyDecoder::State::kError) return Read::kBroken;
      if (!chunk_.empty() && !sink(chunk_.data(), chunk_.size())) return Read::kStopped;
      continue;
    }
    size_t n = 0;
    const int budget = BudgetMs();
    if (budget <= 0) {
      too_slow_ = true;
      return Read::kBroken;
    }
    auto io = c_.transport.ReadWait(buf, sizeof buf, &n, budget);
    if (io != Transport::Io::kOk) {
      too_slow_ = budget < deps_.io_timeout_ms && BudgetMs() <= 0;
      return Read::kBroken;
    }
    moved_ += int64_t(n);
    size_t used = 0;
    chunk_.clear();
    auto st = c_.decoder.Decode(buf, n, &used, &chunk_);
    if (used < n) c_.in.append(buf + used, n - used);  // the next request's bytes
    if (st == http::BodyDecoder::State::kError) return Read::kBroken;
    if (!chunk_.empty() && !sink(chunk_.data(), chunk_.size())) return Read::kStopped;
  }
}

void Exchange::Drain() {
  if (c_.decoder.done()) return;
  if (req_.body == http::BodyKind::kLength && req_.content_length > kDrainLimit) {
    keep_alive_ = false;
    return;
  }
  int64_t seen = 0;
  Read r = ReadBody([&](const char*, size_t n) {
    seen += int64_t(n);
    return seen <= kDrainLimit;
  });
  if (r != Read::kDone) keep_alive_ = false;
}

bool Exchange::Respond(const core::HttpResponse& r) {
  // Whatever the answer allows next (another PUT of this key) must be allowed once the client
  // has read it: the caller's hold is let go before the answer is written.
  if (before_answer_) std::exchange(before_answer_, nullptr)();
  std::string out;
  if (Stopping()) keep_alive_ = false;
  AppendResponse(&out, r, c_.meta, keep_alive_);
  if (!c_.transport.WriteAll(out.data(), out.size(), deps_.io_timeout_ms)) keep_alive_ = false;
  LogExchange(c_.meta, r.status);
  return keep_alive_;
}

bool Exchange::Put() {
  const core::BlobGrant* grant = &grant_;
  if (!BlobStore::ValidKey(grant->key)) {
    return Refuse(core::HttpResponse::Error(Status::Invalid("invalid blob key")));
  }
  const int64_t declared = req_.body == http::BodyKind::kLength ? req_.content_length : -1;
  if (auto refused = core::CheckPutHead(*grant, declared, /*length_required=*/false)) {
    return Refuse(*refused);
  }
  auto writer = deps_.blobs->BeginPut(grant->key, grant->max_size);
  if (!writer.ok()) {
    LogError("blob put failed", {{"key", grant->key}, {"error", writer.status().ToString()}});
    keep_alive_ = false;
    return Respond(core::HttpResponse::Error(writer.status()));
  }
  if (!SendContinue()) return false;
  Status write_status;
  std::optional<core::HttpResponse> refused;
  int64_t received = 0;
  Read r = ReadBody([&](const char* data, size_t n) {
    received += int64_t(n);
    if (core::OverPutLimit(*grant, received)) {
      refused = core::CheckPutBody(*grant, received, "");
      return false;
    }
    write_status = (*writer)->Append(data, n);
    return write_status.ok();
  });
  if (r == Read::kBroken) {
    writer->reset();
    keep_alive_ = false;
    return Respond(too_slow_ ? core::TooSlowResponse(deps_.rate)
                             : core::BlobRefusalResponse(core::BlobRefusal::kBodyUnreadable));
  }
  if (refused || !write_status.ok()) {
    // Over the limit, or the disk failed: drop the rest of a modest body so that a client still
    // sending it gets the answer instead of a connection reset.
    if (!refused) {
      LogError("blob write failed", {{"key", grant->key}, {"error", write_status.ToString()}});
    }
    writer->reset();  // the temp file goes before the answer
    Drain();
    return Respond(refused ? *refused : core::HttpResponse::Error(write_status));
  }
  auto stored = (*writer)->Finish("");
  if (stored.ok()) {
    if (auto mismatch = core::CheckPutBody(*grant, stored->size, stored->sha256)) {
      writer->reset();
      return Respond(*mismatch);
    }
    // A committed checkpoint or output is never replaced by other bytes (409).
    core::Plan allowed = deps_.runner->Run(deps_.coord->BlobPlacePlan(grant->key, stored->sha256));
    if (allowed.response().status / 100 != 2) {
      writer->reset();
      return Respond(allowed.response());
    }
    Status placed = (*writer)->Place();
    if (!placed.ok()) stored = placed;
  }
  writer->reset();  // placed, or its temp file removed, before the answer
  if (!stored.ok()) {
    if (stored.status().code() != Code::kInvalidArgument) {
      LogError("blob commit failed", {{"key", grant->key}, {"error", stored.status().ToString()}});
    }
    return Respond(core::HttpResponse::Error(stored.status()));
  }
  ProcessMetrics().AddBlobBytesWritten(stored->size);
  core::Plan plan = deps_.runner->Run(
      deps_.coord->BlobStoredPlan(grant->key, stored->size, stored->sha256, deps_.clock->NowMs()));
  return Respond(plan.response());
}

bool Exchange::Get() {
  // A GET carries no body; a small one is read and dropped, a large one ends the connection.
  if (!c_.decoder.done()) {
    SendContinue();
    Drain();
  }
  const core::BlobGrant* grant = &grant_;
  auto opened = deps_.blobs->Open(grant->key);
  if (!opened.ok()) return Respond(core::HttpResponse::Error(opened.status()));
  std::unique_ptr<ReadableFile> file = std::move(opened).value();
  const int64_t size = file->size();
  core::BlobRead read = core::DecideBlobRead(req_.Header("range"), size);
  if (read.refusal) return Respond(*read.refusal);
  core::HttpResponse head;
  head.status = read.status;
  head.content_type = "application/octet-stream";
  head.headers = std::move(read.headers);
  const int64_t first = read.first, length = read.length;
  if (Stopping()) keep_alive_ = false;
  std::string h = ResponseHead(head, length, c_.meta, keep_alive_);
  bool sent = c_.transport.WriteAll(h.data(), h.size(), deps_.io_timeout_ms);
  if (sent && c_.meta.method != "HEAD") {
    std::unique_ptr<char[]> buf(new char[256 * 1024]);
    int64_t at = first, end = first + length;
    while (sent && at < end) {
      auto got = file->ReadAt(at, size_t(std::min<int64_t>(end - at, 256 * 1024)), buf.get());
      if (!got.ok() || *got == 0) {
        // The head promised more bytes than there are: the client must see a broken response.
        LogError("blob read failed", {{"key", grant->key}});
        sent = false;
        break;
      }
      // A reader slower than the minimum rate is cut off (the response stays short); slices
      // keep one slow write from outliving its share of the budget.
      for (size_t off = 0; sent && off < *got;) {
        const size_t slice = std::min<size_t>(*got - off, 64 * 1024);
        const int budget = BudgetMs(int64_t(slice));
        sent = budget > 0 && c_.transport.WriteAll(buf.get() + off, slice, budget);
        off += slice;
        moved_ += int64_t(slice);
      }
      at += int64_t(*got);
    }
  }
  if (!sent) keep_alive_ = false;
  LogExchange(c_.meta, head.status);
  return keep_alive_;
}

}  // namespace

bool ServeBlob(const BlobDeps& deps, const core::BlobGrant& grant, HttpConn& conn,
               std::function<void()> before_answer) {
  Exchange x(deps, grant, conn, std::move(before_answer));
  const std::string& m = conn.meta.method;
  if (m == "PUT") return x.Put();
  if (m == "GET" || m == "HEAD") return x.Get();
  // Unknown method on a blob: answered and the connection closed (its body is unknown).
  std::string out;
  AppendResponse(&out, core::BlobRefusalResponse(core::BlobRefusal::kMethodNotAllowed), conn.meta,
                 /*keep_alive=*/false);
  conn.transport.WriteAll(out.data(), out.size(), deps.io_timeout_ms);
  LogExchange(conn.meta, 404);
  return false;
}

}  // namespace gleaner::native
