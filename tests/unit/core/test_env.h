// Test fixture for the core: an in-memory SQLite database, a fake clock, deterministic entropy,
// and helpers that call routes as a role. Header-only; every *_test.cc may include it.
#pragma once

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/core/coordinator.h"
#include "coordinator/native/db/sqlite_executor.h"
#include "shared/json.h"
#include "shared/sha256.h"

namespace gleaner::testing {

using core::Batch;
using core::CoreConfig;
using core::Rows;
using core::SqlValue;

struct Resp {
  int status = 0;
  std::string body;
  Json json;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> deletes;
  std::string content_type;
  std::string Header(const std::string& name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return "";
  }
  std::string ErrorCode() const {
    if (json.is_object() && json.contains("error") && json["error"].is_object()) {
      return json["error"].value("code", "");
    }
    return "";
  }
};

struct NodeRef {
  std::string id, token;
};

inline CoreConfig TestConfig() {
  CoreConfig c;
  c.blob_signing_key = "0123456789abcdef0123456789abcdef";
  c.public_url = "http://blobs.test";
  c.heartbeat_interval_s = 30;
  c.stall_after_s = 60;
  return c;
}

class TestEnv {
 public:
  // limiter: where rate-limit buckets live (null: no rate limits); callers: remembered callers
  // (null: every request looks its token up).
  explicit TestEnv(CoreConfig config = TestConfig(), core::RateLimiter* limiter = nullptr,
                   core::CallerCache* callers = nullptr)
      : coord(std::move(config), limiter, callers) {
    auto opened = native::SqliteExecutor::Open({":memory:"});
    REQUIRE(opened.ok());
    db = std::move(opened).value();
    REQUIRE(core::Drive(coord.MigrationPlan(), *db).response().status == 200);
    operator_token = "glt_operator_token_for_tests";
    REQUIRE(
        core::Drive(coord.BootstrapOperatorPlan(operator_token, now_ms), *db).response().status ==
        200);
  }

  core::Coordinator coord;
  std::unique_ptr<native::SqliteExecutor> db;
  int64_t now_ms = 1800000000000;  // 2027-01-15T08:00:00Z
  std::string operator_token;
  int entropy_counter = 0;
  int64_t batches = 0;                    // batches run by Raw() (database round trips)
  core::SqlExecutor* executor = nullptr;  // where Raw() runs batches; null: db

  void Advance(double seconds) { now_ms += int64_t(seconds * 1000); }

  std::string NextEntropy() {
    std::string e = "entropy-" + std::to_string(++entropy_counter);
    e.resize(40, '#');
    return e;
  }

  Resp Raw(const std::string& method, const std::string& target, const std::string& token,
           const std::string& body, std::vector<std::pair<std::string, std::string>> headers = {}) {
    core::HttpRequest req;
    req.method = method;
    size_t q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos) req.query = target.substr(q + 1);
    req.headers = std::move(headers);
    if (!token.empty()) req.headers.emplace_back("authorization", "Bearer " + token);
    req.body = body;
    req.now_ms = now_ms;
    req.entropy = NextEntropy();
    core::Plan p = coord.Handle(req);
    while (!p.done()) {
      ++batches;
      p = p.Continue(executor != nullptr ? executor->Execute(p.batch()) : db->Execute(p.batch()));
    }
    Resp r;
    r.status = p.response().status;
    r.body = p.response().body;
    r.headers = p.response().headers;
    r.deletes = p.blob_deletes();
    r.content_type = p.response().content_type;
    if (r.content_type == "application/json" && !r.body.empty()) {
      auto parsed = ParseJson(r.body);
      if (parsed.ok()) r.json = std::move(parsed).value();
    }
    return r;
  }
  Resp Get(const std::string& target, const std::string& token) {
    return Raw("GET", target, token, "");
  }
  Resp Post(const std::string& target, const std::string& token, const Json& body = Json::object(),
            std::vector<std::pair<std::string, std::string>> headers = {}) {
    return Raw("POST", target, token, DumpJson(body), std::move(headers));
  }
  Resp Put(const std::string& target, const std::string& token, const Json& body) {
    return Raw("PUT", target, token, DumpJson(body));
  }

  // A fresh API key of role; returns its token.
  std::string Key(const std::string& role, const std::string& name = "test") {
    Resp r = Post("/v1/keys", operator_token, {{"role", role}, {"name", name}});
    REQUIRE(r.status == 201);
    return r.json["token"].get<std::string>();
  }
  std::string Developer() { return Key("developer"); }

  NodeRef Node(const std::string& machine, int64_t vram_mb = 24000,
               const std::string& gpu = "RTX 4090") {
    if (enroll_token.empty()) enroll_token = Key("enroll");
    Json body = {{"machine_id", machine},
                 {"gpu", {{"name", gpu}, {"vram_mb", vram_mb}}},
                 {"agent_version", "0.1.0"}};
    // Registering a machine again proves it holds the node secret of its first registration.
    auto known = node_secrets.find(machine);
    if (known != node_secrets.end()) body["node_secret"] = known->second;
    Resp r = Post("/v1/nodes/register", enroll_token, body);
    REQUIRE(r.status == 200);
    if (r.json.contains("node_secret"))
      node_secrets[machine] = r.json["node_secret"].get<std::string>();
    return {r.json["node_id"].get<std::string>(), r.json["token"].get<std::string>()};
  }

  // Submits a synthetic job; returns its id.
  std::string Submit(const std::string& dev, int64_t steps = 100, int64_t priority = 0,
                     Json extra = Json::object()) {
    Json body = {{"kind", "synthetic"},
                 {"params", {{"steps", steps}, {"checkpoint_every", 10}}},
                 {"priority", priority}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    Resp r = Post("/v1/jobs", dev, body);
    INFO(r.body);
    REQUIRE(r.status == 201);
    return r.json["id"].get<std::string>();
  }

  // POST /v1/work as the node.
  Resp Claim(const NodeRef& node) { return Post("/v1/work", node.token); }
  std::string ClaimedJob(const NodeRef& node) {
    Resp r = Claim(node);
    INFO(r.body);
    REQUIRE(r.status == 200);
    return r.json["job"]["id"].get<std::string>();
  }

  Resp Heartbeat(const NodeRef& node, const std::string& job, int64_t epoch, int64_t step) {
    return Post("/v1/jobs/" + job + "/heartbeat", node.token, {{"epoch", epoch}, {"step", step}});
  }

  // Uploads (records as stored) and commits a checkpoint; returns the commit response.
  Resp Checkpoint(const NodeRef& node, const std::string& job, int64_t epoch, int64_t step,
                  const std::string& content = "") {
    Resp url =
        Post("/v1/jobs/" + job + "/checkpoints", node.token, {{"epoch", epoch}, {"step", step}});
    if (url.status != 200) return url;
    std::string bytes = content.empty() ? "ckpt-" + job + "-" + std::to_string(step) : content;
    StoreBlob(url.json["key"].get<std::string>(), bytes);
    return Post("/v1/jobs/" + job + "/checkpoints/" + std::to_string(step) + "/commit", node.token,
                {{"epoch", epoch}, {"sha256", Sha256Hex(bytes)}, {"size", int64_t(bytes.size())}});
  }

  // Uploads one output and completes the job. The lease is recorded as having reached the
  // last step, which complete requires (directly, so that the tests' billing stays as
  // written; lease_test.cc checks the rule itself through the API).
  Resp Complete(const NodeRef& node, const std::string& job, int64_t epoch) {
    Query("UPDATE jobs SET step_done = steps_total WHERE id = ? AND lease_epoch = ?", {job, epoch});
    Resp url =
        Post("/v1/jobs/" + job + "/outputs", node.token, {{"epoch", epoch}, {"name", "chain.txt"}});
    if (url.status != 200) return url;
    std::string bytes = "chain of " + job + "\n";
    StoreBlob(url.json["key"].get<std::string>(), bytes);
    return Post("/v1/jobs/" + job + "/complete", node.token,
                {{"epoch", epoch},
                 {"outputs", Json::array({{{"name", "chain.txt"},
                                           {"sha256", Sha256Hex(bytes)},
                                           {"size", int64_t(bytes.size())}}})}});
  }

  void StoreBlob(const std::string& key, const std::string& bytes) {
    REQUIRE(
        core::Drive(coord.BlobStoredPlan(key, int64_t(bytes.size()), Sha256Hex(bytes), now_ms), *db)
            .response()
            .status == 204);
  }

  Rows Query(const std::string& sql, std::vector<SqlValue> params = {}) {
    Batch b;
    b.Add(sql, std::move(params));
    auto r = db->Execute(b);
    INFO(r.status.ToString());
    REQUIRE(r.status.ok());
    return r.results[0];
  }
  int64_t Scalar(const std::string& sql, std::vector<SqlValue> params = {}) {
    Rows r = Query(sql, std::move(params));
    REQUIRE(!r.empty());
    return r.rows[0][0].AsInt();
  }
  std::string JobState(const std::string& job) {
    Rows r = Query("SELECT state FROM jobs WHERE id = ?", {job});
    REQUIRE(!r.empty());
    return r.rows[0][0].AsText();
  }

  // Every row of every table, for "nothing changed" assertions.
  std::string Snapshot() {
    std::string out;
    for (const char* t : {"api_keys", "nodes", "jobs", "job_bans", "segments", "checkpoints",
                          "blobs", "uploads", "prices", "scaling_events", "verifications"}) {
      Rows r = Query(std::string("SELECT * FROM ") + t + " ORDER BY 1, 2");
      out += std::string("#") + t + "\n";
      for (const auto& row : r.rows) {
        for (const SqlValue& v : row) {
          out += v.is_null()                         ? "NULL"
                 : v.type() == SqlValue::Type::kText ? v.AsText()
                                                     : std::to_string(v.AsReal());
          out += "|";
        }
        out += "\n";
      }
    }
    return out;
  }

 private:
  std::string enroll_token;
  std::map<std::string, std::string> node_secrets;  // machine_id -> node secret
};

}  // namespace gleaner::testing
