// JSON wire format between the portable core and a shell that is not C++ (the edge Worker).
//
// The Worker speaks JSON to the wasm module; these functions are the only place that turns the
// core's vocabulary (CoreConfig, HttpRequest/HttpResponse, Batch/BatchResult) into JSON and back,
// so no JavaScript re-implements it. Portable (no exceptions, no I/O); unit-tested natively.
//
// Shapes (all objects; unknown keys are rejected where the shell writes them):
//   request:  {method, path, query?, headers?: [[lowercase name, value], ...],
//              body? (UTF-8 string) | body_base64?, now_ms, entropy (hex, >= 64 digits),
//              request_id?}
//   response: {status, content_type, headers: [[name, value]...], body | body_base64}
//   batch:    {statements: [{sql, params: [null | number | string, ...]}, ...]}  (ForD1 form:
//             integers travel as decimal strings)
//   result:   {results: [{columns: [name...], rows: [[value...]...]}, ...]}
//             | {error: {code: "conflict" | "unavailable" | "internal", message}}
//   config:   CoreConfig field names (snake_case, seconds as numbers), all optional except
//             blob_signing_key; s3: {endpoint, bucket, region, access_key_id,
//             secret_access_key, path_style}.
#pragma once

#include <string>

#include "coordinator/core/config.h"
#include "coordinator/core/http.h"
#include "coordinator/core/sql.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::edge {

// CoreConfig from JSON (keys = CoreConfig field names; rate limits as "<role>_rate_limit":
// "RATE:BURST" or "off"); the result is also Validate()d.
Result<core::CoreConfig> ConfigFromJson(const Json& j);

Result<core::HttpRequest> RequestFromJson(const Json& j);
Json RequestToJson(const core::HttpRequest& r);  // body always as body_base64

// Text bodies that are valid UTF-8 go out as "body", anything else as "body_base64".
Json ResponseToJson(const core::HttpResponse& r);

Json SqlValueToJson(const core::SqlValue& v);
Json BatchToJson(const core::Batch& b);

// The batch as D1 must receive it. D1 binds every JavaScript number as REAL and refuses BigInt
// (tests/conformance/d1_binding.mjs checks what the pinned runtime does), so a bound integer would
// change meaning in SQL ('e' || ?, ? / 1000, MAX(col, ?), typeof). Here every placeholder of an
// integer parameter becomes CAST(?N AS INTEGER) and the value is bound as its decimal text (exact
// for all of int64); other placeholders become ?N with their values unchanged. Every value stays
// bound, so the SQL text depends only on which parameters are integers, never on their values:
// D1 and workerd cache one statement per call site. Placeholders are found outside quotes and
// comments; a statement with named parameters (:name) or whose parameter count does not match is
// left as it is. The result runs unchanged on SQLite (tests/unit/wasm).
core::Batch ForD1(const core::Batch& b);

// A statement's rows or the batch's error, as the shell reports them. A malformed result is
// turned into an internal error (the continuation then answers 500), never a crash.
core::BatchResult BatchResultFromJson(const Json& j);
Json BatchResultToJson(const core::BatchResult& r);

// RFC 4648 base64 (standard alphabet, padded).
std::string Base64Encode(const std::string& bytes);
bool Base64Decode(const std::string& text, std::string* out);

}  // namespace gleaner::edge
