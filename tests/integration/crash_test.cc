// kill -9 the real coordinator at random moments under load, many times. After every restart the
// database passes integrity_check, the store is consistent (store_check.h: every committed
// checkpoint downloads with its sha256, no metadata points at a missing object, no temp file is
// left), and nothing a client was told (a 2xx answer) is lost: jobs, leases, heartbeats,
// checkpoints, releases, completions; no job is ever held by two nodes and epochs never go back.
//
// Load: node threads speak the agent protocol (claim, a heartbeat per step, checkpoint URL + PUT
// + commit, output PUT + complete; sometimes a release, sometimes the agent silently vanishes so
// its lease stalls and another node takes over), developer threads submit jobs (with an
// Idempotency-Key) and poll them. Every acknowledged answer is recorded in an AckLog. A client
// that gets no answer parks until the controller has restarted the coordinator (new port) and
// checked it, then sends the same request again.
//
// GLEANER_CRASH_SEED reproduces a run's kill schedule and client choices (printed at start);
// GLEANER_CRASH_KILLS sets the number of kills (default 50).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "coordinator/core/http.h"
#include "coordinator/native/sqlite_executor.h"
#include "shared/sha256.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"
#include "tests/integration/store_check.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

constexpr int kNodes = 6;
constexpr int kDevelopers = 2;
constexpr int64_t kSteps = 6;
constexpr int64_t kCheckpointEvery = 2;
constexpr int kKeepCheckpoints = 3;  // the coordinator's default

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t TimeMs(const Json& v) {
  int64_t ms = 0;
  if (!v.is_string() || !core::ParseTime(v.get<std::string>(), &ms)) return 0;
  return ms;
}

// Where the coordinator is now, and the barrier that holds clients while it is down.
class Controller {
 public:
  void Up(const std::string& base) {
    std::lock_guard<std::mutex> lock(mu_);
    base_ = base;
    down_ = false;
    ++generation_;
    cv_.notify_all();
  }
  void Down() {
    std::lock_guard<std::mutex> lock(mu_);
    down_ = true;
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  bool stopped() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }
  std::string Base(int* generation) {
    std::lock_guard<std::mutex> lock(mu_);
    *generation = generation_;
    return base_;
  }
  // Waits until n clients are parked (all of them: no request is in flight).
  bool WaitParked(int n, Millis timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return parked_ >= n; });
  }
  // A client got no answer. While the coordinator is down: parks until it is up again. False
  // when the test is over (give up the request).
  bool Park() {
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) return false;
    if (!down_) {
      ++no_answer_while_up_;
      lock.unlock();
      std::this_thread::sleep_for(Millis(5));
      return true;
    }
    ++parked_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !down_ || stop_; });
    --parked_;
    return !stop_;
  }
  int no_answer_while_up() {
    std::lock_guard<std::mutex> lock(mu_);
    return no_answer_while_up_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string base_;
  int generation_ = 0;
  bool down_ = true;
  bool stop_ = false;
  int parked_ = 0;
  int no_answer_while_up_ = 0;
};

// One thread's connection to whichever coordinator process is current.
class Client {
 public:
  Client(Controller* ctl, std::string token) : ctl_(ctl), token_(std::move(token)) {}

  // Sends until an answer comes (parking while the coordinator is down). *retried: the request
  // had to be sent again, so an earlier copy may have taken effect.
  HttpResult Call(const std::string& method, const std::string& path, const std::string& body,
                  bool* retried, const Headers& headers = {}, bool absolute = false) {
    *retried = false;
    for (;;) {
      int generation = 0;
      std::string base = ctl_->Base(&generation);
      if (!http_ || generation != generation_) {
        http_ = std::make_unique<HttpClient>(base);
        http_->set_token(token_);
        generation_ = generation;
      }
      HttpResult r;
      if (absolute) {
        // A signed blob URL minted for an earlier port: same path and query, current port.
        r = HttpClient::Fetch(method, base + path.substr(path.find("/blobs/")), body,
                              "application/octet-stream", headers);
      } else {
        r = http_->Request(method, path, body, "application/json", headers);
      }
      if (r.status != 0) return r;
      if (!ctl_->Park()) return r;
      *retried = true;
    }
  }
  HttpResult Post(const std::string& path, const Json& body, bool* retried,
                  const Headers& headers = {}) {
    return Call("POST", path, DumpJson(body), retried, headers);
  }

 private:
  Controller* ctl_;
  std::string token_;
  std::unique_ptr<HttpClient> http_;
  int generation_ = -1;
};

struct LeaseAck {
  std::string node;
  int64_t expires_ms = 0;  // latest acknowledged expiry
  int heartbeats = 0;
  int64_t max_step = 0;
  bool end_sent = false;  // the holder sent release/complete (it may have taken effect)
  bool released = false;
  bool completed = false;
};

struct CommitAck {
  std::string job;
  int64_t epoch, step;
  std::string sha;
  int64_t size;
};

// Everything acknowledged with a 2xx, and what clients saw that must never happen.
struct AckLog {
  std::mutex mu;
  std::set<std::string> jobs;
  std::map<std::pair<std::string, int64_t>, LeaseAck> leases;
  std::map<std::string, int64_t> max_epoch;
  std::vector<CommitAck> commits;
  std::map<std::string, std::string> completes;       // job -> output sha256
  std::map<std::string, std::set<std::string>> puts;  // key -> sha256 of every body PUT to it
  std::vector<std::string> violations;
  int lost_leases = 0, vanished = 0, releases = 0, resumes = 0;

  void Put(const std::string& key, const std::string& body) {
    std::lock_guard<std::mutex> lock(mu);
    puts[key].insert(Sha256Hex(body));
  }
  void Violation(const std::string& v) {
    std::lock_guard<std::mutex> lock(mu);
    if (violations.size() < 50) violations.push_back(v);
  }
};

std::string Bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = char(rng());
  return s;
}

void Node(int index, uint64_t seed, const NodeCredentials& cred, Controller* ctl, AckLog* log) {
  std::mt19937_64 rng(seed * 1000003 + uint64_t(index));
  Client c(ctl, cred.token);
  bool retried = false;
  auto unexpected = [&](const std::string& what, const HttpResult& r) {
    // After a retry the first copy may have changed things (a 409 is then an answer).
    if (!(retried && r.status / 100 == 4) && !ctl->stopped()) {
      log->Violation(cred.id + " " + what + ": " + r.Describe());
    }
  };
  while (!ctl->stopped()) {
    HttpResult work = c.Post("/v1/work", Json::object(), &retried);
    if (work.status == 204 || work.status == 503 || work.status == 429) {
      std::this_thread::sleep_for(Millis(3));
      continue;
    }
    if (work.status != 200) {
      unexpected("work", work);
      continue;
    }
    Json w = work.json();
    const std::string job = w["job"]["id"].get<std::string>();
    const int64_t epoch = w["lease"]["epoch"].get<int64_t>();
    const std::string base = "/v1/jobs/" + job;
    {
      std::lock_guard<std::mutex> lock(log->mu);
      auto key = std::make_pair(job, epoch);
      if (log->leases.count(key) || log->max_epoch[job] >= epoch) {
        log->violations.push_back(job + " epoch " + std::to_string(epoch) + " claimed by " +
                                  cred.id + " after epoch " + std::to_string(log->max_epoch[job]) +
                                  " was acknowledged");
      }
      log->max_epoch[job] = std::max(log->max_epoch[job], epoch);
      LeaseAck& l = log->leases[key];
      l.node = cred.id;
      l.expires_ms = TimeMs(w["lease"]["expires_at"]);
    }
    int64_t step = 0;
    if (w.contains("resume")) {
      // The newest committed checkpoint is there, whole.
      const Json& resume = w["resume"];
      step = resume["step"].get<int64_t>();
      HttpResult got = c.Call("GET", resume["url"].get<std::string>(), "", &retried, {}, true);
      if (got.status != 200 || Sha256Hex(got.body) != resume["sha256"].get<std::string>()) {
        log->Violation(job + " resume from step " + std::to_string(step) + ": " +
                       std::to_string(got.status) + ", sha256 " + Sha256Hex(got.body) +
                       " expected " + resume["sha256"].get<std::string>());
      }
      std::lock_guard<std::mutex> lock(log->mu);
      ++log->resumes;
    }
    // An answer to a lease write that is not 2xx. 409 = the lease is gone: legitimate only once
    // its acknowledged expiry has passed (the coordinator was down long enough), or after a
    // retry (the first copy may have ended it).
    auto refused = [&](const std::string& what, const HttpResult& r) {
      if (r.status != 409) return unexpected(what + " " + job, r);
      const int64_t now = NowMs();
      std::lock_guard<std::mutex> lock(log->mu);
      const int64_t expires = log->leases[{job, epoch}].expires_ms;
      if (now < expires && !retried && log->violations.size() < 50) {
        log->violations.push_back(what + " " + job + " epoch " + std::to_string(epoch) +
                                  ": lease lost at " + std::to_string(now) +
                                  " though acknowledged until " + std::to_string(expires) + ": " +
                                  r.Describe());
      }
      ++log->lost_leases;
    };
    const int64_t vanish_at = rng() % 12 == 0 ? int64_t(rng() % kSteps) + 1 : -1;
    bool holding = true;
    while (holding && step < kSteps && !ctl->stopped()) {
      ++step;
      std::this_thread::sleep_for(Millis(1 + int(rng() % 3)));  // training
      HttpResult hb = c.Post(base + "/heartbeat", {{"epoch", epoch}, {"step", step}}, &retried);
      if (hb.status == 200) {
        std::lock_guard<std::mutex> lock(log->mu);
        LeaseAck& l = log->leases[{job, epoch}];
        l.expires_ms = std::max(l.expires_ms, TimeMs(hb.json()["lease_expires_at"]));
        l.heartbeats++;
        l.max_step = std::max(l.max_step, step);
      } else {
        refused("heartbeat", hb);
        holding = false;
        break;
      }
      if (step == vanish_at) {
        std::lock_guard<std::mutex> lock(log->mu);
        ++log->vanished;  // an agent killed mid-job: its lease must stall, then move on
        holding = false;
        break;
      }
      if (step % kCheckpointEvery != 0 || step == kSteps) continue;
      HttpResult url = c.Post(base + "/checkpoints", {{"epoch", epoch}, {"step", step}}, &retried);
      if (url.status != 200) {
        refused("checkpoint url", url);
        holding = false;
        break;
      }
      // Mostly small; now and then large enough that a kill lands inside the upload.
      size_t size = rng() % 16 == 0 ? 128 * 1024 + rng() % (384 * 1024) : 1 + rng() % 16384;
      std::string bytes = Bytes(rng, size);
      log->Put(url.json()["key"].get<std::string>(), bytes);
      HttpResult put =
          c.Call("PUT", url.json()["url"].get<std::string>(), bytes, &retried, {}, true);
      if (put.status / 100 != 2) {
        unexpected("checkpoint PUT " + job, put);
        holding = false;
        break;
      }
      const std::string sha = Sha256Hex(bytes);
      HttpResult commit =
          c.Post(base + "/checkpoints/" + std::to_string(step) + "/commit",
                 {{"epoch", epoch}, {"sha256", sha}, {"size", int64_t(size)}}, &retried);
      if (commit.status == 200) {
        std::lock_guard<std::mutex> lock(log->mu);
        log->commits.push_back({job, epoch, step, sha, int64_t(size)});
      } else {
        refused("commit", commit);
        holding = false;
      }
    }
    if (!holding || step < kSteps) continue;
    {
      std::lock_guard<std::mutex> lock(log->mu);
      log->leases[{job, epoch}].end_sent = true;
    }
    if (rng() % 8 == 0) {
      HttpResult rel = c.Post(base + "/release", {{"epoch", epoch}, {"reason", "test"}}, &retried);
      if (rel.status == 200) {
        std::lock_guard<std::mutex> lock(log->mu);
        log->leases[{job, epoch}].released = true;
        ++log->releases;
      } else {
        refused("release", rel);
      }
      continue;
    }
    HttpResult out = c.Post(base + "/outputs", {{"epoch", epoch}, {"name", "out.txt"}}, &retried);
    if (out.status != 200) {
      refused("outputs", out);
      continue;
    }
    std::string result = "result of " + job + " " + Bytes(rng, 16);
    log->Put(out.json()["key"].get<std::string>(), result);
    HttpResult put =
        c.Call("PUT", out.json()["url"].get<std::string>(), result, &retried, {}, true);
    if (put.status / 100 != 2) {
      unexpected("output PUT " + job, put);
      continue;
    }
    const std::string sha = Sha256Hex(result);
    HttpResult done = c.Post(
        base + "/complete",
        {{"epoch", epoch},
         {"outputs",
          Json::array({{{"name", "out.txt"}, {"sha256", sha}, {"size", int64_t(result.size())}}})}},
        &retried);
    if (done.status == 200) {
      std::lock_guard<std::mutex> lock(log->mu);
      log->leases[{job, epoch}].completed = true;
      log->completes[job] = sha;
    } else {
      refused("complete", done);
    }
  }
}

void Developer(int index, uint64_t seed, const std::string& token, Controller* ctl, AckLog* log) {
  std::mt19937_64 rng(seed * 7919 + uint64_t(index));
  Client c(ctl, token);
  bool retried = false;
  std::vector<std::string> open;  // own jobs not yet seen final
  size_t poll = 0;
  for (int n = 0; !ctl->stopped(); ++n) {
    if (open.size() < 12) {
      std::string key = "dev" + std::to_string(index) + "-" + std::to_string(n);
      Json body = {{"kind", "synthetic"},
                   {"priority", int64_t(rng() % 3)},
                   {"params", {{"steps", kSteps}, {"checkpoint_every", kCheckpointEvery}}}};
      HttpResult r = c.Post("/v1/jobs", body, &retried, {{"Idempotency-Key", key}});
      if (r.status == 200 || r.status == 201) {
        std::string id = r.json()["id"].get<std::string>();
        open.push_back(id);
        std::lock_guard<std::mutex> lock(log->mu);
        log->jobs.insert(id);
      } else if (r.status != 429 && r.status != 503 && !ctl->stopped()) {
        log->Violation("submit: " + r.Describe());
      }
      continue;
    }
    // Poll one of the open jobs; a job whose submission was acknowledged always exists.
    const std::string id = open[poll++ % open.size()];
    HttpResult r = c.Call("GET", "/v1/jobs/" + id, "", &retried);
    std::string state = r.status == 200 ? r.json().value("state", "") : "";
    if (r.status != 200 && !ctl->stopped()) log->Violation("GET job " + id + ": " + r.Describe());
    if (state == "completed" || state == "failed") {
      open.erase(std::find(open.begin(), open.end(), id));
    }
    std::this_thread::sleep_for(Millis(2));
  }
}

std::string Str(const core::SqlValue& v) {
  return v.is_null() ? "" : v.AsText();
}

// The database against the acknowledged log (clients are parked: the log is complete).
// whole: keys of objects already found whole (objects are never rewritten with other bytes).
std::vector<std::string> CheckAgainstLog(AckLog* log, const std::string& db_path,
                                         const std::string& data_dir,
                                         std::set<std::string>* whole) {
  std::vector<std::string> problems;
  auto db = native::SqliteExecutor::Open({db_path});
  if (!db.ok()) return {"open database: " + db.status().ToString()};
  core::Batch b;
  b.Add(
      "SELECT id, state, lease_epoch, node_id, lease_expires_at, ckpt_step, ckpt_sha256 FROM jobs");
  b.Add(
      "SELECT job_id, epoch, node_id, started_at, heartbeats, step_end, ended_at, end_reason "
      "FROM segments ORDER BY job_id, epoch");
  b.Add("SELECT job_id, step, epoch, sha256, size FROM checkpoints");
  b.Add("SELECT id, outputs FROM jobs WHERE state = 'completed'");
  auto r = (*db)->Execute(b);
  if (!r.status.ok()) return {"read database: " + r.status.ToString()};
  struct JobRow {
    std::string state, node;
    int64_t epoch = 0, expires = 0, ckpt_step = -1;
    std::string ckpt_sha, outputs;
  };
  struct SegRow {
    std::string node, end_reason;
    int64_t started = 0, heartbeats = 0, step_end = 0;
    bool ended = false;
  };
  std::map<std::string, JobRow> jobs;
  for (const auto& row : r.results[0].rows) {
    JobRow& j = jobs[Str(row[0])];
    j.state = Str(row[1]);
    j.epoch = row[2].AsInt();
    j.node = Str(row[3]);
    j.expires = row[4].is_null() ? 0 : row[4].AsInt();
    j.ckpt_step = row[5].is_null() ? -1 : row[5].AsInt();
    j.ckpt_sha = Str(row[6]);
  }
  std::map<std::string, std::map<int64_t, SegRow>> segs;
  for (const auto& row : r.results[1].rows) {
    SegRow& s = segs[Str(row[0])][row[1].AsInt()];
    s.node = Str(row[2]);
    s.started = row[3].AsInt();
    s.heartbeats = row[4].AsInt();
    s.step_end = row[5].AsInt();
    s.ended = !row[6].is_null();
    s.end_reason = Str(row[7]);
  }
  std::map<std::pair<std::string, int64_t>, std::pair<std::string, int64_t>> ckpts;
  std::map<std::string, std::vector<int64_t>> ckpt_steps;
  for (const auto& row : r.results[2].rows) {
    ckpts[{Str(row[0]), row[1].AsInt()}] = {Str(row[3]), row[4].AsInt()};
    ckpt_steps[Str(row[0])].push_back(row[1].AsInt());
  }
  for (const auto& row : r.results[3].rows) jobs[Str(row[0])].outputs = Str(row[1]);

  std::lock_guard<std::mutex> lock(log->mu);
  // Every object in the store, with or without metadata, is whole: exactly one of the bodies
  // PUT to its key (never a prefix of one, never a temp file under an object's key).
  for (const std::string& key : ListObjects(data_dir)) {
    if (whole->count(key)) continue;
    auto sent = log->puts.find(key);
    std::string sha = Sha256Hex(ReadFile(data_dir + "/blobs/" + key));
    if (sent == log->puts.end() || !sent->second.count(sha)) {
      problems.push_back("object " + key + " (sha256 " + sha + ") is not a body PUT to it");
    } else {
      whole->insert(key);
    }
  }
  for (const std::string& id : log->jobs) {
    if (!jobs.count(id)) problems.push_back("acknowledged job " + id + " is gone");
  }
  for (const auto& [key, ack] : log->leases) {
    const auto& [id, epoch] = key;
    const std::string what = id + " epoch " + std::to_string(epoch);
    auto seg = segs[id].find(epoch);
    if (seg == segs[id].end()) {
      problems.push_back("acknowledged lease " + what + " has no segment");
      continue;
    }
    const SegRow& s = seg->second;
    const JobRow& j = jobs[id];
    if (s.node != ack.node) problems.push_back(what + " segment names node " + s.node);
    if (s.heartbeats < ack.heartbeats || s.step_end < ack.max_step) {
      problems.push_back(what + " segment has " + std::to_string(s.heartbeats) +
                         " heartbeats up to step " + std::to_string(s.step_end) + ", " +
                         std::to_string(ack.heartbeats) + " up to step " +
                         std::to_string(ack.max_step) + " were acknowledged");
    }
    if (j.epoch < epoch) {
      problems.push_back(what + ": the job's lease_epoch went back to " + std::to_string(j.epoch));
    }
    if (ack.released && !(s.ended && s.end_reason == "released")) {
      problems.push_back(what + " release was acknowledged; segment says " + s.end_reason);
    }
    if (ack.completed && !(j.state == "completed" && s.end_reason == "completed")) {
      problems.push_back(what + " completion was acknowledged; job is " + j.state);
    }
    if (ack.end_sent) continue;
    // Nobody else may hold the job before this acknowledged lease has expired.
    for (const auto& [later, ls] : segs[id]) {
      if (later > epoch && ls.started <= ack.expires_ms) {
        problems.push_back(what + " acknowledged until " + std::to_string(ack.expires_ms) +
                           " but epoch " + std::to_string(later) + " started at " +
                           std::to_string(ls.started) + " on " + ls.node);
      }
    }
    if (j.epoch == epoch && j.state == "running" && j.expires < ack.expires_ms) {
      problems.push_back(what + " lease expiry went back from " + std::to_string(ack.expires_ms) +
                         " to " + std::to_string(j.expires));
    }
  }
  for (const CommitAck& c : log->commits) {
    const std::string what = c.job + " checkpoint " + std::to_string(c.step);
    const JobRow& j = jobs[c.job];
    if (j.ckpt_step < c.step) {
      problems.push_back(what + " was acknowledged; the job's latest is " +
                         std::to_string(j.ckpt_step));
    }
    auto it = ckpts.find({c.job, c.step});
    if (it != ckpts.end()) {
      if (it->second.first != c.sha || it->second.second != c.size) {
        problems.push_back(what + " row differs from the acknowledged commit");
      }
      continue;
    }
    int newer = 0;
    for (int64_t s : ckpt_steps[c.job]) newer += s > c.step;
    if (newer < kKeepCheckpoints) {
      problems.push_back(what + " is gone with only " + std::to_string(newer) + " newer ones");
    }
  }
  for (const auto& [id, sha] : log->completes) {
    const JobRow& j = jobs[id];
    if (j.state != "completed" || j.outputs.find(sha) == std::string::npos) {
      problems.push_back("completion of " + id + " was acknowledged; job is " + j.state +
                         " with outputs " + j.outputs);
    }
  }
  return problems;
}

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

}  // namespace

TEST_CASE("kill -9 under load 50 times: nothing acknowledged is lost", "[coordinator][crash]") {
  const uint64_t seed = EnvOr("GLEANER_CRASH_SEED", std::random_device{}());
  const int kills = int(EnvOr("GLEANER_CRASH_KILLS", 50));
  WARN("crash test: GLEANER_CRASH_SEED=" << seed << " GLEANER_CRASH_KILLS=" << kills);
  INFO("GLEANER_CRASH_SEED=" << seed);

  // kill -9 keeps the page cache: a RAM-backed directory tests the same thing, faster.
  TempDir dir("gleaner-crash", MemoryTempBase());
  CoordinatorOptions o;
  o.name = "crash";
  o.heartbeat_interval_s = 0.5;  // leases stall after 1 s: vanished agents are taken over
  o.extra_args = {"--log-level", "warn"};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  REQUIRE(coord.Start(&error));
  auto enroll = CreateKey(coord, "enroll", &error);
  INFO(error);
  REQUIRE(enroll);
  std::vector<NodeCredentials> nodes;
  for (int i = 0; i < kNodes; ++i) {
    auto n = RegisterNode(coord, *enroll, "crash-" + std::to_string(i), 24000, &error);
    REQUIRE(n);
    nodes.push_back(*n);
  }
  std::vector<std::string> devs;
  for (int i = 0; i < kDevelopers; ++i) {
    auto d = CreateKey(coord, "developer", &error);
    REQUIRE(d);
    devs.push_back(*d);
  }

  Controller ctl;
  AckLog log;
  ctl.Up(coord.url());
  std::vector<std::thread> threads;
  for (int i = 0; i < kNodes; ++i) {
    threads.emplace_back(Node, i, seed, std::cref(nodes[size_t(i)]), &ctl, &log);
  }
  for (int i = 0; i < kDevelopers; ++i) {
    threads.emplace_back(Developer, i, seed, std::cref(devs[size_t(i)]), &ctl, &log);
  }

  std::mt19937_64 rng(seed);
  std::set<std::string> verified, whole;
  std::vector<std::string> problems;
  int done = 0, downloads = 0, blobs_checked = 0;
  double park_s = 0, start_s = 0, check_s = 0;  // time spent down: clients parking, restart, checks
  const auto start = std::chrono::steady_clock::now();
  for (; done < kills && problems.empty(); ++done) {
    // Mostly anywhere in a busy stretch; sometimes right after the restart.
    int delay = rng() % 8 == 0 ? int(rng() % 30) : 20 + int(rng() % 300);
    std::this_thread::sleep_for(Millis(delay));
    ctl.Down();
    auto t0 = std::chrono::steady_clock::now();
    coord.process().Kill();
    if (!ctl.WaitParked(kNodes + kDevelopers, Millis(30000))) {
      problems.push_back("clients did not stop after kill " + std::to_string(done + 1));
      break;
    }
    auto t1 = std::chrono::steady_clock::now();
    if (!coord.Start(&error)) {
      problems.push_back("restart " + std::to_string(done + 1) + ": " + error);
      break;
    }
    auto t2 = std::chrono::steady_clock::now();
    StoreCheckOptions so;
    so.db = dir.File("db.sqlite");
    so.data_dir = dir.File("data");
    so.base_url = coord.url();
    so.verified = &verified;
    so.expect_no_temp_files = true;
    StoreCheckResult store = CheckStore(so);
    downloads += store.downloads;
    blobs_checked += store.blobs;
    problems = store.problems;
    for (auto& p : CheckAgainstLog(&log, so.db, so.data_dir, &whole)) {
      problems.push_back(std::move(p));
    }
    auto t3 = std::chrono::steady_clock::now();
    park_s += std::chrono::duration<double>(t1 - t0).count();
    start_s += std::chrono::duration<double>(t2 - t1).count();
    check_s += std::chrono::duration<double>(t3 - t2).count();
    for (auto& p : problems) p = "after kill " + std::to_string(done + 1) + ": " + p;
    ctl.Up(coord.url());
  }
  ctl.Stop();
  for (auto& t : threads) t.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::lock_guard<std::mutex> lock(log.mu);
  int completed = 0;
  for (const auto& kv : log.leases) completed += kv.second.completed;
  WARN("crash test: " << done << " kills in " << secs << " s; acknowledged " << log.jobs.size()
                      << " jobs, " << log.leases.size() << " leases, " << log.commits.size()
                      << " checkpoint commits, " << completed << " completions, " << log.releases
                      << " releases; " << log.resumes << " resumes, " << log.vanished
                      << " vanished agents, " << log.lost_leases << " leases lost on expiry; "
                      << downloads << " checkpoint downloads, " << blobs_checked
                      << " object checks; down for " << park_s << " s parking, " << start_s
                      << " s restarting, " << check_s << " s checking");
  INFO(JoinLines(problems));
  CHECK(problems.empty());
  INFO(JoinLines(log.violations));
  CHECK(log.violations.empty());
  CHECK(ctl.no_answer_while_up() == 0);
  CHECK(done == kills);
  // The load did reach every kind of write.
  CHECK(log.commits.size() > 0);
  CHECK(completed > 0);
  CHECK(log.resumes > 0);
}

// After a restart every agent reconnects at once, and the process may not be accepting yet (or
// be busy): the kernel must queue the burst. With httplib's default backlog of 5 the rest had
// their SYNs dropped and waited a 1 s retransmission (seen as slow recovery in the test above).
TEST_CASE("a burst of connections to a stopped coordinator is queued and not dropped",
          "[coordinator][restart]") {
  TempDir dir;
  CoordinatorProcess coord(dir.path());
  std::string error;
  REQUIRE(coord.Start(&error));
  constexpr int kBurst = 64;
  coord.process().Signal(SIGSTOP);  // accepts nothing now
  std::vector<int> fds;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(coord.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < kBurst; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fds.push_back(fd);
  }
  // Connected = the handshake completed (the connection waits in the accept queue).
  auto connected = [&] {
    int n = 0;
    for (int fd : fds) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      if (::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) &&
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        ++n;
      }
    }
    return n;
  };
  bool all = WaitUntil([&] { return connected() == kBurst; }, Millis(500));
  int n = connected();
  coord.process().Signal(SIGCONT);
  for (int fd : fds) ::close(fd);
  CHECK(all);
  CHECK(n == kBurst);
  CHECK(coord.Client().Get("/healthz").status == 200);
}
