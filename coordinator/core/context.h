// What every route handler gets: the request, the authenticated caller, path captures and the
// parsed JSON body, shared by the handler's continuations (std::function must be copyable).
// Internal to the core. A context points at the Coordinator's config: the Coordinator must
// outlive the plans it makes (see coordinator.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/core/caller_cache.h"
#include "coordinator/core/config.h"
#include "coordinator/core/http.h"
#include "coordinator/core/plan.h"
#include "coordinator/core/sql.h"
#include "shared/json.h"

namespace gleaner::core {

// Role bits for route tables.
enum RoleBit : unsigned {
  kRoleDeveloper = 1,
  kRoleNode = 2,
  kRoleOperator = 4,
  kRoleEnroll = 8,
};
const char* RoleName(unsigned role_bit);

// The authenticated caller (caller_cache.h).
inline bool IsOperator(const Caller& c) {
  return c.role == kRoleOperator;
}

struct Ctx {
  const CoreConfig* config = nullptr;
  HttpRequest req;
  Caller caller;
  std::vector<std::string> args;  // path captures, in order
  Json body = Json::object();     // parsed body (routes with a JSON body), else {}
  int64_t now() const { return req.now_ms; }
};
using CtxPtr = std::shared_ptr<const Ctx>;

// Final plans.
Plan RespondJson(int status, const Json& body);
// A failed batch: busy -> 503 (retry), constraint -> 409, disk full -> 507, anything else -> 500.
Plan DbFail(const Status& st);
// Error with an explicit HTTP status and code (e.g. 405 method_not_allowed).
HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message);

// Concatenates SQL parameter lists.
std::vector<SqlValue> Cat(std::vector<SqlValue> a, const std::vector<SqlValue>& b);

// Ownership guard for developer routes: "(? = 1 OR owner_key_id = ?)".
std::string OwnerSql();
std::vector<SqlValue> OwnerParams(const Ctx& ctx);

// True for ids the core mints ([A-Za-z0-9_], 1..64 chars).
bool IsPlainId(const std::string& s);

}  // namespace gleaner::core
