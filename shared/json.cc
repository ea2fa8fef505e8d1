#include "shared/json.h"

#include <cmath>
#include <set>
#include <vector>

namespace gleaner {
namespace {

// A raw NUL byte is never valid JSON (inside a string it must be escaped as \u0000; outside one
// only whitespace may stand between tokens), and nlohmann's lexer takes it for the end of input:
// without this check `{...}\0garbage` parses as `{...}`.
Status CheckNoNul(std::string_view text) {
  if (text.find('\0') == std::string_view::npos) return Status::Ok();
  return Status::Invalid("body is not valid JSON: it contains a NUL byte");
}

}  // namespace

// Nesting depth outside of strings; stops counting once over the limit.
bool JsonDepthWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

Result<Json> ParseJson(std::string_view text, int max_depth) {
  GLEANER_RETURN_IF_ERROR(CheckNoNul(text));
  if (!JsonDepthWithin(text, max_depth)) {
    return Status::Invalid("JSON nested deeper than " + std::to_string(max_depth) + " levels");
  }
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Invalid("body is not valid JSON");
  return j;
}

Result<Json> ParseStrictJson(std::string_view text, int max_depth) {
  GLEANER_RETURN_IF_ERROR(CheckNoNul(text));
  if (!JsonDepthWithin(text, max_depth)) {
    return Status::Invalid("JSON nested deeper than " + std::to_string(max_depth) + " levels");
  }
  std::vector<std::set<std::string>> keys;  // the keys seen so far, per open object
  std::string problem;
  auto check = [&](int, Json::parse_event_t event, Json& parsed) {
    if (!problem.empty()) return true;
    if (event == Json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == Json::parse_event_t::key || event == Json::parse_event_t::value) {
      if (!parsed.is_string()) return true;
      const std::string& s = parsed.get_ref<const std::string&>();
      if (s.find('\0') != std::string::npos) {
        problem = "JSON strings must not contain NUL";
      } else if (event == Json::parse_event_t::key && !keys.empty()) {
        if (!keys.back().insert(s).second) {
          problem = "JSON object has a duplicate key \"" + s.substr(0, 64) + "\"";
        }
      }
    }
    return true;
  };
  Json j = Json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Invalid("body is not valid JSON");
  if (!problem.empty()) return Status::Invalid(problem);
  return j;
}

std::string DumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

FieldReader::FieldReader(const Json& obj, std::string prefix)
    : obj_(obj), prefix_(std::move(prefix)) {
  if (!obj_.is_object()) {
    status_ = Status::Invalid(prefix_.empty() ? std::string("body must be a JSON object")
                                              : prefix_.substr(0, prefix_.size() - 1) +
                                                    " must be a JSON object");
  }
}

bool FieldReader::Fail(const std::string& message) {
  if (status_.ok()) status_ = Status::Invalid(message);
  return false;
}

bool FieldReader::Has(const char* key) const {
  return obj_.is_object() && obj_.find(key) != obj_.end() && !obj_.find(key)->is_null();
}

const Json* FieldReader::Find(const char* key, bool required) {
  if (!status_.ok()) return nullptr;
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) {
    if (required) Fail(prefix_ + key + " is required");
    return nullptr;
  }
  return &*it;
}

bool FieldReader::String(const char* key, std::string* out, bool required, size_t max_len) {
  const Json* v = Find(key, required);
  if (v == nullptr) return status_.ok();
  if (!v->is_string()) return Fail(prefix_ + key + " must be a string");
  const std::string& s = v->get_ref<const std::string&>();
  if (s.size() > max_len) {
    return Fail(prefix_ + key + " is longer than " + std::to_string(max_len) + " bytes");
  }
  if (required && s.empty()) return Fail(prefix_ + key + " must not be empty");
  *out = s;
  return true;
}

bool FieldReader::Int(const char* key, int64_t* out, bool required, int64_t min, int64_t max) {
  const Json* v = Find(key, required);
  if (v == nullptr) return status_.ok();
  std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  int64_t value = 0;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) return Fail(prefix_ + key + " must be an integer in " + range);
    value = int64_t(u);
  } else if (v->is_number_integer()) {
    value = v->get<int64_t>();
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < -9.0e18 || d > 9.0e18) {
      return Fail(prefix_ + key + " must be an integer in " + range);
    }
    value = int64_t(d);
  } else {
    return Fail(prefix_ + key + " must be an integer in " + range);
  }
  if (value < min || value > max) return Fail(prefix_ + key + " must be an integer in " + range);
  *out = value;
  return true;
}

bool FieldReader::Number(const char* key, double* out, bool required, double min, double max) {
  const Json* v = Find(key, required);
  if (v == nullptr) return status_.ok();
  if (!v->is_number()) return Fail(prefix_ + key + " must be a number");
  double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    return Fail(prefix_ + key + " must be a number in [" + Json(min).dump() + ", " +
                Json(max).dump() + "]");
  }
  *out = d;
  return true;
}

bool FieldReader::Bool(const char* key, bool* out, bool required) {
  const Json* v = Find(key, required);
  if (v == nullptr) return status_.ok();
  if (!v->is_boolean()) return Fail(prefix_ + key + " must be true or false");
  *out = v->get<bool>();
  return true;
}

bool FieldReader::Object(const char* key, const Json** out, bool required) {
  static const Json kEmpty = Json::object();
  const Json* v = Find(key, required);
  if (v == nullptr) {
    *out = &kEmpty;
    return status_.ok();
  }
  if (!v->is_object()) return Fail(prefix_ + key + " must be an object");
  *out = v;
  return true;
}

bool FieldReader::OnlyKeys(const char* const* allowed) {
  if (!status_.ok()) return false;
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {
    bool known = false;
    for (const char* const* a = allowed; *a != nullptr; ++a) {
      if (it.key() == *a) {
        known = true;
        break;
      }
    }
    if (!known) return Fail(prefix_ + it.key() + " is not a known field");
  }
  return true;
}

}  // namespace gleaner
