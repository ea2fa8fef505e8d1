// Blob transfer policy, sans I/O: everything a shell must decide about a /blobs/<key> transfer
// once the URL is verified (blob_urls.h), as pure functions of what the shell saw, and every
// refusal from one table of error codes. The shells only move bytes and ask:
//   native: coordinator/native/blob/ (blob_transfer.cc streams, blob_admission.h locks);
//   edge:   wasm/worker.mjs through EdgeSession (wasm/edge_session.h, "blob_*" calls).
//
// A PUT:  AdmitBlob (one upload per key; transfers per key and in all) → CheckPutHead (declared
//         length vs the URL's limit) → stream, staying within BlobTransferBudgetMs (minimum
//         average rate after a grace) and the limit → CheckPutBody (size and sha256 vs the URL)
//         → Coordinator::BlobPlacePlan / BlobStoredPlan → ReleaseBlob (before the answer).
// A GET:  AdmitBlob → DecideBlobRead (whole object, one range, or 416) → stream within the
//         budget → ReleaseBlob.
// Portable: no clock (elapsed times come from the shell), no threads: BlobAdmissionTable is
// not thread-safe (the native shell wraps it in a mutex, the edge keeps one per isolate).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/core/coordinator.h"
#include "coordinator/core/http.h"

namespace gleaner::core {

// Every way a blob transfer is refused: one row each, with its HTTP status and error code.
enum class BlobRefusal {
  kLengthRequired,       // 411 length_required: the shell stores only bodies of known length
  kTooLarge,             // 413 too_large: declared or received body over the URL's limit
  kShaMismatch,          // 400 bad_request: the body hashes to other bytes than the URL names
  kBodyUnreadable,       // 400 bad_request: the body broke off or its framing was bad
  kTooSlow,              // 408 request_timeout: below the minimum average rate
  kRangeNotSatisfiable,  // 416 bad_request: not one range within the object
  kUploadInProgress,     // 503 unavailable: another PUT of this key is running
  kKeyBusy,              // 503 unavailable: too many transfers of this object at once
  kAllBusy,              // 503 unavailable: too many blob transfers at once
  kMethodNotAllowed,     // 404 not_found: blobs support only PUT and GET/HEAD
  kNoSuchObject,         // 404 not_found
};

struct BlobRefusalRow {
  BlobRefusal refusal;
  const char* name;  // stable identifier for shells ("too_slow")
  int status;
  const char* code;     // the error code of the answer's body
  const char* message;  // the answer's message unless the caller has a more precise one
};
const std::vector<BlobRefusalRow>& BlobRefusalTable();

// The answer for a refusal: {"error":{code, message}} with the row's status; 503s carry
// Retry-After: 1. `message` says what happened with its numbers; "" uses the row's default.
HttpResponse BlobRefusalResponse(BlobRefusal refusal, const std::string& message = "");

// --- Admission -------------------------------------------------------------------------------

struct BlobAdmissionLimits {
  int max_total = 48;   // transfers at once, in all
  int max_per_key = 8;  // GETs/HEADs of one key at once (PUTs: one)
};

// Who may start a transfer: at most one PUT per key (two bodies racing for one object; 503, not
// 409: an agent retrying while its first attempt still holds the key must retry, not conclude
// its lease is lost), max_per_key reads of a key, max_total in all.
class BlobAdmissionTable {
 public:
  explicit BlobAdmissionTable(BlobAdmissionLimits limits) : limits_(limits) {}
  // nullopt: admitted (call Release once with the same arguments); else the refusal's answer.
  std::optional<HttpResponse> Admit(const std::string& key, bool put);
  void Release(const std::string& key, bool put);
  int active() const { return total_; }

 private:
  struct PerKey {
    int gets = 0;
    bool put = false;
  };
  BlobAdmissionLimits limits_;
  int total_ = 0;
  std::map<std::string, PerKey> keys_;
};

// --- Upload --------------------------------------------------------------------------------

// Before any body byte: content_length < 0 means none was declared (chunked).
// length_required: the shell cannot store a body of unknown length (the edge: R2).
std::optional<HttpResponse> CheckPutHead(const BlobGrant& grant, int64_t content_length,
                                         bool length_required);
// While streaming: true if `size` received bytes already exceed the URL's limit.
bool OverPutLimit(const BlobGrant& grant, int64_t size);
// After the whole body: its size and sha256 (lower-case hex) against the URL.
std::optional<HttpResponse> CheckPutBody(const BlobGrant& grant, int64_t size,
                                         const std::string& sha256);

// --- Minimum rate (both directions) -----------------------------------------------------------

// BlobRateLimit (config.h): CoreConfig::blob_rate().
// How long the shell may wait for the next `extra` bytes after moving `moved` in `elapsed_ms`
// (ms): a body of N bytes has grace + N / min_rate in all. <= 0: too slow already (an upload is
// answered TooSlowResponse, a download is cut off).
int64_t BlobTransferBudgetMs(const BlobRateLimit& limit, int64_t elapsed_ms, int64_t moved,
                             int64_t extra = 0);
HttpResponse TooSlowResponse(const BlobRateLimit& limit);

// --- Download ------------------------------------------------------------------------------

// The answer's shape for a GET/HEAD of an object of `size` bytes with this Range header value
// (nullptr: none). RFC 9110 §14: another unit or bad syntax is ignored (200, whole object); one
// satisfiable range is 206; a range outside the object or several ranges are 416.
struct BlobRead {
  int status = 200;    // 200 or 206; a refusal otherwise (response set)
  int64_t first = 0;   // first byte sent
  int64_t length = 0;  // bytes sent
  std::vector<std::pair<std::string, std::string>> headers;  // Accept-Ranges, Content-Range
  std::optional<HttpResponse> refusal;                       // 416 with Content-Range */size
};
BlobRead DecideBlobRead(const std::string* range, int64_t size);

// A single byte range of an object, inclusive.
struct ByteRange {
  int64_t first = 0;
  int64_t last = 0;
};
enum class RangeResult {
  kIgnore,         // not a "bytes=" range we understand (other unit, syntax error): send all
  kSatisfiable,    // *out set (clamped to the object: "bytes=5-" and "bytes=-5" resolved)
  kUnsatisfiable,  // a valid single range outside a non-empty object, or a range on an empty one
  kMultiple,       // more than one range: answered 416 (only one is supported)
};
// Interprets a Range header value for an object of `size` bytes (RFC 9110 §14.1.2).
RangeResult ParseRange(std::string_view value, int64_t size, ByteRange* out);

}  // namespace gleaner::core
