#include "wasm/wire_json.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <set>

#include "coordinator/core/settings.h"
#include "shared/sha256.h"

namespace gleaner::edge {

using core::Batch;
using core::BatchResult;
using core::CoreConfig;
using core::HttpRequest;
using core::HttpResponse;
using core::Rows;
using core::SqlValue;

namespace {

const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int B64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict UTF-8 check (no overlongs, no surrogates, <= U+10FFFF).
bool IsUtf8(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + size_t(len) > n) return false;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += size_t(len);
  }
  return true;
}

// Reads a JSON value the shell produced into an SqlValue; false for arrays/objects.
bool SqlValueFromJson(const Json& v, SqlValue* out) {
  if (v.is_null()) {
    *out = SqlValue::Null();
  } else if (v.is_boolean()) {
    *out = SqlValue(int64_t(v.get<bool>() ? 1 : 0));
  } else if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) return false;
    *out = SqlValue(int64_t(u));
  } else if (v.is_number_integer()) {
    *out = SqlValue(v.get<int64_t>());
  } else if (v.is_number_float()) {
    *out = SqlValue(v.get<double>());
  } else if (v.is_string()) {
    *out = SqlValue(v.get<std::string>());
  } else {
    return false;
  }
  return true;
}

Code CodeFromName(const std::string& name) {
  if (name == "conflict") return Code::kConflict;
  if (name == "unavailable") return Code::kUnavailable;
  return Code::kInternal;
}

BatchResult Malformed(const std::string& what) {
  BatchResult r;
  r.status = Status::Internal("malformed batch result from the shell: " + what);
  return r;
}

}  // namespace

std::string Base64Encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 |
                 uint32_t(uint8_t(bytes[i + 2]));
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (rest == 2) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += rest == 2 ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool Base64Decode(const std::string& text, std::string* out) {
  if (text.size() % 4 != 0) return false;
  std::string bytes;
  bytes.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text[i + size_t(k)];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else {
        if (pad > 0) return false;  // data after padding
        v[k] = B64Value(c);
        if (v[k] < 0) return false;
      }
    }
    uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    bytes += char(w >> 16);
    if (pad < 2) bytes += char((w >> 8) & 0xFF);
    if (pad < 1) bytes += char(w & 0xFF);
  }
  *out = std::move(bytes);
  return true;
}

Result<CoreConfig> ConfigFromJson(const Json& j) {
  if (!j.is_object()) return Status::Invalid("config must be a JSON object");
  CoreConfig c;
  std::set<std::string> given;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const std::string origin = "config." + key;
    // Secrets are not settings (core/settings.h): the Worker passes them from its secrets.
    std::string* secret = key == "blob-signing-key"        ? &c.blob_signing_key
                          : key == "aws-access-key-id"     ? &c.s3.access_key_id
                          : key == "aws-secret-access-key" ? &c.s3.secret_access_key
                                                           : nullptr;
    const core::Setting* setting = secret ? nullptr : core::FindCoreSetting(key);
    if (!secret && !setting) {
      return Status::Invalid(origin + ": unknown setting (names as in docs/operations.md)");
    }
    std::string text;
    if (it->is_string()) {
      text = it->get<std::string>();
    } else if (!secret && (it->is_number() || it->is_boolean())) {
      text = it->dump();  // 30, 0.25, true: the same text a flag would carry
    } else {
      return Status::Invalid(origin + ": expected a string" +
                             (secret ? "" : ", number or boolean"));
    }
    if (secret) {
      *secret = std::move(text);
      continue;
    }
    GLEANER_RETURN_IF_ERROR(core::ApplyCoreSetting(&c, *setting, text, origin));
    given.insert(key);
  }
  core::DeriveCoreDefaults(&c, given);
  GLEANER_RETURN_IF_ERROR(c.Validate());
  return c;
}

Result<HttpRequest> RequestFromJson(const Json& j) {
  if (!j.is_object()) return Status::Invalid("request must be a JSON object");
  static const char* const kKeys[] = {"method",     "path",        "query",  "headers",
                                      "body",       "body_base64", "now_ms", "entropy",
                                      "request_id", "client_addr", nullptr};
  HttpRequest r;
  FieldReader f(j, "request.");
  f.OnlyKeys(kKeys);
  f.String("method", &r.method, true, 16);
  f.String("path", &r.path, true, 8192);
  f.String("query", &r.query, false, 65536);
  f.Int("now_ms", &r.now_ms, true, 0, INT64_MAX);
  f.String("request_id", &r.request_id, false, 256);
  f.String("client_addr", &r.client_addr, false, 64);
  std::string entropy_hex;
  f.String("entropy", &entropy_hex, false, 1024);
  std::string body_text;
  f.String("body", &body_text, false, SIZE_MAX);
  std::string body_b64;
  f.String("body_base64", &body_b64, false, SIZE_MAX);
  if (!f.ok()) return f.status();
  if (f.Has("entropy") && (!HexDecode(entropy_hex, &r.entropy) || r.entropy.size() < 32)) {
    return Status::Invalid("request.entropy must be at least 32 bytes of hex");
  }
  if (!body_b64.empty()) {
    if (!body_text.empty()) return Status::Invalid("request has both body and body_base64");
    if (!Base64Decode(body_b64, &r.body)) return Status::Invalid("request.body_base64 is invalid");
  } else {
    r.body = std::move(body_text);
  }
  auto h = j.find("headers");
  if (h != j.end() && !h->is_null()) {
    if (!h->is_array()) return Status::Invalid("request.headers must be an array of pairs");
    for (const Json& pair : *h) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
        return Status::Invalid("request.headers must be an array of [name, value] strings");
      }
      std::string name = pair[0].get<std::string>();
      for (char& c : name) {
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
      }
      r.headers.emplace_back(std::move(name), pair[1].get<std::string>());
    }
  }
  return r;
}

void AppendResponseJson(std::string* out, const HttpResponse& r) {
  *out += "{\"status\":" + std::to_string(r.status) + ",\"content_type\":";
  AppendJsonString(out, r.content_type);
  *out += ",\"headers\":[";
  for (size_t i = 0; i < r.headers.size(); ++i) {
    *out += i > 0 ? ",[" : "[";
    AppendJsonString(out, r.headers[i].first);
    out->push_back(',');
    AppendJsonString(out, r.headers[i].second);
    out->push_back(']');
  }
  out->push_back(']');
  if (IsUtf8(r.body)) {
    *out += ",\"body\":";
    AppendJsonString(out, r.body);
  } else {
    *out += ",\"body_base64\":";
    AppendJsonString(out, Base64Encode(r.body));
  }
  out->push_back('}');
}

namespace {

struct Placeholder {
  size_t at = 0;      // offset of '?'
  size_t length = 0;  // '?' plus its digits
  size_t index = 0;   // 1-based parameter index (SQLite rules: '?' = highest so far + 1)
};

// Placeholders of sql outside quotes and comments, or false if it uses named parameters.
bool FindPlaceholders(const std::string& sql, std::vector<Placeholder>* out, size_t* count) {
  const size_t n = sql.size();
  size_t highest = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = sql[i];
    if (c == '\'' || c == '"' || c == '`' || c == '[') {
      char close = c == '[' ? ']' : c;
      size_t j = i + 1;
      while (j < n) {
        if (sql[j] == close) {
          if (close != ']' && j + 1 < n && sql[j + 1] == close) {
            j += 2;  // doubled quote inside the literal
            continue;
          }
          break;
        }
        ++j;
      }
      i = j;
    } else if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      while (i < n && sql[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      size_t end = sql.find("*/", i + 2);
      i = end == std::string::npos ? n : end + 1;
    } else if (c == '?') {
      Placeholder p;
      p.at = i;
      size_t j = i + 1;
      size_t number = 0;
      while (j < n && sql[j] >= '0' && sql[j] <= '9' && number < 100000) {
        number = number * 10 + size_t(sql[j] - '0');
        ++j;
      }
      p.length = j - i;
      if (p.length > 1 && (number == 0 || number >= 100000)) return false;
      p.index = p.length > 1 ? number : highest + 1;
      if (p.index > highest) highest = p.index;
      out->push_back(p);
      i = j - 1;
    } else if ((c == ':' || c == '@' || c == '$') && i + 1 < n &&
               (std::isalnum(static_cast<unsigned char>(sql[i + 1])) || sql[i + 1] == '_')) {
      return false;
    }
  }
  *count = highest;
  return true;
}

}  // namespace

namespace {

// The D1 form of one statement (see ForD1); false if it is left as it is.
bool StatementForD1(const core::Statement& s, core::Statement* t) {
  std::vector<Placeholder> holders;
  size_t count = 0;
  if (!FindPlaceholders(s.sql, &holders, &count) || count != s.params.size()) return false;
  t->sql.clear();
  t->sql.reserve(s.sql.size() + 24 * holders.size());
  t->params.clear();
  t->params.reserve(s.params.size());
  for (const SqlValue& v : s.params) {
    t->params.push_back(v.type() == SqlValue::Type::kInt ? SqlValue(std::to_string(v.AsInt())) : v);
  }
  size_t from = 0;
  for (const Placeholder& p : holders) {
    t->sql.append(s.sql, from, p.at - from);
    const std::string number = "?" + std::to_string(p.index);
    if (s.params[p.index - 1].type() == SqlValue::Type::kInt) {
      t->sql += "CAST(" + number + " AS INTEGER)";
    } else {
      t->sql += number;
    }
    from = p.at + p.length;
  }
  t->sql.append(s.sql, from, std::string::npos);
  return true;
}

}  // namespace

Batch ForD1(const Batch& b) {
  Batch out;
  out.statements.reserve(b.statements.size());
  for (const auto& s : b.statements) {
    core::Statement t;
    out.statements.push_back(StatementForD1(s, &t) ? std::move(t) : s);
  }
  return out;
}

void AppendJsonString(std::string* out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // start of the pending run of bytes that need no escape
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        *out += "\\u00";
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

void AppendSqlValueJson(std::string* out, const SqlValue& v) {
  switch (v.type()) {
    case SqlValue::Type::kInt:
      *out += std::to_string(v.AsInt());
      return;
    case SqlValue::Type::kReal:
      *out += std::isfinite(v.AsReal()) ? Json(v.AsReal()).dump() : "null";
      return;
    case SqlValue::Type::kText:
      AppendJsonString(out, v.AsText());
      return;
    case SqlValue::Type::kNull:
      break;
  }
  *out += "null";
}

void D1Statements::AppendJson(const core::Statement& s, std::string* out) {
  // Remembered by the core's text and which parameters are integers (that decides the D1 text).
  std::string key = s.sql;
  key.push_back('\0');
  for (const SqlValue& v : s.params) key.push_back(v.type() == SqlValue::Type::kInt ? 'i' : '-');
  auto it = ids_.find(key);
  const bool known = it != ids_.end();
  core::Statement d1;
  bool rewritten = known ? it->second.rewritten : StatementForD1(s, &d1);
  int64_t id = -1;
  if (known) {
    id = it->second.id;
  } else if (ids_.size() < max_ids_) {
    id = int64_t(ids_.size());
    ids_.emplace(std::move(key), Entry{id, rewritten});
  }
  *out += "{\"id\":" + std::to_string(id);
  if (!known) {
    *out += ",\"sql\":";
    AppendJsonString(out, rewritten ? d1.sql : s.sql);
  }
  *out += ",\"params\":[";
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (i > 0) out->push_back(',');
    const SqlValue& v = s.params[i];
    if (rewritten && v.type() == SqlValue::Type::kInt) {
      out->push_back('"');
      *out += std::to_string(v.AsInt());
      out->push_back('"');
    } else {
      AppendSqlValueJson(out, v);
    }
  }
  *out += "]}";
}

BatchResult BatchResultFromJson(const Json& j) {
  if (!j.is_object()) return Malformed("not an object");
  auto err = j.find("error");
  if (err != j.end()) {
    std::string code, message;
    FieldReader f(*err, "error.");
    f.String("code", &code, true, 64);
    f.String("message", &message, false, 65536);
    if (!f.ok()) return Malformed(f.status().message());
    BatchResult r;
    r.status = Status(CodeFromName(code), message.empty() ? code : message);
    return r;
  }
  auto results = j.find("results");
  if (results == j.end() || !results->is_array()) return Malformed("no results array");
  BatchResult r;
  for (const Json& stmt : *results) {
    if (!stmt.is_object()) return Malformed("a statement result is not an object");
    Rows rows;
    auto cols = stmt.find("columns");
    if (cols != stmt.end() && !cols->is_null()) {
      if (!cols->is_array()) return Malformed("columns is not an array");
      for (const Json& c : *cols) {
        if (!c.is_string()) return Malformed("a column name is not a string");
        rows.columns.push_back(c.get<std::string>());
      }
    }
    auto data = stmt.find("rows");
    if (data != stmt.end() && !data->is_null()) {
      if (!data->is_array()) return Malformed("rows is not an array");
      for (const Json& row : *data) {
        if (!row.is_array() || row.size() != rows.columns.size()) {
          return Malformed("a row does not match its columns");
        }
        std::vector<SqlValue> values;
        values.reserve(row.size());
        for (const Json& v : row) {
          SqlValue sv;
          if (!SqlValueFromJson(v, &sv)) return Malformed("a value is not a scalar");
          values.push_back(std::move(sv));
        }
        rows.rows.push_back(std::move(values));
      }
    }
    r.results.push_back(std::move(rows));
  }
  return r;
}

}  // namespace gleaner::edge
