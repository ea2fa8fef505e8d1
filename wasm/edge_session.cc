#include "wasm/edge_session.h"

#include <utility>

#include "coordinator/core/settings.h"
#include "wasm/wire_json.h"

namespace gleaner::edge {

using core::HttpResponse;
using core::Plan;

namespace {

std::string DoneWith(const HttpResponse& response) {
  std::string out = "{\"done\":true,\"response\":";
  AppendResponseJson(&out, response);
  out += ",\"blob_deletes\":[]}";
  return out;
}
std::string DoneWith(const Status& st) {
  return DoneWith(HttpResponse::Error(st));
}

// {"ok":false,"response":...}: the answer of a refused blob request.
std::string Refused(const HttpResponse& response) {
  std::string out = "{\"ok\":false,\"response\":";
  AppendResponseJson(&out, response);
  out += "}";
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

std::string EdgeSession::Settings() const {
  static const char* const kKinds[] = {"string", "seconds", "number", "integer", "boolean", "rate"};
  Json out = Json::array();
  for (const core::Setting& s : core::CoreSettings()) {
    Json e = {{"name", s.name},
              {"env", core::SettingEnvName(s.name)},
              {"kind", kKinds[int(s.kind)]},
              {"default", core::SettingDefault(s)},
              {"doc", s.doc}};
    if (coordinator_) e["value"] = s.get(coordinator_->config());
    out.push_back(std::move(e));
  }
  return DumpJson(out);
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
    out += "]";
    const core::PoolActions& pool = plan.pool_actions();
    if (!pool.empty()) {
      out += ",\"pool\":{\"target\":" + std::to_string(pool.target) + ",\"reallocate\":[";
      for (size_t i = 0; i < pool.reallocate.size(); ++i) {
        out += i > 0 ? ",{\"node_id\":" : "{\"node_id\":";
        AppendJsonString(&out, pool.reallocate[i].node_id);
        out += ",\"machine_id\":";
        AppendJsonString(&out, pool.reallocate[i].machine_id);
        out.push_back('}');
      }
      out += "]}";
    }
    out.push_back('}');
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
    std::string raw = std::move(req->path);
    if (!core::DecodePath(raw, &req->path)) return DoneWith(core::MalformedTarget());
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
  if (!coordinator_) return Refused(HttpResponse::Error(Status::Unavailable("not initialised")));
  Result<Json> parsed = ParseJson(json);
  std::string method, raw_path, path, query;
  int64_t now_ms = 0;
  Status st;
  if (parsed.ok()) {
    FieldReader f(*parsed, "");
    f.String("method", &method, true, 16);
    f.String("path", &raw_path, true, 8192);
    f.String("query", &query, false, 65536);
    f.Int("now_ms", &now_ms, true, 0, INT64_MAX);
    st = f.status();
  } else {
    st = parsed.status();
  }
  if (!st.ok()) return Refused(HttpResponse::Error(Status::Internal(st.message())));
  if (!core::DecodePath(raw_path, &path)) return Refused(core::MalformedTarget());
  Result<core::BlobGrant> g = coordinator_->AuthorizeBlob(method, path, query, now_ms);
  if (!g.ok()) return Refused(HttpResponse::Error(g.status()));
  Json grant = {
      {"key", g->key}, {"method", g->method}, {"max_size", g->max_size}, {"sha256", g->sha256}};
  return DumpJson({{"ok", true}, {"grant", grant}});
}

std::string EdgeSession::Blob(const std::string& json) {
  auto answer = [](const std::optional<HttpResponse>& refusal) {
    return refusal ? Refused(*refusal) : std::string("{\"ok\":true}");
  };
  if (!coordinator_) return answer(HttpResponse::Error(Status::Unavailable("not initialised")));
  Result<Json> parsed = ParseJson(json);
  if (!parsed.ok()) return answer(HttpResponse::Error(Status::Internal(parsed.status().message())));
  const Json& j = *parsed;
  FieldReader f(j, "blob.");
  std::string op, key, sha256, name, range;
  bool put = false;
  int64_t size = 0, content_length = -1, elapsed_ms = 0, moved = 0;
  f.String("op", &op, true, 32);
  f.String("key", &key, false, 4096);
  f.Bool("put", &put, false);
  f.String("sha256", &sha256, false, 64);
  f.String("name", &name, false, 64);
  f.String("range", &range, false, 4096);
  f.Int("size", &size, false, 0, INT64_MAX);
  f.Int("content_length", &content_length, false, -1, INT64_MAX);
  f.Int("elapsed_ms", &elapsed_ms, false, 0, INT64_MAX);
  f.Int("moved", &moved, false, 0, INT64_MAX);
  core::BlobGrant grant;
  const Json* g = nullptr;
  if (f.Has("grant") && f.Object("grant", &g, false)) {
    FieldReader gr(*g, "blob.grant.");
    gr.String("key", &grant.key, true, 4096);
    gr.String("method", &grant.method, false, 16);
    gr.Int("max_size", &grant.max_size, true, -1, INT64_MAX);
    gr.String("sha256", &grant.sha256, false, 64);
    if (!gr.ok()) return answer(HttpResponse::Error(Status::Internal(gr.status().message())));
  }
  if (!f.ok()) return answer(HttpResponse::Error(Status::Internal(f.status().message())));
  if (op == "admit") return answer(admission_.Admit(key, put));
  if (op == "release") {
    admission_.Release(key, put);
    return answer(std::nullopt);
  }
  if (op == "put_head") return answer(core::CheckPutHead(grant, content_length, true));
  if (op == "put_body") return answer(core::CheckPutBody(grant, size, sha256));
  const core::BlobRateLimit rate = coordinator_->config().blob_rate();
  if (op == "budget") {
    return "{\"ok\":true,\"budget_ms\":" +
           std::to_string(core::BlobTransferBudgetMs(rate, elapsed_ms, moved)) + "}";
  }
  if (op == "read") {
    core::BlobRead read = core::DecideBlobRead(f.Has("range") ? &range : nullptr, size);
    if (read.refusal) return answer(read.refusal);
    Json headers = Json::array();
    for (const auto& [k, v] : read.headers) headers.push_back({k, v});
    return DumpJson({{"ok", true},
                     {"status", read.status},
                     {"first", read.first},
                     {"length", read.length},
                     {"headers", headers}});
  }
  if (op == "refusal") {
    if (name == "too_slow") return answer(core::TooSlowResponse(rate));
    for (const core::BlobRefusalRow& row : core::BlobRefusalTable()) {
      if (name == row.name) return answer(core::BlobRefusalResponse(row.refusal));
    }
  }
  return answer(HttpResponse::Error(Status::Internal("unknown blob op " + op + " " + name)));
}

}  // namespace gleaner::edge
