#include "coordinator/core/http.h"

#include <cstdio>

namespace gleaner::core {

const std::string& HttpRequest::Header(const std::string& lower_name) const {
  static const std::string kEmpty;
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return kEmpty;
}

HttpResponse HttpResponse::Json(int status, const gleaner::Json& body) {
  HttpResponse r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

HttpResponse HttpResponse::NoContent() {
  HttpResponse r;
  r.status = 204;
  r.content_type.clear();
  return r;
}

bool IsOws(char c) {
  return c == ' ' || c == '\t';
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const char c = (a[i] >= 'A' && a[i] <= 'Z') ? char(a[i] - 'A' + 'a') : a[i];
    if (c != lower[i]) return false;
  }
  return true;
}

bool ParseDecimal(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    int d = c - '0';
    if (v > (INT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

HttpResponse HttpResponse::Error(const Status& st) {
  gleaner::Json body = {{"error", {{"code", CodeName(st.code())}, {"message", st.message()}}}};
  return Json(HttpStatusOf(st.code()), body);
}

QueryParams::QueryParams(const std::string& raw) {
  size_t pos = 0;
  while (pos <= raw.size()) {
    size_t amp = raw.find('&', pos);
    if (amp == std::string::npos) amp = raw.size();
    std::string part = raw.substr(pos, amp - pos);
    if (!part.empty()) {
      size_t eq = part.find('=');
      std::string k, v;
      bool ok = UrlDecode(part.substr(0, eq), &k, true);
      if (eq != std::string::npos) ok = ok && UrlDecode(part.substr(eq + 1), &v, true);
      if (ok) params_.emplace_back(std::move(k), std::move(v));
    }
    pos = amp + 1;
  }
}

bool QueryParams::Get(const std::string& name, std::string* out) const {
  for (const auto& [k, v] : params_) {
    if (k == name) {
      *out = v;
      return true;
    }
  }
  return false;
}

std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(char(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

bool DecodePath(const std::string& raw, std::string* out) {
  return !raw.empty() && raw[0] == '/' && UrlDecode(raw, out, /*plus_is_space=*/false);
}

HttpResponse MalformedTarget() {
  return HttpResponse::Json(
      400, {{"error", {{"code", "bad_request"}, {"message", "malformed request target"}}}});
}

bool UrlDecode(const std::string& s, std::string* out, bool plus_is_space) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      auto hex = [](char h) -> int {
        if (h >= '0' && h <= '9') return h - '0';
        if (h >= 'a' && h <= 'f') return h - 'a' + 10;
        if (h >= 'A' && h <= 'F') return h - 'A' + 10;
        return -1;
      };
      if (i + 2 >= s.size()) return false;
      int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(char((hi << 4) | lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

std::string FormatTime(int64_t unix_ms) {
  int64_t ms = unix_ms % 1000;
  int64_t secs = unix_ms / 1000;
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    days -= 1;
  }
  // Civil-from-days (Howard Hinnant's algorithm).
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t d = doy - (153 * mp + 2) / 5 + 1;
  int64_t m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ", (long long)y,
                (long long)m, (long long)d, (long long)(rem / 3600), (long long)(rem % 3600 / 60),
                (long long)(rem % 60), (long long)ms);
  return buf;
}

namespace {
// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool Digits(const std::string& s, size_t pos, size_t n, int64_t* out) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}
}  // namespace

bool ParseTime(const std::string& text, int64_t* unix_ms) {
  if (text.empty() || text.size() > 40) return false;
  if (text.find_first_not_of("0123456789") == std::string::npos) {
    if (text.size() > 12) return false;
    int64_t s = 0;
    Digits(text, 0, text.size(), &s);
    *unix_ms = s * 1000;
    return true;
  }
  int64_t y, mo, d, h = 0, mi = 0, sec = 0, ms = 0;
  if (!Digits(text, 0, 4, &y) || text.size() < 10 || text[4] != '-' || !Digits(text, 5, 2, &mo) ||
      text[7] != '-' || !Digits(text, 8, 2, &d)) {
    return false;
  }
  size_t pos = 10;
  if (text.size() > 10) {
    if ((text[10] != 'T' && text[10] != 't') || !Digits(text, 11, 2, &h) || text.size() < 20 ||
        text[13] != ':' || !Digits(text, 14, 2, &mi) || text[16] != ':' ||
        !Digits(text, 17, 2, &sec)) {
      return false;
    }
    pos = 19;
    if (pos < text.size() && text[pos] == '.') {
      size_t start = ++pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
      if (pos == start || pos - start > 9) return false;
      std::string frac = text.substr(start, pos - start) + "00";
      Digits(frac, 0, 3, &ms);
    }
    if (pos + 1 != text.size() || (text[pos] != 'Z' && text[pos] != 'z')) return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return false;
  *unix_ms = ((DaysFromCivil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + sec * 1000 + ms;
  return true;
}

}  // namespace gleaner::core
