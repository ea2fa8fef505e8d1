// JSON for Gleaner: nlohmann::json built with JSON_NOEXCEPTION, plus the only safe ways to
// read and write it.
//
// Contract: never call nlohmann accessors that can fail (get<T>() on a wrong type, at() on a
// missing key, dump() without the replace handler): with JSON_NOEXCEPTION they abort. Parse with
// ParseJson, serialise with DumpJson, and read request fields through FieldReader, which checks
// types, ranges and lengths and reports the first problem as an InvalidArgument Status whose
// message names the field ("params.steps must be an integer in [1, 10000000]").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "shared/status.h"

namespace gleaner {

using Json = nlohmann::json;

// Parses text; rejects invalid JSON and nesting deeper than max_depth (stack safety).
Result<Json> ParseJson(std::string_view text, int max_depth = 32);
// ParseJson that also rejects what a lenient reader would resolve silently: an object with a
// duplicate key (nlohmann keeps the last, another reader the first) and NUL in any string or
// key (C APIs and logs truncate there). For bytes from outside (request bodies).
Result<Json> ParseStrictJson(std::string_view text, int max_depth = 32);
// True if brackets/braces outside strings nest at most max_depth deep (a cheap pre-parse guard).
bool JsonDepthWithin(std::string_view text, int max_depth);
// Compact serialisation; invalid UTF-8 is replaced, never fatal.
std::string DumpJson(const Json& j);

// Reads typed fields out of one JSON object with validation. Errors are sticky: after the first
// failure every further call returns false and status() reports the first error.
class FieldReader {
 public:
  // prefix is prepended to field names in messages ("params." -> "params.steps ...").
  FieldReader(const Json& obj, std::string prefix = "");

  bool is_object() const { return obj_.is_object(); }
  bool Has(const char* key) const;

  bool String(const char* key, std::string* out, bool required, size_t max_len = 1024);
  bool Int(const char* key, int64_t* out, bool required, int64_t min, int64_t max);
  bool Number(const char* key, double* out, bool required, double min, double max);
  bool Bool(const char* key, bool* out, bool required);
  // A nested object (or absent when !required: *out becomes an empty object).
  bool Object(const char* key, const Json** out, bool required);
  // Fails if the object has a key not in the null-terminated list `allowed`.
  bool OnlyKeys(const char* const* allowed);

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  bool Fail(const std::string& message);

 private:
  const Json* Find(const char* key, bool required);
  const Json& obj_;
  std::string prefix_;
  Status status_;
};

}  // namespace gleaner
