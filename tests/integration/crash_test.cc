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
#include <sys/stat.h>
#include <sys/statvfs.h>
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
#include "shared/sha256.h"
#include "tests/integration/ack_log.h"
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

  // Sends until an answer comes (parking while the coordinator is down; backing off on 429 and
  // 503). *retried: the request had to be sent again after no answer, so an earlier copy may
  // have taken effect.
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
      if ((r.status == 429 || r.status == 503) && !ctl_->stopped()) {
        // Rate limited or busy: nothing changed; back off and send it again, like an agent.
        std::this_thread::sleep_for(Millis(20));
        continue;
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
      size_t size = rng() % 24 == 0 ? 64 * 1024 + rng() % (256 * 1024) : 1 + rng() % 8192;
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

  // kill -9 keeps the page cache: a RAM-backed directory tests the same thing, faster (when it
  // has room: a container's /dev/shm may be 64 MiB).
  std::string base = MemoryTempBase();
  struct statvfs fs;
  if (!base.empty() &&
      (::statvfs(base.c_str(), &fs) != 0 || double(fs.f_bavail) * double(fs.f_frsize) < 1e9)) {
    base = "";
  }
  TempDir dir("gleaner-crash", base);
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
    for (auto& p : CheckAgainstLog(&log, so.db, so.data_dir, kKeepCheckpoints, &whole)) {
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

// A first start killed anywhere (data dir and signing key creation, blob store setup, the
// migration batch, the operator bootstrap) leaves nothing the next start trips over.
TEST_CASE("kill -9 during a first start: the next start works", "[coordinator][crash]") {
  const uint64_t seed = EnvOr("GLEANER_CRASH_SEED", std::random_device{}());
  INFO("GLEANER_CRASH_SEED=" << seed);
  std::mt19937_64 rng(seed);
  TempDir root("gleaner-boot", MemoryTempBase());
  int before_ready = 0;
  for (int i = 0; i < 20; ++i) {
    const std::string dir = root.File(std::to_string(i));
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
    CoordinatorProcess coord(dir);
    std::string error;
    REQUIRE(coord.process().Start(&error));
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
    if (ReadFile(dir + "/coordinator.port").empty()) ++before_ready;
    coord.process().Kill();
    bool started = coord.Start(&error);
    INFO("kill " << i << ": " << error);
    REQUIRE(started);
    StoreCheckOptions so;
    so.db = dir + "/db.sqlite";
    so.data_dir = dir + "/data";
    so.expect_no_temp_files = true;
    std::vector<std::string> problems = CheckStore(so).problems;
    INFO(JoinLines(problems));
    CHECK(problems.empty());
    CHECK(CreateKey(coord, "developer", &error).has_value());
  }
  WARN("kill -9 during a first start: " << before_ready << " of 20 before the port file");
  CHECK(before_ready > 0);
}
