#include "coordinator/native/http/http_parser.h"

#include <algorithm>
#include <cstring>

#include "coordinator/core/http.h"

namespace gleaner::native::http {
namespace {

using core::EqualsIgnoreCase;
using core::ForEachElement;
using core::IsOws;
using core::ParseDecimal;
using core::TrimOws;

constexpr size_t kMaxChunkLine = 4 * 1024;  // a chunk-size or trailer line, CR in, LF not
constexpr size_t kMaxTrailers = 16 * 1024;  // all trailer lines together
constexpr size_t kMaxChunkDigits = 15;

// RFC 9110 tchar: the characters of a method or a field name.
struct TokenTable {
  bool t[256] = {};
  constexpr TokenTable() {
    for (int c = '0'; c <= '9'; ++c) t[c] = true;
    for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
    for (char c : {'!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~'}) {
      t[static_cast<unsigned char>(c)] = true;
    }
  }
};
constexpr TokenTable kToken;

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!kToken.t[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

// Field values and chunk extensions: visible ASCII, SP, HTAB and obs-text; no other controls.
bool IsFieldText(std::string_view s) {
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) return false;
  }
  return true;
}

char Lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// At most 64 bytes of input, non-printable bytes replaced, for an error message.
std::string Quote(std::string_view s) {
  std::string q = "\"";
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    char c = s[i];
    q += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > 64) q += "...";
  q += '"';
  return q;
}

// Checks one header or trailer field line (line end removed, non-empty). On success sets
// *colon to the index of the colon and returns nullptr; otherwise returns what is wrong.
const char* CheckFieldLine(std::string_view line, size_t* colon) {
  if (IsOws(line.front())) return "obsolete line folding (a line starting with whitespace)";
  size_t c = line.find(':');
  if (c == std::string_view::npos) return "header field without a colon";
  if (c == 0) return "empty header field name";
  if (IsOws(line[c - 1])) return "whitespace between a header field name and its colon";
  if (!IsToken(line.substr(0, c))) return "invalid character in a header field name";
  if (!IsFieldText(line.substr(c + 1))) return "control character in a header field value";
  *colon = c;
  return nullptr;
}

}  // namespace

const std::string* Request::Header(std::string_view lower_name) const {
  for (const auto& h : headers) {
    if (h.first == lower_name) return &h.second;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// RequestParser

RequestParser::RequestParser(Limits limits) : limits_(limits) {}

bool RequestParser::started() const {
  return started_;
}

void RequestParser::Reset() {
  // Clearing (not replacing) keeps the capacity of the strings and the header vector.
  request_.method.clear();
  request_.target.clear();
  request_.version_minor = 1;
  request_.headers.clear();
  request_.body = BodyKind::kNone;
  request_.content_length = 0;
  request_.keep_alive = true;
  request_.expect_continue = false;
  error_status_ = 0;
  error_message_.clear();
  line_.clear();
  head_bytes_ = 0;
  phase_ = Phase::kRequestLine;
  started_ = false;
}

bool RequestParser::Fail(int status, std::string message) {
  phase_ = Phase::kError;
  error_status_ = status;
  error_message_ = std::move(message);
  return false;
}

RequestParser::State RequestParser::Parse(const char* data, size_t len, size_t* consumed) {
  *consumed = 0;
  if (phase_ == Phase::kDone) return State::kDone;
  if (phase_ == Phase::kError) return State::kError;
  size_t pos = 0;
  while (pos < len) {
    const char* start = data + pos;
    const void* nl = memchr(start, '\n', len - pos);
    size_t take = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) + 1 : len - pos;
    if (head_bytes_ + take > limits_.max_head_bytes) {
      // The head is too large whether or not this line ever ends: refuse now. The verdict only
      // looks at the first max_head_bytes of the head, so it does not depend on how it was split.
      size_t room = limits_.max_head_bytes - head_bytes_;
      std::string prefix = line_;
      prefix.append(start, room);
      *consumed = pos + room;
      if (phase_ == Phase::kRequestLine && !prefix.empty() && prefix != "\r") started_ = true;
      Overflow(prefix);
      return State::kError;
    }
    head_bytes_ += take;
    pos += take;
    if (!nl) {
      line_.append(start, take);
      if (phase_ == Phase::kRequestLine && line_ != "\r") started_ = true;
      break;
    }
    std::string_view line;
    if (line_.empty()) {
      line = std::string_view(start, take - 1);
    } else {
      line_.append(start, take - 1);
      line = line_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool ok = Line(line);
    line_.clear();
    if (!ok) {
      *consumed = pos;
      return State::kError;
    }
    if (phase_ == Phase::kDone) {
      *consumed = pos;
      return State::kDone;
    }
  }
  *consumed = pos;
  return State::kNeedMore;
}

void RequestParser::Overflow(std::string_view prefix) {
  if (phase_ == Phase::kRequestLine) {
    // A request line cut by the head limit: if what is there is a method and the start of a
    // target already over its own limit, say so (414) rather than 431.
    size_t sp = prefix.find(' ');
    if (sp != std::string_view::npos && IsToken(prefix.substr(0, sp))) {
      std::string_view target = prefix.substr(sp + 1);
      target = target.substr(0, target.find(' '));
      if (target.size() > limits_.max_target_bytes) {
        Fail(414,
             "request target longer than " + std::to_string(limits_.max_target_bytes) + " bytes");
        return;
      }
    }
  }
  Fail(431, "request head larger than " + std::to_string(limits_.max_head_bytes) + " bytes");
}

bool RequestParser::Line(std::string_view line) {
  if (phase_ == Phase::kRequestLine && !line.empty()) started_ = true;
  if (memchr(line.data(), '\r', line.size()) != nullptr) {
    return Fail(400, "bare CR in the request head");
  }
  if (phase_ == Phase::kRequestLine) {
    if (line.empty()) return true;  // empty lines before the request line are skipped
    return RequestLine(line);
  }
  if (line.empty()) return Finish();
  return HeaderLine(line);
}

bool RequestParser::RequestLine(std::string_view line) {
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return Fail(400, "malformed request line");
  std::string_view method = line.substr(0, sp1);
  if (!IsToken(method)) return Fail(400, "invalid request method");
  std::string_view rest = line.substr(sp1 + 1);
  size_t sp2 = rest.find(' ');
  if (sp2 == std::string_view::npos) return Fail(400, "malformed request line");
  std::string_view target = rest.substr(0, sp2);
  std::string_view version = rest.substr(sp2 + 1);
  if (target.size() > limits_.max_target_bytes) {
    return Fail(
        414, "request target longer than " + std::to_string(limits_.max_target_bytes) + " bytes");
  }
  if (target.empty()) return Fail(400, "empty request target");
  for (char c : target) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return Fail(400, "invalid character in the request target");
  }
  if (version == "HTTP/1.1") {
    request_.version_minor = 1;
  } else if (version == "HTTP/1.0") {
    request_.version_minor = 0;
  } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && version[5] >= '0' &&
             version[5] <= '9' && version[6] == '.' && version[7] >= '0' && version[7] <= '9') {
    return Fail(505, "unsupported HTTP version " + Quote(version));
  } else {
    return Fail(400, "malformed HTTP version " + Quote(version));
  }
  request_.method.assign(method.data(), method.size());
  request_.target.assign(target.data(), target.size());
  phase_ = Phase::kHeaders;
  return true;
}

bool RequestParser::HeaderLine(std::string_view line) {
  if (request_.headers.size() >= limits_.max_headers) {
    return Fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
  }
  size_t colon = 0;
  if (const char* why = CheckFieldLine(line, &colon)) return Fail(400, why);
  std::string_view value = TrimOws(line.substr(colon + 1));
  request_.headers.emplace_back(std::string(line.data(), colon),
                                std::string(value.data(), value.size()));
  for (char& c : request_.headers.back().first) c = Lower(c);
  return true;
}

bool RequestParser::Finish() {
  Request& r = request_;
  bool has_length = false, has_coding = false, close = false, keep_alive = false;
  bool bad_length = false, conflicting_length = false;
  int64_t length = 0;
  size_t codings = 0;
  bool chunked_last = false, chunked_before_last = false;
  std::string_view bad_coding;
  bool expect_continue = false;
  for (const auto& [name_string, value] : r.headers) {
    std::string_view name = name_string;  // compares the size first
    if (name == "content-length") {
      // "Content-Length: 5, 5" (a list of one repeated value) is the same as "5".
      ForEachElement(value, [&](std::string_view e) {
        int64_t v = 0;
        if (!ParseDecimal(e, &v)) {
          bad_length = true;
        } else if (has_length && v != length) {
          conflicting_length = true;
        } else {
          has_length = true;
          length = v;
        }
      });
    } else if (name == "transfer-encoding") {
      has_coding = true;
      ForEachElement(value, [&](std::string_view e) {
        if (e.empty()) return;  // empty list elements do not count (RFC 9110 §5.6.1)
        if (chunked_last) chunked_before_last = true;
        ++codings;
        chunked_last = EqualsIgnoreCase(e, "chunked");
        if (!chunked_last) bad_coding = e;
      });
    } else if (name == "connection") {
      ForEachElement(value, [&](std::string_view e) {
        if (EqualsIgnoreCase(e, "close")) close = true;
        if (EqualsIgnoreCase(e, "keep-alive")) keep_alive = true;
      });
    } else if (name == "expect") {
      if (EqualsIgnoreCase(value, "100-continue")) expect_continue = true;
    }
  }
  if (bad_length) return Fail(400, "invalid Content-Length");
  if (conflicting_length) return Fail(400, "conflicting Content-Length values");
  if (has_length && has_coding) return Fail(400, "both Content-Length and Transfer-Encoding");
  if (has_coding) {
    if (r.version_minor == 0) return Fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    // RFC 9112 §6.3: when chunked is not the final coding the length cannot be known (400);
    // other codings before a final chunked are well framed but not supported here (501).
    if (!chunked_last || chunked_before_last) {
      return Fail(400, "Transfer-Encoding does not end in a single chunked");
    }
    if (codings > 1) return Fail(501, "unsupported transfer coding " + Quote(bad_coding));
    r.body = BodyKind::kChunked;
  } else if (has_length) {
    r.body = BodyKind::kLength;
    r.content_length = length;
  }
  r.keep_alive = !close && (r.version_minor == 1 || keep_alive);
  // An HTTP/1.0 client cannot expect 100 Continue (RFC 9110 §10.1.1).
  r.expect_continue = expect_continue && r.version_minor == 1;
  phase_ = Phase::kDone;
  return true;
}

// ---------------------------------------------------------------------------------------------
// BodyDecoder

BodyDecoder::BodyDecoder(BodyKind kind, int64_t content_length) {
  switch (kind) {
    case BodyKind::kNone:
      phase_ = Phase::kDone;
      break;
    case BodyKind::kLength:
      if (content_length < 0) {
        Fail("negative Content-Length");
      } else {
        remaining_ = content_length;
        phase_ = content_length == 0 ? Phase::kDone : Phase::kLength;
      }
      break;
    case BodyKind::kChunked:
      phase_ = Phase::kSize;
      break;
  }
}

bool BodyDecoder::done() const {
  return phase_ == Phase::kDone;
}

bool BodyDecoder::Fail(const char* message) {
  phase_ = Phase::kError;
  error_message_ = message;
  return false;
}

BodyDecoder::State BodyDecoder::Decode(const char* data, size_t len, size_t* consumed,
                                       std::string* out) {
  size_t pos = 0;
  while (pos < len && phase_ != Phase::kDone && phase_ != Phase::kError) {
    switch (phase_) {
      case Phase::kLength:
      case Phase::kData: {
        size_t n = len - pos;
        if (static_cast<uint64_t>(remaining_) < n) n = static_cast<size_t>(remaining_);
        out->append(data + pos, n);
        pos += n;
        remaining_ -= static_cast<int64_t>(n);
        decoded_ += static_cast<int64_t>(n);
        if (remaining_ == 0) phase_ = phase_ == Phase::kLength ? Phase::kDone : Phase::kDataCr;
        break;
      }
      case Phase::kDataCr: {
        char c = data[pos++];
        if (c == '\r') {
          phase_ = Phase::kDataLf;
        } else if (c == '\n') {
          phase_ = Phase::kSize;
        } else {
          Fail("chunk data not followed by CRLF");
        }
        break;
      }
      case Phase::kDataLf:
        if (data[pos++] == '\n') {
          phase_ = Phase::kSize;
        } else {
          Fail("bare CR after chunk data");
        }
        break;
      case Phase::kSize:
      case Phase::kTrailer:
        pos += LineBytes(data + pos, len - pos);
        break;
      case Phase::kDone:
      case Phase::kError:
        break;
    }
  }
  *consumed = pos;
  if (phase_ == Phase::kDone) return State::kDone;
  if (phase_ == Phase::kError) return State::kError;
  return State::kNeedMore;
}

size_t BodyDecoder::LineBytes(const char* data, size_t len) {
  const void* nl = memchr(data, '\n', len);
  size_t take = nl ? static_cast<size_t>(static_cast<const char*>(nl) - data) + 1 : len;
  size_t line_len = line_.size() + (nl ? take - 1 : take);  // a CR counts, the LF does not
  bool trailer = phase_ == Phase::kTrailer;
  // Past a bound, the bytes used are those up to the first one over it, and both trailer bounds
  // give one message, so the outcome does not depend on how the bytes arrived.
  size_t over = SIZE_MAX;
  if (line_len > kMaxChunkLine) over = kMaxChunkLine - line_.size() + 1;
  if (trailer && trailer_bytes_ + take > kMaxTrailers) {
    over = std::min(over, kMaxTrailers - trailer_bytes_ + 1);
  }
  if (over != SIZE_MAX) {
    Fail(trailer ? "trailer fields too large" : "chunk-size line too long");
    return over;
  }
  if (trailer) trailer_bytes_ += take;
  if (!nl) {
    line_.append(data, take);
    return take;
  }
  std::string_view line;
  if (line_.empty()) {
    line = std::string_view(data, take - 1);
  } else {
    line_.append(data, take - 1);
    line = line_;
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (memchr(line.data(), '\r', line.size()) != nullptr) {
    Fail("bare CR in chunked framing");
  } else if (trailer) {
    TrailerLine(line);
  } else {
    SizeLine(line);
  }
  line_.clear();
  return take;
}

bool BodyDecoder::SizeLine(std::string_view line) {
  int64_t size = 0;
  size_t i = 0;
  for (; i < line.size(); ++i) {
    int d = HexValue(line[i]);
    if (d < 0) break;
    if (i == kMaxChunkDigits) return Fail("chunk size over 15 hex digits");
    size = size * 16 + d;
  }
  if (i == 0) return Fail("invalid chunk size");
  std::string_view ext = line.substr(i);
  while (!ext.empty() && IsOws(ext.front())) ext.remove_prefix(1);
  // Extensions (";name=value...") are skipped; only their characters are checked.
  if (!ext.empty() && (ext.front() != ';' || !IsFieldText(ext))) {
    return Fail("invalid chunk-size line");
  }
  if (size == 0) {
    phase_ = Phase::kTrailer;
    trailer_bytes_ = 0;
  } else {
    remaining_ = size;
    phase_ = Phase::kData;
  }
  return true;
}

bool BodyDecoder::TrailerLine(std::string_view line) {
  if (line.empty()) {
    phase_ = Phase::kDone;
    return true;
  }
  size_t colon = 0;
  if (const char* why = CheckFieldLine(line, &colon)) return Fail(why);
  return true;  // trailer fields are dropped
}

// ---------------------------------------------------------------------------------------------
// Ranges and reason phrases

const char* ReasonPhrase(int status) {
  static constexpr struct {
    int status;
    const char* phrase;
  } kPhrases[] = {
      {100, "Continue"},
      {101, "Switching Protocols"},
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {204, "No Content"},
      {206, "Partial Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {303, "See Other"},
      {304, "Not Modified"},
      {307, "Temporary Redirect"},
      {308, "Permanent Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {406, "Not Acceptable"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {410, "Gone"},
      {411, "Length Required"},
      {412, "Precondition Failed"},
      {413, "Content Too Large"},
      {414, "URI Too Long"},
      {415, "Unsupported Media Type"},
      {416, "Range Not Satisfiable"},
      {417, "Expectation Failed"},
      {422, "Unprocessable Content"},
      {425, "Too Early"},
      {426, "Upgrade Required"},
      {428, "Precondition Required"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
      {505, "HTTP Version Not Supported"},
      {507, "Insufficient Storage"},
  };
  for (const auto& p : kPhrases) {
    if (p.status == status) return p.phrase;
  }
  return "Unknown";
}

}  // namespace gleaner::native::http
