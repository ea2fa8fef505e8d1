// libFuzzer target for the coordinator core's request pipeline: any method, path, query, headers
// and body go through Coordinator::Handle and are driven to completion on an in-memory SQLite
// database that holds an operator, a developer with a running job and a node holding its lease.
// Invariants: no crash or sanitizer report, never a 5xx, a JSON response body always parses.
//
// Input format (text, so real requests make good seeds):
//   line 1:  METHOD TARGET          TARGET may contain $JOB / $NODE (replaced by the seeded ids)
//   line 2:  token selector         o operator, d developer (job owner), D other developer,
//                                   n node (lease holder), N other node, e enroll, x bogus,
//                                   anything else: no token
//   then:    "name: value" header lines up to an empty line, then the body (rest of input).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "coordinator/core/coordinator.h"
#include "coordinator/native/db/sqlite_executor.h"
#include "shared/json.h"

namespace {

using gleaner::Json;
using namespace gleaner::core;

constexpr int64_t kNow = 1800000000000;
constexpr int kResetEvery = 200;  // requests accumulate state; start from scratch this often

gleaner::core::CoreConfig Config() {
  CoreConfig c;
  c.blob_signing_key = "0123456789abcdef0123456789abcdef";
  c.public_url = "http://blobs.test";
  return c;
}

struct World {
  Coordinator coord{Config()};
  std::unique_ptr<gleaner::native::SqliteExecutor> db;
  std::string tokens[7];  // o d D n N e x
  std::string job, node;
  int counter = 0;
  int used = 0;

  HttpResponse Call(const std::string& method, const std::string& path, const std::string& token,
                    const std::string& body, const std::string& query = "") {
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.query = query;
    if (!token.empty()) req.headers.emplace_back("authorization", "Bearer " + token);
    req.body = body;
    req.now_ms = kNow + counter * 1000;
    req.entropy = "fuzz-entropy-" + std::to_string(++counter);
    req.entropy.resize(40, '#');
    return Drive(coord.Handle(req), *db).response();
  }
  std::string Field(const HttpResponse& r, const char* a, const char* b = nullptr) {
    auto j = gleaner::ParseJson(r.body);
    if (!j.ok()) abort();
    Json v = (*j)[a];
    if (b) v = v[b];
    if (!v.is_string()) abort();
    return v.get<std::string>();
  }
  std::string Key(const char* role) {
    HttpResponse r = Call("POST", "/v1/keys", tokens[0],
                          std::string("{\"role\":\"") + role + "\",\"name\":\"fuzz\"}");
    if (r.status != 201) abort();
    return Field(r, "token");
  }
  std::pair<std::string, std::string> Node(const char* machine) {
    HttpResponse r = Call("POST", "/v1/nodes/register", tokens[5],
                          std::string("{\"machine_id\":\"") + machine +
                              "\",\"gpu\":{\"name\":\"RTX 4090\",\"vram_mb\":24000},"
                              "\"agent_version\":\"0.1.0\"}");
    if (r.status != 200) abort();
    return {Field(r, "node_id"), Field(r, "token")};
  }

  void Reset() {
    auto opened = gleaner::native::SqliteExecutor::Open({":memory:"});
    if (!opened.ok()) abort();
    db = std::move(opened).value();
    counter = 0;
    used = 0;
    if (Drive(coord.MigrationPlan(), *db).response().status != 200) abort();
    tokens[0] = "glt_operator_token_for_fuzzing";
    if (Drive(coord.BootstrapOperatorPlan(tokens[0], kNow), *db).response().status != 200) abort();
    tokens[1] = Key("developer");
    tokens[2] = Key("developer");
    tokens[5] = Key("enroll");
    tokens[6] = "glt_bogus_token";
    auto [n1, t1] = Node("fuzz-a");
    auto [n2, t2] = Node("fuzz-b");
    node = n1;
    tokens[3] = t1;
    tokens[4] = t2;
    HttpResponse s = Call("POST", "/v1/jobs", tokens[1],
                          "{\"kind\":\"synthetic\",\"params\":{\"steps\":100,"
                          "\"checkpoint_every\":10}}");
    if (s.status != 201) abort();
    job = Field(s, "id");
    HttpResponse w = Call("POST", "/v1/work", tokens[3], "{}");
    if (w.status != 200) abort();
  }
};

void ReplaceAll(std::string* s, const std::string& from, const std::string& to) {
  for (size_t p = s->find(from); p != std::string::npos; p = s->find(from, p + to.size())) {
    s->replace(p, from.size(), to);
  }
}

std::string NextLine(const std::string& in, size_t* pos) {
  size_t end = in.find('\n', *pos);
  if (end == std::string::npos) end = in.size();
  std::string line = in.substr(*pos, end - *pos);
  *pos = end < in.size() ? end + 1 : end;
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = [] {
    auto* w = new World();
    w->Reset();
    return w;
  }();
  if (++world->used > kResetEvery) world->Reset();

  std::string in(reinterpret_cast<const char*>(data), size);
  size_t pos = 0;
  std::string first = NextLine(in, &pos);
  std::string selector = NextLine(in, &pos);

  HttpRequest req;
  size_t sp = first.find(' ');
  req.method = first.substr(0, sp);
  std::string target = sp == std::string::npos ? "" : first.substr(sp + 1);
  ReplaceAll(&target, "$JOB", world->job);
  ReplaceAll(&target, "$NODE", world->node);
  size_t q = target.find('?');
  req.path = target.substr(0, q);
  if (q != std::string::npos) req.query = target.substr(q + 1);

  static const char kSelectors[] = "odDnNex";
  for (int i = 0; i < 7; ++i) {
    if (!selector.empty() && selector[0] == kSelectors[i]) {
      req.headers.emplace_back("authorization", "Bearer " + world->tokens[i]);
    }
  }
  while (pos < in.size()) {
    std::string line = NextLine(in, &pos);
    if (line.empty()) break;
    size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    req.headers.emplace_back(name, value);
  }
  req.body = in.substr(pos);
  req.now_ms = kNow + world->counter * 1000;
  req.entropy = "fuzz-entropy-" + std::to_string(++world->counter);
  req.entropy.resize(40, '#');

  Plan plan = Drive(world->coord.Handle(req), *world->db);
  const HttpResponse& r = plan.response();
  if (r.status < 100 || r.status >= 500) abort();
  if (r.content_type == "application/json" && !r.body.empty() && !gleaner::ParseJson(r.body).ok()) {
    abort();
  }
  return 0;
}
