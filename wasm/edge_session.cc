#include "wasm/edge_session.h"

#include <utility>

#include "wasm/wire_json.h"

namespace gleaner::edge {

using core::HttpResponse;
using core::Plan;

namespace {

std::string DoneWith(const Status& st) {
  std::string out = "{\"done\":true,\"response\":";
  AppendResponseJson(&out, HttpResponse::Error(st));
  out += ",\"blob_deletes\":[]}";
  return out;
}

}  // namespace

std::string EdgeSession::Init(const std::string& config_json) {
  if (!plans_.empty()) return "cannot reconfigure while plans are open";
  Result<Json> j = ParseJson(config_json);
  if (!j.ok()) return "config: " + j.status().message();
  Result<core::CoreConfig> config = ConfigFromJson(*j);
  if (!config.ok()) return config.status().message();
  coordinator_ =
      std::make_unique<core::Coordinator>(std::move(config).value(), &limiter_, &callers_);
  return "";
}

std::string EdgeSession::Step(Plan plan) {
  std::string out;
  if (plan.done()) {
    out = "{\"done\":true,\"response\":";
    AppendResponseJson(&out, plan.response());
    out += ",\"blob_deletes\":[";
    for (size_t i = 0; i < plan.blob_deletes().size(); ++i) {
      if (i > 0) out.push_back(',');
      AppendJsonString(&out, plan.blob_deletes()[i]);
    }
    out += "]}";
    return out;
  }
  int64_t handle = next_handle_++;
  out = "{\"done\":false,\"handle\":" + std::to_string(handle) + ",\"batch\":[";
  const std::vector<core::Statement>& statements = plan.batch().statements;
  for (size_t i = 0; i < statements.size(); ++i) {
    if (i > 0) out.push_back(',');
    statements_.AppendJson(statements[i], &out);
  }
  out += "]}";
  plans_.emplace(handle, std::move(plan));
  return out;
}

std::string EdgeSession::Start(const std::string& op_json, const std::string& entropy) {
  if (!coordinator_) return DoneWith(Status::Unavailable("the core is not initialised"));
  Result<Json> parsed = ParseJson(op_json);
  if (!parsed.ok()) return DoneWith(Status::Internal("op: " + parsed.status().message()));
  const Json& j = *parsed;
  FieldReader f(j, "");
  std::string op;
  f.String("op", &op, true, 32);
  if (!f.ok()) return DoneWith(Status::Internal(f.status().message()));
  if (op == "request") {
    auto r = j.find("request");
    if (r == j.end()) return DoneWith(Status::Internal("request is required"));
    Result<core::HttpRequest> req = RequestFromJson(*r);
    if (!req.ok()) return DoneWith(Status::Internal(req.status().message()));
    if (req->entropy.empty()) req->entropy = entropy;
    if (req->entropy.size() < 32) return DoneWith(Status::Internal("the request has no entropy"));
    return Step(coordinator_->Handle(*req));
  }
  if (op == "migrate") return Step(coordinator_->MigrationPlan());
  int64_t now_ms = 0;
  f.Int("now_ms", &now_ms, true, 0, INT64_MAX);
  if (op == "bootstrap") {
    std::string token;
    f.String("token", &token, true, 4096);
    if (!f.ok()) return DoneWith(Status::Internal(f.status().message()));
    return Step(coordinator_->BootstrapOperatorPlan(token, now_ms));
  }
  if (op == "maintenance") {
    if (!f.ok()) return DoneWith(Status::Internal(f.status().message()));
    return Step(coordinator_->MaintenancePlan(now_ms));
  }
  if (op == "blob_stored") {
    std::string key, sha256;
    int64_t size = 0;
    f.String("key", &key, true, 4096);
    f.String("sha256", &sha256, true, 64);
    f.Int("size", &size, true, 0, INT64_MAX);
    if (!f.ok()) return DoneWith(Status::Internal(f.status().message()));
    return Step(coordinator_->BlobStoredPlan(key, size, sha256, now_ms));
  }
  if (op == "blob_place") {
    // An empty sha256 asks whether key holds any committed object (409) at all.
    std::string key, sha256;
    f.String("key", &key, true, 4096);
    f.String("sha256", &sha256, false, 64);
    if (!f.ok()) return DoneWith(Status::Internal(f.status().message()));
    return Step(coordinator_->BlobPlacePlan(key, sha256));
  }
  return DoneWith(Status::Internal("unknown op " + op));
}

std::string EdgeSession::Continue(int64_t handle, const std::string& result_json) {
  auto it = plans_.find(handle);
  if (it == plans_.end()) return DoneWith(Status::Internal("unknown plan handle"));
  Plan plan = std::move(it->second);
  plans_.erase(it);
  Result<Json> parsed = ParseJson(result_json, 64);
  core::BatchResult result;
  if (parsed.ok()) {
    result = BatchResultFromJson(*parsed);
  } else {
    result.status = Status::Internal("batch result: " + parsed.status().message());
  }
  if (result.status.ok() && result.results.size() != plan.batch().statements.size()) {
    result = core::BatchResult{};
    result.status = Status::Internal("batch result has the wrong number of statements");
  }
  return Step(plan.Continue(std::move(result)));
}

void EdgeSession::Drop(int64_t handle) {
  plans_.erase(handle);
}

std::string EdgeSession::AuthorizeBlob(const std::string& json) {
  if (!coordinator_) return DoneWith(Status::Unavailable("the core is not initialised"));
  Result<Json> parsed = ParseJson(json);
  std::string method, path, query;
  int64_t now_ms = 0;
  Status st;
  if (parsed.ok()) {
    FieldReader f(*parsed, "");
    f.String("method", &method, true, 16);
    f.String("path", &path, true, 8192);
    f.String("query", &query, false, 65536);
    f.Int("now_ms", &now_ms, true, 0, INT64_MAX);
    st = f.status();
  } else {
    st = parsed.status();
  }
  std::string out;
  Result<core::BlobGrant> g = st.ok() ? coordinator_->AuthorizeBlob(method, path, query, now_ms)
                                      : Result<core::BlobGrant>(st);
  if (!g.ok()) {
    out = "{\"ok\":false,\"response\":";
    AppendResponseJson(&out,
                       HttpResponse::Error(st.ok() ? g.status() : Status::Internal(st.message())));
    out += "}";
    return out;
  }
  Json grant = {
      {"key", g->key}, {"method", g->method}, {"max_size", g->max_size}, {"sha256", g->sha256}};
  return DumpJson({{"ok", true}, {"grant", grant}});
}

}  // namespace gleaner::edge
