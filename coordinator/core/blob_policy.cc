#include "coordinator/core/blob_policy.h"

#include <algorithm>

namespace gleaner::core {

const std::vector<BlobRefusalRow>& BlobRefusalTable() {
  using R = BlobRefusal;
  static const std::vector<BlobRefusalRow>* table = new std::vector<BlobRefusalRow>{
      {R::kLengthRequired, "length_required", 411, "length_required",
       "blob uploads need a Content-Length header"},
      {R::kTooLarge, "too_large", 413, "too_large", "body exceeds the URL's limit"},
      {R::kShaMismatch, "sha_mismatch", 400, "bad_request", "sha256 mismatch"},
      {R::kBodyUnreadable, "body_unreadable", 400, "bad_request",
       "could not read the request body"},
      {R::kTooSlow, "too_slow", 408, "request_timeout", "the request body arrived too slowly"},
      {R::kRangeNotSatisfiable, "range_not_satisfiable", 416, "bad_request",
       "range not satisfiable (one range within the object)"},
      {R::kUploadInProgress, "upload_in_progress", 503, "unavailable",
       "an upload to this key is in progress; retry when it has ended"},
      {R::kKeyBusy, "key_busy", 503, "unavailable",
       "too many transfers of this object at once; retry shortly"},
      {R::kAllBusy, "all_busy", 503, "unavailable",
       "too many blob transfers at once; retry shortly"},
      {R::kMethodNotAllowed, "method_not_allowed", 404, "not_found",
       "blobs support only PUT and GET"},
      {R::kNoSuchObject, "no_such_object", 404, "not_found", "no such object"},
  };
  return *table;
}

HttpResponse BlobRefusalResponse(BlobRefusal refusal, const std::string& message) {
  const BlobRefusalRow* row = nullptr;
  for (const BlobRefusalRow& r : BlobRefusalTable()) {
    if (r.refusal == refusal) row = &r;
  }
  Json body = {
      {"error", {{"code", row->code}, {"message", message.empty() ? row->message : message}}}};
  HttpResponse out = HttpResponse::Json(row->status, body);
  if (row->status == 503) out.headers.emplace_back("Retry-After", "1");
  return out;
}

std::optional<HttpResponse> BlobAdmissionTable::Admit(const std::string& key, bool put) {
  PerKey& k = keys_[key];
  std::optional<BlobRefusal> refused;
  if (put && k.put) {
    refused = BlobRefusal::kUploadInProgress;
  } else if (!put && k.gets >= limits_.max_per_key) {
    refused = BlobRefusal::kKeyBusy;
  } else if (total_ >= limits_.max_total) {
    refused = BlobRefusal::kAllBusy;
  }
  if (refused) {
    if (!k.put && k.gets == 0) keys_.erase(key);
    return BlobRefusalResponse(*refused);
  }
  if (put) {
    k.put = true;
  } else {
    ++k.gets;
  }
  ++total_;
  return std::nullopt;
}

void BlobAdmissionTable::Release(const std::string& key, bool put) {
  --total_;
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  if (put) {
    it->second.put = false;
  } else {
    --it->second.gets;
  }
  if (!it->second.put && it->second.gets == 0) keys_.erase(it);
}

std::optional<HttpResponse> CheckPutHead(const BlobGrant& grant, int64_t content_length,
                                         bool length_required) {
  if (content_length < 0 && length_required) {
    return BlobRefusalResponse(BlobRefusal::kLengthRequired);
  }
  if (content_length >= 0 && OverPutLimit(grant, content_length)) {
    return BlobRefusalResponse(
        BlobRefusal::kTooLarge,
        "body exceeds the URL's limit of " + std::to_string(grant.max_size) + " bytes");
  }
  return std::nullopt;
}

bool OverPutLimit(const BlobGrant& grant, int64_t size) {
  return grant.max_size >= 0 && size > grant.max_size;
}

std::optional<HttpResponse> CheckPutBody(const BlobGrant& grant, int64_t size,
                                         const std::string& sha256) {
  if (auto over = CheckPutHead(grant, size, false)) return over;
  if (!grant.sha256.empty() && grant.sha256 != sha256) {
    return BlobRefusalResponse(
        BlobRefusal::kShaMismatch,
        "sha256 mismatch: body hashes to " + sha256 + ", URL expects " + grant.sha256);
  }
  return std::nullopt;
}

int64_t BlobTransferBudgetMs(const BlobRateLimit& limit, int64_t elapsed_ms, int64_t moved,
                             int64_t extra) {
  const int64_t allowed =
      limit.grace_ms + (moved + extra) * 1000 / std::max<int64_t>(1, limit.min_rate);
  return allowed - elapsed_ms;
}

HttpResponse TooSlowResponse(const BlobRateLimit& limit) {
  return BlobRefusalResponse(BlobRefusal::kTooSlow, "the request body arrived slower than " +
                                                        std::to_string(limit.min_rate) +
                                                        " bytes per second on average");
}

RangeResult ParseRange(std::string_view value, int64_t size, ByteRange* out) {
  value = TrimOws(value);
  size_t eq = value.find('=');
  if (eq == std::string_view::npos || !EqualsIgnoreCase(TrimOws(value.substr(0, eq)), "bytes")) {
    return RangeResult::kIgnore;
  }
  // Parse every element first: one invalid element makes the whole header ignorable.
  size_t count = 0;
  bool valid = true;
  bool suffix = false;
  int64_t first = 0, last = -1;  // last -1: open ("a-")
  ForEachElement(value.substr(eq + 1), [&](std::string_view e) {
    if (e.empty() || !valid) return;  // empty list elements do not count
    ++count;
    size_t dash = e.find('-');
    if (dash == std::string_view::npos) {
      valid = false;
      return;
    }
    std::string_view a = e.substr(0, dash), b = e.substr(dash + 1);
    int64_t x = 0, y = 0;
    if (a.empty()) {  // "-n": the last n bytes
      valid = ParseDecimal(b, &y);
      suffix = true;
      last = y;
    } else if (b.empty()) {  // "a-"
      valid = ParseDecimal(a, &x);
      suffix = false;
      first = x;
      last = -1;
    } else {
      valid = ParseDecimal(a, &x) && ParseDecimal(b, &y) && x <= y;
      suffix = false;
      first = x;
      last = y;
    }
  });
  if (!valid || count == 0) return RangeResult::kIgnore;
  if (count > 1) return RangeResult::kMultiple;
  if (size <= 0) return RangeResult::kUnsatisfiable;
  if (suffix) {
    if (last == 0) return RangeResult::kUnsatisfiable;
    out->first = last >= size ? 0 : size - last;
    out->last = size - 1;
    return RangeResult::kSatisfiable;
  }
  if (first >= size) return RangeResult::kUnsatisfiable;
  out->first = first;
  out->last = (last < 0 || last >= size) ? size - 1 : last;
  return RangeResult::kSatisfiable;
}

BlobRead DecideBlobRead(const std::string* range, int64_t size) {
  BlobRead read;
  read.length = size;
  read.headers.emplace_back("Accept-Ranges", "bytes");
  if (range == nullptr) return read;
  ByteRange br;
  switch (ParseRange(*range, size, &br)) {
    case RangeResult::kIgnore:
      break;
    case RangeResult::kSatisfiable:
      read.status = 206;
      read.first = br.first;
      read.length = br.last - br.first + 1;
      read.headers.emplace_back("Content-Range", "bytes " + std::to_string(br.first) + "-" +
                                                     std::to_string(br.last) + "/" +
                                                     std::to_string(size));
      break;
    case RangeResult::kUnsatisfiable:
    case RangeResult::kMultiple: {
      HttpResponse r = BlobRefusalResponse(BlobRefusal::kRangeNotSatisfiable);
      r.headers.emplace_back("Content-Range", "bytes */" + std::to_string(size));
      read.refusal = std::move(r);
      read.status = 416;
      break;
    }
  }
  return read;
}

}  // namespace gleaner::core
