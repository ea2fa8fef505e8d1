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
//   batch:    {statements: [{sql, params: [null | integer | number | string, ...]}, ...]}
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

// D1 binds every JavaScript number as REAL (and refuses BigInt), so an integer parameter would
// change meaning in SQL ('e' || ?, ? / 1000, typeof). For D1, integer parameters are written into
// the SQL text as literals instead (exact for all of int64; integers cannot inject anything); the
// other parameters stay bound, renumbered ?1..?K. '?' and '?NNN' placeholders are rewritten
// outside quotes and comments; a statement with named parameters (:name) or whose parameter
// count does not match is left as it is.
core::Batch InlineIntegerParams(const core::Batch& b);

// A statement's rows or the batch's error, as the shell reports them. A malformed result is
// turned into an internal error (the continuation then answers 500), never a crash.
core::BatchResult BatchResultFromJson(const Json& j);
Json BatchResultToJson(const core::BatchResult& r);

// RFC 4648 base64 (standard alphabet, padded).
std::string Base64Encode(const std::string& bytes);
bool Base64Decode(const std::string& text, std::string* out);

}  // namespace gleaner::edge
