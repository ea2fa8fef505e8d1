#include "shared/status.h"

namespace gleaner {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "bad_request";
    case Code::kUnauthenticated:
      return "unauthenticated";
    case Code::kPermissionDenied:
      return "forbidden";
    case Code::kNotFound:
      return "not_found";
    case Code::kConflict:
      return "conflict";
    case Code::kTooLarge:
      return "too_large";
    case Code::kRateLimited:
      return "rate_limited";
    case Code::kInternal:
      return "internal";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kNoSpace:
      return "insufficient_storage";
    case Code::kCorruption:
      return "corruption";
    case Code::kIo:
      return "io_error";
  }
  return "internal";
}

int HttpStatusOf(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kInvalidArgument:
      return 400;
    case Code::kUnauthenticated:
      return 401;
    case Code::kPermissionDenied:
      return 403;
    case Code::kNotFound:
      return 404;
    case Code::kConflict:
      return 409;
    case Code::kTooLarge:
      return 413;
    case Code::kRateLimited:
      return 429;
    case Code::kUnavailable:
      return 503;
    case Code::kNoSpace:
      return 507;
    case Code::kCorruption:
    case Code::kIo:
    case Code::kInternal:
      return 500;
  }
  return 500;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace gleaner
