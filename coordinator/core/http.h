// HTTP request and response as the core sees them: plain values, no sockets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::core {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path without query, e.g. "/v1/jobs/j_ab12"
  std::string query;   // raw query string without '?', e.g. "state=pending&limit=10"
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercase
  std::string body;
  int64_t now_ms = 0;   // the shell's clock, Unix milliseconds
  std::string entropy;  // >= 32 random bytes from the shell (ids, tokens, nonces)
  std::string request_id;
  // The client's address as the shell knows it ("203.0.113.7", "2001:db8::1"), "" if unknown:
  // the native shell's TCP peer, the edge shell's CF-Connecting-IP. Used for per-address
  // limits (enroll registrations), never for authentication.
  std::string client_addr;

  // First header with this lowercase name, or "".
  const std::string& Header(const std::string& lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string content_type = "application/json";

  static HttpResponse Json(int status, const gleaner::Json& body);
  static HttpResponse NoContent();
  // {"error":{"code","message"}} with the HTTP status of st.code().
  static HttpResponse Error(const Status& st);
};

// Query string parameters (application/x-www-form-urlencoded decoding).
class QueryParams {
 public:
  explicit QueryParams(const std::string& raw);
  // Value of the first occurrence of name; false if absent.
  bool Get(const std::string& name, std::string* out) const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

std::string UrlEncode(const std::string& s);  // RFC 3986 unreserved kept, everything else %XX
bool UrlDecode(const std::string& s, std::string* out, bool plus_is_space);

// The request path every route sees: an origin-form path ("/..."; no query) percent-decoded,
// escapes turned into bytes as they are (no UTF-8 check, no '+' rule). False when it does not
// start with '/' or an escape is malformed; the request then gets MalformedTarget(). Both shells
// decode with this (the native one from its request-target, the edge one from the URL's
// pathname), so a path means the same on both.
bool DecodePath(const std::string& raw, std::string* out);
HttpResponse MalformedTarget();  // 400 bad_request "malformed request target"

// Field-value pieces of RFC 9110, shared by the native HTTP parser and the blob policy.
bool IsOws(char c);                                                 // SP or HTAB
std::string_view TrimOws(std::string_view s);                       // OWS off both ends
bool EqualsIgnoreCase(std::string_view a, std::string_view lower);  // lower: lower-case ASCII
bool ParseDecimal(std::string_view s, int64_t* out);  // 1*DIGIT, non-negative; false on overflow
// Calls f(element) for each comma-separated element of a list value, OWS trimmed, empty
// elements included (callers decide whether an empty element is an error).
template <typename F>
void ForEachElement(std::string_view list, F f) {
  while (true) {
    size_t comma = list.find(',');
    f(TrimOws(list.substr(0, comma)));
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

// "2026-11-21T06:00:00.123Z" from Unix milliseconds.
std::string FormatTime(int64_t unix_ms);

// Parses "2026-11-21T06:00:00Z", "2026-11-21T06:00:00.123Z", "2026-11-21" (UTC midnight) or
// integer Unix seconds ("1795759200") into Unix milliseconds. False on anything else.
bool ParseTime(const std::string& text, int64_t* unix_ms);

}  // namespace gleaner::core
