#include "tests/unit/wasm/shell_side.h"

#include <cmath>

#include "shared/sha256.h"
#include "wasm/wire_json.h"

namespace gleaner::edge::testing {

using core::BatchResult;
using core::HttpRequest;
using core::Rows;
using core::SqlValue;

Json RequestToJson(const HttpRequest& r) {
  Json headers = Json::array();
  for (const auto& [k, v] : r.headers) headers.push_back({k, v});
  Json j = {{"method", r.method},
            {"path", r.path},
            {"query", r.query},
            {"headers", headers},
            {"now_ms", r.now_ms},
            {"entropy", HexEncode(r.entropy.data(), r.entropy.size())},
            {"body_base64", Base64Encode(r.body)}};
  if (!r.request_id.empty()) j["request_id"] = r.request_id;
  return j;
}

Json SqlValueToJson(const SqlValue& v) {
  switch (v.type()) {
    case SqlValue::Type::kNull:
      return nullptr;
    case SqlValue::Type::kInt:
      return v.AsInt();
    case SqlValue::Type::kReal: {
      double d = v.AsReal();
      if (!std::isfinite(d)) return nullptr;  // JSON has no NaN/Inf; SQLite stores them as NULL
      return d;
    }
    case SqlValue::Type::kText:
      return v.AsText();
  }
  return nullptr;
}

Json BatchResultToJson(const BatchResult& r) {
  if (!r.status.ok()) {
    return {{"error", {{"code", CodeName(r.status.code())}, {"message", r.status.message()}}}};
  }
  Json results = Json::array();
  for (const Rows& rows : r.results) {
    Json data = Json::array();
    for (const auto& row : rows.rows) {
      Json values = Json::array();
      for (const auto& v : row) values.push_back(SqlValueToJson(v));
      data.push_back(std::move(values));
    }
    results.push_back({{"columns", rows.columns}, {"rows", std::move(data)}});
  }
  return {{"results", std::move(results)}};
}

}  // namespace gleaner::edge::testing
