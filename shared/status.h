// Status and Result<T>: how errors cross module boundaries in Gleaner.
//
// Contract: no exceptions anywhere in the portable code (it builds with -fno-exceptions);
// a function that can fail returns Status or Result<T>. Status is cheap to copy when ok.
// Codes map one-to-one onto the API's error codes and HTTP statuses (see HttpStatusOf).
// Thread-compatible: distinct objects may be used from distinct threads.
#pragma once

#include <cassert>
#include <string>
#include <utility>

namespace gleaner {

enum class Code {
  kOk = 0,
  kInvalidArgument,   // 400 bad_request
  kUnauthenticated,   // 401 unauthenticated
  kPermissionDenied,  // 403 forbidden
  kNotFound,          // 404 not_found
  kConflict,          // 409 conflict (lost lease, wrong state, fenced write)
  kTooLarge,          // 413 too_large
  kRateLimited,       // 429 rate_limited
  kInternal,          // 500 internal
  kUnavailable,       // 503 unavailable (retry later)
  kNoSpace,           // 507 insufficient_storage
  kCorruption,        // data failed a check (sha256, magic, bounds)
  kIo,                // an I/O operation failed
};

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status Invalid(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status Conflict(std::string m) { return Status(Code::kConflict, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
  static Status Io(std::string m) { return Status(Code::kIo, std::move(m)); }
  static Status Corruption(std::string m) { return Status(Code::kCorruption, std::move(m)); }
  static Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: <message>", for logs and CLI lines.
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Stable lowercase name of a code, used as the API's error.code ("bad_request", "conflict", ...).
const char* CodeName(Code code);
// HTTP status that an API error of this code is answered with.
int HttpStatusOf(Code code);

// Result<T>: a T or a non-ok Status. Accessing value() of an error is a programming error
// (asserted), never an exception.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)), has_value_(true) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {             // NOLINT: implicit by design
    assert(!status_.ok() && "Result built from an ok Status carries no value");
    if (status_.ok()) status_ = Status::Internal("Result built from ok status");
  }

  bool ok() const { return has_value_; }
  const Status& status() const { return status_; }
  T& value() & {
    assert(has_value_);
    return value_;
  }
  const T& value() const& {
    assert(has_value_);
    return value_;
  }
  T&& value() && {
    assert(has_value_);
    return std::move(value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  T value_{};
  bool has_value_ = false;
};

}  // namespace gleaner

// Early return on error: GLEANER_RETURN_IF_ERROR(expr) where expr yields a Status.
#define GLEANER_RETURN_IF_ERROR(expr) \
  do {                                \
    ::gleaner::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)
