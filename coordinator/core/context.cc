#include "coordinator/core/context.h"

namespace gleaner::core {

const char* RoleName(unsigned role_bit) {
  switch (role_bit) {
    case kRoleDeveloper:
      return "developer";
    case kRoleNode:
      return "node";
    case kRoleOperator:
      return "operator";
    case kRoleEnroll:
      return "enroll";
    default:
      return "none";
  }
}

Plan RespondJson(int status, const Json& body) {
  return Plan::Respond(HttpResponse::Json(status, body));
}

HttpResponse ErrorResponse(int status, const std::string& code, const std::string& message) {
  return HttpResponse::Json(status, {{"error", {{"code", code}, {"message", message}}}});
}

Plan DbFail(const Status& st) {
  switch (st.code()) {
    case Code::kUnavailable:
      return Plan::Fail(Status::Unavailable("database busy; retry"));
    case Code::kConflict:
      return Plan::Fail(Status::Conflict("conflicting concurrent update; retry"));
    case Code::kNoSpace:  // the disk is full: 507, so clients and operators can tell
      return Plan::Fail(Status(Code::kNoSpace, "database storage is full; retry later"));
    default:
      return Plan::Fail(Status::Internal("database error: " + st.message()));
  }
}

std::vector<SqlValue> Cat(std::vector<SqlValue> a, const std::vector<SqlValue>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string OwnerSql() {
  return "(? = 1 OR owner_key_id = ?)";
}

std::vector<SqlValue> OwnerParams(const Ctx& ctx) {
  return {IsOperator(ctx.caller) ? 1 : 0, ctx.caller.id};
}

bool IsPlainId(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace gleaner::core
