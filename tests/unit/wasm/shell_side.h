// The other direction of the wire (wasm/wire_json.h), as the Worker writes it: a request and a
// batch result in the JSON the shell sends the session. For the tests, which play the Worker in
// C++ against SQLite; the edge itself never needs these.
#pragma once

#include "coordinator/core/http.h"
#include "coordinator/core/sql.h"
#include "shared/json.h"

namespace gleaner::edge::testing {

Json RequestToJson(const core::HttpRequest& r);  // body always as body_base64
Json SqlValueToJson(const core::SqlValue& v);    // NaN and infinities as null, as D1 gives them
Json BatchResultToJson(const core::BatchResult& r);

}  // namespace gleaner::edge::testing
