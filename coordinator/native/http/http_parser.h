// HTTP/1.1 request framing for the coordinator's event-loop front end: sans-I/O, no sockets,
// no allocation beyond the parsed strings. The front end feeds it the bytes it read; it says how
// many it used and what it found. Everything here reads bytes from the network, so every input is
// answered with a result, never a crash, and the parsers are fuzzed (tests/fuzz/http_request).
//
// Strict where leniency lets a request be read two ways (request smuggling): a request with both
// Content-Length and Transfer-Encoding, differing Content-Lengths, a transfer coding other than
// "chunked", whitespace before a header's colon, obsolete line folding, or a bare CR is refused.
// Lenient where it is harmless: empty lines before the request line and a bare LF as line end.
// Threading: one parser per connection; no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gleaner::native::http {

struct Limits {
  size_t max_head_bytes = 16 * 1024;   // request line + headers + blank line; over → 431
  size_t max_headers = 100;            // header fields; over → 431
  size_t max_target_bytes = 8 * 1024;  // request-target; over → 414
};

enum class BodyKind { kNone, kLength, kChunked };

struct Request {
  std::string method;     // as sent; a token (RFC 9110 tchar), case-sensitive
  std::string target;     // the raw request-target (origin-form "/path?query", or "*"); not decoded
  int version_minor = 1;  // HTTP/1.<version_minor>: 0 or 1
  // In arrival order; names lowercased; values with leading/trailing spaces and tabs removed.
  std::vector<std::pair<std::string, std::string>> headers;
  BodyKind body = BodyKind::kNone;
  int64_t content_length = 0;  // with BodyKind::kLength (kLength with 0 is allowed)
  // HTTP/1.1 without "Connection: close", or HTTP/1.0 with "Connection: keep-alive".
  bool keep_alive = true;
  bool expect_continue = false;  // "Expect: 100-continue" (case-insensitive value)

  // The value of the first header with this (lowercase) name, or nullptr.
  const std::string* Header(std::string_view lower_name) const;
};

// Parses one request head (request line + header fields + empty line).
class RequestParser {
 public:
  enum class State { kNeedMore, kDone, kError };

  explicit RequestParser(Limits limits = Limits());

  // Consumes bytes of the head from data[0, len). Sets *consumed to the bytes used (on kDone:
  // exactly up to and including the blank line; bytes after it belong to the body or the next
  // request and are not consumed). May be called again with more bytes after kNeedMore; the
  // caller passes only bytes not consumed before. After kDone or kError, Reset() before reuse.
  // Bytes that were consumed on kNeedMore are kept by the parser (partial lines buffered).
  State Parse(const char* data, size_t len, size_t* consumed);

  // Valid after kDone.
  const Request& request() const { return request_; }
  Request& request() { return request_; }

  // Valid after kError: 400 (malformed), 414 (target too long), 431 (head too large or too many
  // headers), 501 (unsupported Transfer-Encoding), 505 (not HTTP/1.0 or 1.1); and one line
  // saying what was wrong (for the error body; never echoes more than 64 bytes of input).
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // True once any byte of a request line (not counting leading empty lines) was consumed: a
  // connection closed in this state lost a partial request.
  bool started() const;

  // Ready for the next request on the connection.
  void Reset();

 private:
  enum class Phase { kRequestLine, kHeaders, kDone, kError };
  bool Line(std::string_view line);  // one complete line, line end removed; false on error
  bool RequestLine(std::string_view line);
  bool HeaderLine(std::string_view line);
  bool Finish();                           // after the blank line: framing, keep-alive
  void Overflow(std::string_view prefix);  // the head passed max_head_bytes: 414 or 431
  bool Fail(int status, std::string message);

  Limits limits_;
  Request request_;
  int error_status_ = 0;
  std::string error_message_;
  std::string line_;       // the current partial line (only when a line spans calls)
  size_t head_bytes_ = 0;  // bytes of this head consumed so far, leading empty lines included
  Phase phase_ = Phase::kRequestLine;
  bool started_ = false;
};

// Decodes a request body framed by Content-Length or chunked transfer coding.
class BodyDecoder {
 public:
  enum class State { kNeedMore, kDone, kError };

  BodyDecoder() = default;
  // For a request's framing (BodyKind::kNone decodes nothing and is kDone at once).
  BodyDecoder(BodyKind kind, int64_t content_length);

  // Consumes raw bytes from data[0, len) and appends the decoded body bytes to *out (which may
  // already hold earlier body bytes; it is only appended to). Sets *consumed; on kDone, bytes
  // after the body's end are not consumed. On kError, error_message() says why (400).
  // Chunk extensions are skipped; trailer fields are read and dropped. Bounds: chunk-size at most
  // 15 hex digits, a chunk-size line or trailer line at most 4 KiB, trailers at most 16 KiB.
  State Decode(const char* data, size_t len, size_t* consumed, std::string* out);

  // Decoded body bytes produced so far (the caller enforces its own size limits with this).
  int64_t decoded() const { return decoded_; }
  bool done() const;
  const std::string& error_message() const { return error_message_; }

 private:
  enum class Phase { kLength, kSize, kData, kDataCr, kDataLf, kTrailer, kDone, kError };
  size_t LineBytes(const char* data, size_t len);  // kSize/kTrailer: takes up to one line end
  bool SizeLine(std::string_view line);
  bool TrailerLine(std::string_view line);
  bool Fail(const char* message);

  int64_t remaining_ = 0;  // kLength: bytes left; kChunked: bytes left in the current chunk
  int64_t decoded_ = 0;
  Phase phase_ = Phase::kDone;  // a default-constructed decoder has no body
  std::string line_;            // the current partial chunk-size or trailer line
  size_t trailer_bytes_ = 0;
  std::string error_message_;
};

// The reason phrase of a status code ("OK", "Not Found", ...; "Unknown" for others).
const char* ReasonPhrase(int status);

}  // namespace gleaner::native::http
