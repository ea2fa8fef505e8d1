// JSON wire format between the portable core and a shell that is not C++ (the edge Worker).
//
// The Worker speaks JSON to the wasm module; these functions are the only place that turns the
// core's vocabulary (CoreConfig, HttpRequest/HttpResponse, Batch/BatchResult) into JSON and back,
// so no JavaScript re-implements it. Portable (no exceptions, no I/O); unit-tested natively.
//
// Shapes (all objects; unknown keys are rejected where the shell writes them):
//   request:   {method, path (percent-encoded, as in the URL: EdgeSession decodes it with
//               core::DecodePath, as the native shell does), query?, headers?: [[lowercase name,
//               value], ...],
//               body? (UTF-8 string) | body_base64?, now_ms, entropy? (hex, >= 64 digits;
//               the session draws it when absent), request_id?}
//   response:  {status, content_type, headers: [[name, value]...], body | body_base64}
//   statement: {id, sql?, params: [null | number | string, ...]}  (D1Statements: the SQL text
//               comes with the first use of an id; integers travel as decimal strings)
//   result:    {results: [{columns: [name...], rows: [[value...]...]}, ...]}
//              | {error: {code: "conflict" | "unavailable" | "internal", message}}
//   config:    {NAME: value, ...}: NAME from the core's settings table (core/settings.h, e.g.
//              "heartbeat-interval", "max-nodes"), value a string, number or boolean in the
//              table's syntax; all optional. Secrets beside them: "blob-signing-key" (required),
//              "aws-access-key-id", "aws-secret-access-key" (S3).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include "coordinator/core/config.h"
#include "coordinator/core/http.h"
#include "coordinator/core/sql.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::edge {

// CoreConfig from the config JSON (above): each key a setting of core::CoreSettings() or a
// secret; an unknown key is refused naming it. Derived defaults applied, then Validate()d.
Result<core::CoreConfig> ConfigFromJson(const Json& j);

Result<core::HttpRequest> RequestFromJson(const Json& j);

// Text bodies that are valid UTF-8 go out as "body", anything else as "body_base64".
void AppendResponseJson(std::string* out, const core::HttpResponse& r);

// s as a JSON string literal (escaped; bytes >= 0x80 pass as they are), appended to out.
void AppendJsonString(std::string* out, std::string_view s);
void AppendSqlValueJson(std::string* out, const core::SqlValue& v);

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

// The statements of one session's batches, each sent to the shell as {id, sql?, params} in the
// ForD1 form: the SQL text only with the first use of its id, afterwards the id alone (the shell
// keeps id -> text). Per request this saves rewriting, escaping and transferring the SQL. Ids
// are per session (one per wasm instance, like the shell's table); at most max_ids texts get
// one, further statements go out with id -1 and their text every time.
class D1Statements {
 public:
  explicit D1Statements(size_t max_ids = 4096) : max_ids_(max_ids) {}
  void AppendJson(const core::Statement& s, std::string* out);
  size_t size() const { return ids_.size(); }

 private:
  struct Entry {
    int64_t id;
    bool rewritten;  // ForD1 changed it (integers as text under CAST)
  };
  size_t max_ids_;
  std::unordered_map<std::string, Entry> ids_;  // core SQL + '\0' + parameter types
};

// A statement's rows or the batch's error, as the shell reports them. A malformed result is
// turned into an internal error (the continuation then answers 500), never a crash.
core::BatchResult BatchResultFromJson(const Json& j);

// RFC 4648 base64 (standard alphabet, padded).
std::string Base64Encode(const std::string& bytes);
bool Base64Decode(const std::string& text, std::string* out);

}  // namespace gleaner::edge
