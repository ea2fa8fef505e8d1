#include "coordinator/core/router.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "coordinator/core/routes.h"
#include "shared/sha256.h"

namespace gleaner::core {
namespace {

constexpr unsigned kDev = kRoleDeveloper, kNode = kRoleNode, kOp = kRoleOperator,
                   kEnroll = kRoleEnroll;

Plan Healthz(CtxPtr) {
  return RespondJson(200, {{"ok", true}});
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  if (path.empty() || path[0] != '/') return out;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

// Matches a path's segments against a pattern without copying the pattern (every request tries
// every route).
bool Match(const char* pattern, const std::vector<std::string>& segs,
           std::vector<std::string>* args) {
  args->clear();
  if (pattern[0] != '/') return false;
  const char* p = pattern + 1;
  size_t i = 0;
  for (;; ++i) {
    const char* end = std::strchr(p, '/');
    if (end == nullptr) end = p + std::strlen(p);
    if (i >= segs.size()) return false;
    const std::string& seg = segs[i];
    if (*p == '{') {
      if (seg.empty()) return false;
      args->push_back(seg);
    } else if (seg.size() != size_t(end - p) || seg.compare(0, seg.size(), p, seg.size()) != 0) {
      return false;
    }
    if (*end == '\0') break;
    p = end + 1;
  }
  return i + 1 == segs.size();
}

std::string RolesText(unsigned roles) {
  std::string out;
  for (unsigned bit : {kDev, kNode, kOp, kEnroll}) {
    if (roles & bit) out += std::string(out.empty() ? "" : " or ") + RoleName(bit);
  }
  return out;
}

// Bearer token from the Authorization header, or "" if absent or malformed.
std::string BearerToken(const HttpRequest& req) {
  const std::string& h = req.Header("authorization");
  if (h.size() < 8 || h.size() > 300) return "";
  std::string scheme = h.substr(0, 7);
  for (char& c : scheme) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (scheme != "bearer ") return "";
  std::string token = h.substr(7);
  size_t first = token.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  token = token.substr(first);
  while (!token.empty() && token.back() == ' ') token.pop_back();
  for (char c : token) {
    if (c <= ' ' || c > '~') return "";
  }
  return token;
}

// 429 with Retry-After in whole seconds (at least 1, as HTTP has no fractions).
Plan RateLimited(double retry_after_s, const RateLimit& limit) {
  const int64_t secs = std::max<int64_t>(1, int64_t(std::ceil(retry_after_s)));
  HttpResponse resp =
      ErrorResponse(429, "rate_limited",
                    "too many requests for this token (limit " + FormatRateLimit(limit) +
                        " requests per second : burst); retry in " + std::to_string(secs) + " s");
  resp.headers.emplace_back("Retry-After", std::to_string(secs));
  return Plan::Respond(std::move(resp));
}

// The caller's rate-limit bucket.
std::string RateKey(const Caller& c) {
  return std::string(RoleName(c.role)) + ":" + c.id;
}

Plan Dispatch(std::shared_ptr<Ctx> ctx, const RouteInfo* route) {
  if (route->json_body) {
    const std::string& body = ctx->req.body;
    if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
      Result<Json> parsed = ParseStrictJson(body);
      if (!parsed.ok()) return Plan::Fail(parsed.status());
      if (!parsed->is_object()) return Plan::Fail(Status::Invalid("body must be a JSON object"));
      ctx->body = std::move(parsed).value();
    }
  }
  return route->handler(std::move(ctx));
}

// Takes a token from the caller's bucket: the 429 plan when it is empty, else nothing.
std::optional<Plan> TakeRateToken(RateLimiter* limiter, const Ctx& ctx) {
  if (limiter == nullptr) return std::nullopt;
  const Caller& c = ctx.caller;
  RateDecision d = limiter->Take(RateKey(c), RoleRateLimit(*ctx.config, c.role), ctx.now());
  if (d.allowed) return std::nullopt;
  return RateLimited(d.retry_after_s, RoleRateLimit(*ctx.config, c.role));
}

// Node registrations by an enroll key also take a token from the bucket of the client's
// address (enroll_address_rate), so one address cannot spend a shared enroll key's rate alone,
// and many keys used from one address do not multiply it.
bool LimitsAddress(const RouteInfo* route) {
  return route->handler == HandleRegisterNode;
}
std::optional<Plan> TakeAddressToken(RateLimiter* limiter, const Ctx& ctx, const RouteInfo* route) {
  const std::string& addr = ctx.req.client_addr;
  if (limiter == nullptr || addr.empty() || !LimitsAddress(route) || ctx.caller.role != kEnroll)
    return std::nullopt;
  const RateLimit& limit = ctx.config->enroll_address_rate;
  RateDecision d = limiter->Take("address:" + AddressBucket(addr), limit, ctx.now());
  if (d.allowed) return std::nullopt;
  const int64_t secs = std::max<int64_t>(1, int64_t(std::ceil(d.retry_after_s)));
  HttpResponse resp = ErrorResponse(
      429, "rate_limited",
      "too many node registrations from this address (limit " + FormatRateLimit(limit) +
          " per second : burst, the enroll-address-rate-limit setting); retry in " +
          std::to_string(secs) + " s");
  resp.headers.emplace_back("Retry-After", std::to_string(secs));
  return Plan::Respond(std::move(resp));
}

// The usual path: one batch looks the token's hash up, then the role check, the rate limit
// (unless a token was already taken from the bucket named `taken`) and the handler.
Plan Authenticate(std::shared_ptr<Ctx> ctx, const RouteInfo* route, RateLimiter* limiter,
                  CallerCache* callers, const std::string& hash, const std::string& taken) {
  Batch b;
  b.Add("SELECT id, role FROM api_keys WHERE token_hash = ? AND revoked_at IS NULL", {hash});
  b.Add("SELECT id, gpu_name, vram_mb, state FROM nodes WHERE token_hash = ?", {hash});
  return Plan::Run(
      std::move(b), [ctx, route, limiter, callers, hash, taken](BatchResult r) -> Plan {
        if (!r.status.ok()) return DbFail(r.status);
        Caller& c = ctx->caller;
        const Rows& keys = r.results[0];
        const Rows& nodes = r.results[1];
        if (!keys.empty()) {
          const std::string& role = keys.Get(0, "role").AsText();
          c.role = role == "developer"  ? kDev
                   : role == "operator" ? kOp
                   : role == "enroll"   ? kEnroll
                                        : 0;
          c.id = keys.Get(0, "id").AsText();
        } else if (!nodes.empty()) {
          c.role = kNode;
          c.id = nodes.Get(0, "id").AsText();
          c.gpu_name = nodes.Get(0, "gpu_name").AsText();
          c.vram_mb = nodes.Get(0, "vram_mb").AsInt();
          c.node_state = nodes.Get(0, "state").AsText();
        } else {
          if (callers != nullptr) callers->Forget(hash);
          return Plan::Fail(Status(Code::kUnauthenticated, "unknown or revoked token"));
        }
        if (callers != nullptr) callers->Remember(hash, c);
        if ((route->roles & c.role) == 0) {
          return Plan::Fail(Status(Code::kPermissionDenied,
                                   std::string("this route needs the ") + RolesText(route->roles) +
                                       " role; the token has the " + RoleName(c.role) + " role"));
        }
        if (RateKey(c) != taken) {
          if (std::optional<Plan> refusal = TakeRateToken(limiter, *ctx))
            return std::move(*refusal);
        }
        if (std::optional<Plan> refusal = TakeAddressToken(limiter, *ctx, route))
          return std::move(*refusal);
        return Dispatch(ctx, route);
      });
}

// The statement that fails its batch unless the token still names exactly `c` (caller_cache.h).
// json('') raises "malformed JSON", in SQLite and D1 alike, and the batch is rolled back.
Statement CallerStillValid(const std::string& hash, const Caller& c) {
  if (c.role == kNode) {
    return {
        "SELECT json(CASE WHEN EXISTS (SELECT 1 FROM nodes WHERE token_hash = ? AND id = ? "
        "AND gpu_name = ? AND vram_mb = ? AND state = ?) THEN '1' ELSE '' END) AS caller_ok",
        {hash, c.id, c.gpu_name, c.vram_mb, c.node_state}};
  }
  return {
      "SELECT json(CASE WHEN EXISTS (SELECT 1 FROM api_keys WHERE token_hash = ? AND id = ? "
      "AND role = ? AND revoked_at IS NULL) THEN '1' ELSE '' END) AS caller_ok",
      {hash, c.id, RoleName(c.role)}};
}

// One round trip instead of two: the handler runs with the remembered caller and its first
// batch carries the check. Anything but a clean run of that batch (the check failed, or the
// batch failed for its own reasons) starts over on the usual path, which then answers; so does
// a handler that answers without a batch, since nothing has checked the token then.
Plan WithRememberedCaller(std::shared_ptr<Ctx> ctx, const RouteInfo* route, RateLimiter* limiter,
                          CallerCache* callers, const std::string& hash, const Caller& remembered) {
  auto fresh = std::make_shared<Ctx>(*ctx);  // the request before any handler saw it
  ctx->caller = remembered;
  if (TakeRateToken(limiter, *ctx)) return Authenticate(fresh, route, limiter, callers, hash, "");
  const std::string taken = limiter != nullptr ? RateKey(remembered) : "";
  auto plan = std::make_shared<Plan>(Dispatch(ctx, route));
  if (plan->done()) return Authenticate(fresh, route, limiter, callers, hash, taken);
  Batch b;
  b.statements.reserve(plan->batch().statements.size() + 1);
  b.statements.push_back(CallerStillValid(hash, remembered));
  for (const Statement& st : plan->batch().statements) b.statements.push_back(st);
  return Plan::Run(std::move(b),
                   [plan, fresh, route, limiter, callers, hash, taken](BatchResult r) -> Plan {
                     if (!r.status.ok())
                       return Authenticate(fresh, route, limiter, callers, hash, taken);
                     r.results.erase(r.results.begin());
                     return plan->Continue(std::move(r));
                   });
}

}  // namespace

const std::vector<RouteInfo>& Routes() {
  static const std::vector<RouteInfo> kRoutes = {
      {"GET", "/healthz", 0, Healthz, false},
      {"POST", "/v1/keys", kOp, HandleCreateKey, true},
      {"GET", "/v1/keys", kOp, HandleListKeys, false},
      {"POST", "/v1/keys/{id}/revoke", kOp, HandleRevokeKey, false},
      {"PATCH", "/v1/keys/{id}", kOp, HandleUpdateKey, true},
      {"POST", "/v1/nodes/register", kEnroll | kOp, HandleRegisterNode, true},
      {"GET", "/v1/nodes", kOp, HandleListNodes, false},
      {"POST", "/v1/nodes/{id}/quarantine", kOp, HandleSetNodeState, true},
      {"POST", "/v1/nodes/{id}/restore", kOp, HandleSetNodeState, true},
      {"POST", "/v1/nodes/{id}/revoke", kOp, HandleRevokeNode, true},
      {"POST", "/v1/uploads", kDev | kOp, HandleCreateUpload, true},
      {"POST", "/v1/jobs", kDev | kOp, HandleCreateJob, true},
      {"GET", "/v1/jobs", kDev | kOp, HandleListJobs, false},
      {"GET", "/v1/jobs/{id}", kDev | kOp, HandleGetJob, false},
      {"POST", "/v1/jobs/{id}/cancel", kDev | kOp, HandleCancelJob, true},
      {"GET", "/v1/jobs/{id}/events", kDev | kOp, HandleJobEvents, false},
      {"GET", "/v1/jobs/{id}/result", kDev | kOp, HandleJobResult, false},
      {"POST", "/v1/work", kNode, HandleWork, true},
      {"POST", "/v1/jobs/{id}/downloads", kNode, HandleDownloads, true},
      {"POST", "/v1/jobs/{id}/heartbeat", kNode, HandleHeartbeat, true},
      {"POST", "/v1/jobs/{id}/checkpoints", kNode, HandleCheckpointUrl, true},
      {"POST", "/v1/jobs/{id}/checkpoints/{step}/commit", kNode, HandleCheckpointCommit, true},
      {"POST", "/v1/jobs/{id}/outputs", kNode, HandleOutputUrl, true},
      {"POST", "/v1/jobs/{id}/samples", kNode, HandleSampleUrl, true},
      {"POST", "/v1/jobs/{id}/samples/{step}/commit", kNode, HandleSampleCommit, true},
      {"GET", "/v1/jobs/{id}/samples", kDev | kOp, HandleListSamples, false},
      {"POST", "/v1/jobs/{id}/complete", kNode, HandleComplete, true},
      {"POST", "/v1/jobs/{id}/fail", kNode, HandleFail, true},
      {"POST", "/v1/jobs/{id}/release", kNode, HandleRelease, true},
      {"POST", "/v1/verifications/{id}/heartbeat", kNode, HandleVerifyHeartbeat, true},
      {"POST", "/v1/verifications/{id}/checkpoint", kNode, HandleVerifyCheckpointUrl, true},
      {"POST", "/v1/verifications/{id}/commit", kNode, HandleVerifyCommit, true},
      {"PUT", "/v1/prices", kOp, HandlePutPrice, true},
      {"GET", "/v1/prices", kOp, HandleListPrices, false},
      {"GET", "/v1/reports/cost", kOp, HandleCostReport, false},
      {"GET", "/v1/reports/queue", kOp, HandleQueueReport, false},
      {"GET", "/v1/reports/autoscaler", kOp, HandleAutoscalerReport, false},
      {"GET", "/v1/reports/cost-per-step", kOp, HandleCostPerStepReport, false},
      {"POST", "/v1/agent/releases", kOp, HandlePublishRelease, true},
      {"GET", "/v1/agent/release", kNode | kOp, HandleGetRelease, false},
      {"GET", "/metrics", kOp, HandleMetrics, false},
      {"POST", "/v1/admin/maintenance", kOp, HandleMaintenance, true},
  };
  return kRoutes;
}

const RouteInfo* FindRoute(const std::string& method, const std::string& path) {
  std::vector<std::string> segs = Split(path);
  std::vector<std::string> args;
  for (const RouteInfo& r : Routes()) {
    if (r.method == method && Match(r.pattern, segs, &args)) return &r;
  }
  return nullptr;
}

RateLimit RoleRateLimit(const CoreConfig& config, unsigned role_bit) {
  switch (role_bit) {
    case kDev:
      return config.developer_rate;
    case kNode:
      return config.node_rate;
    case kOp:
      return config.operator_rate;
    case kEnroll:
      return config.enroll_rate;
    default:
      return RateLimit{};
  }
}

Plan RouteRequest(const CoreConfig* config, RateLimiter* limiter, CallerCache* callers,
                  const HttpRequest& request) {
  std::vector<std::string> segs = Split(request.path);
  std::vector<std::string> args;
  const RouteInfo* route = nullptr;
  std::string allowed;
  for (const RouteInfo& r : Routes()) {
    std::vector<std::string> a;
    if (!Match(r.pattern, segs, &a)) continue;
    if (r.method == request.method) {
      route = &r;
      args = std::move(a);
      break;
    }
    if (allowed.find(r.method) == std::string::npos) {
      allowed += std::string(allowed.empty() ? "" : ", ") + r.method;
    }
  }
  if (route == nullptr) {
    if (allowed.empty()) {
      return Plan::Fail(Status::NotFound("no route for " + request.method + " " + request.path));
    }
    HttpResponse resp = ErrorResponse(
        405, "method_not_allowed",
        request.method + " is not allowed on " + request.path + " (allowed: " + allowed + ")");
    resp.headers.emplace_back("Allow", allowed);
    return Plan::Respond(std::move(resp));
  }
  if (int64_t(request.body.size()) > config->max_request_body) {
    return Plan::Fail(Status(
        Code::kTooLarge,
        "request body is larger than " + std::to_string(config->max_request_body) + " bytes"));
  }
  if (request.method != "GET" && request.entropy.size() < 32) {
    return Plan::Fail(Status::Internal("the server supplied too little entropy"));
  }
  auto ctx = std::make_shared<Ctx>();
  ctx->config = config;
  ctx->req = request;
  ctx->args = std::move(args);
  if (route->roles == 0) return Dispatch(std::move(ctx), route);

  std::string token = BearerToken(request);
  if (token.empty()) {
    return Plan::Fail(
        Status(Code::kUnauthenticated, "missing bearer token (Authorization: Bearer <token>)"));
  }
  std::string hash = Sha256Hex(token);
  Caller remembered;
  // A registration takes the usual path: the address bucket is taken once, after the lookup.
  if (callers != nullptr && !LimitsAddress(route) && callers->Find(hash, &remembered) &&
      (route->roles & remembered.role)) {
    return WithRememberedCaller(std::move(ctx), route, limiter, callers, hash, remembered);
  }
  return Authenticate(std::move(ctx), route, limiter, callers, hash, "");
}

}  // namespace gleaner::core
