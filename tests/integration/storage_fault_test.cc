// Storage faults in the real coordinator process: real write, fsync and rename calls fail (EIO, or
// ENOSPC for a full disk) through the LD_PRELOAD shim in tests/fault_shim, first under the blob
// store, then under the SQLite database.
//
// Blob store: every failed PUT answers a clear 5xx (507 insufficient_storage for ENOSPC, 500
// io_error otherwise), no partial object is ever served (a GET returns 404 or exactly the bytes
// sent), no temp file stays behind, a commit of the failed object is refused (no metadata points
// at a missing object), and once the fault clears the same upload works.
// Database: a failed write answers 5xx (507 when the disk is full), reads keep working, the
// process keeps running and writes work again once the fault clears; after kill -9 and a restart
// the database passes integrity_check and holds every acknowledged write.
#include <dirent.h>

#include <catch2/catch.hpp>
#include <memory>
#include <set>

#include "coordinator/core/blob_urls.h"
#include "coordinator/native/blob/fs.h"
#include "coordinator/native/blob/signing_key.h"
#include "shared/sha256.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/harness.h"
#include "tests/integration/store_check.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A coordinator with the fault shim preloaded, a developer, a node holding a long job's lease.
class Rig {
 public:
  Rig() {
    control_ = dir_.File("fault.ctl");
    CoordinatorOptions o;
    o.heartbeat_interval_s = 30;  // no lease expires during the test
    o.env = {{"LD_PRELOAD", GLEANER_FAULT_SHIM},
             {"GLEANER_FAULT_FILE", control_},
             // Sanitizer builds: the shim is preloaded ahead of the ASan runtime.
             {"ASAN_OPTIONS", "verify_asan_link_order=0"}};
    coord_ = std::make_unique<CoordinatorProcess>(dir_.path(), o);
  }

  void Start() {
    std::string error;
    REQUIRE(WriteFile(control_, ""));
    INFO(error);
    REQUIRE(coord_->Start(&error));
    auto dev = CreateKey(*coord_, "developer", &error);
    auto enroll = CreateKey(*coord_, "enroll", &error);
    REQUIRE(dev);
    REQUIRE(enroll);
    dev_ = *dev;
    auto node = RegisterNode(*coord_, *enroll, "fault-node", 24000, &error);
    REQUIRE(node);
    node_ = *node;
    HttpClient d = coord_->Client(dev_);
    auto job = SubmitSyntheticJob(d, 100000, 1, &error);
    REQUIRE(job);
    job_ = *job;
    HttpResult work = coord_->Client(node_.token).Post("/v1/work", Json::object());
    INFO(work.Describe());
    REQUIRE(work.status == 200);
    epoch_ = work.json()["lease"]["epoch"].get<int64_t>();
    auto key = native::LoadOrCreateSigningKey(native::DefaultFs(), DataDir(), nullptr);
    REQUIRE(key.ok());
    signer_.blob_signing_key = *key;
  }

  // Arms one fault: see tests/fault_shim/fault_shim.c for the line's format.
  void Arm(const std::string& ops, const std::string& prefix, int nth, int count,
           const std::string& err) {
    REQUIRE(WriteFile(control_, ops + " " + prefix + " " + std::to_string(nth) + " " +
                                    std::to_string(count) + " " + err + "\n"));
  }
  void Clear() { REQUIRE(WriteFile(control_, "")); }
  // Faults injected so far (the shim reports each on the coordinator's stderr).
  int Fired() const {
    std::string text = ReadFile(coord_->StderrPath());
    int n = 0;
    for (size_t at = text.find("gleaner-fault-shim:"); at != std::string::npos;
         at = text.find("gleaner-fault-shim:", at + 1)) {
      ++n;
    }
    return n;
  }

  std::string DataDir() const { return dir_.File("data"); }
  std::string BlobRoot() const { return dir_.File("data/blobs"); }
  std::string Db() const { return dir_.File("db.sqlite"); }
  CoordinatorProcess& coord() { return *coord_; }
  HttpClient Node() const { return coord_->Client(node_.token); }
  HttpClient Dev() const { return coord_->Client(dev_); }
  const std::string& job() const { return job_; }
  int64_t epoch() const { return epoch_; }

  // GET through a URL signed with the coordinator's key.
  HttpResult Download(const std::string& key) {
    signer_.public_url = coord_->url();
    return HttpClient::Fetch("GET", core::GetUrl(signer_, key, NowMs()).url);
  }

  std::vector<std::string> TempFiles() const {
    std::vector<std::string> out;
    if (DIR* d = ::opendir((BlobRoot() + "/.tmp").c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") out.push_back(n);
      }
      ::closedir(d);
    }
    return out;
  }

  std::vector<std::string> StoreProblems() {
    StoreCheckOptions o;
    o.db = Db();
    o.data_dir = DataDir();
    o.base_url = coord_->url();
    o.expect_no_temp_files = true;
    o.verified = &verified_;
    return CheckStore(o).problems;
  }

 private:
  TempDir dir_{"gleaner-fault"};
  std::string control_;
  std::unique_ptr<CoordinatorProcess> coord_;
  std::string dev_;
  NodeCredentials node_;
  std::string job_;
  int64_t epoch_ = 0;
  core::CoreConfig signer_;
  std::set<std::string> verified_;  // objects CheckStore already verified
};

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = uint32_t(seed) * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = char(x >> 24);
  }
  return s;
}

struct Upload {
  std::string key, url;
  HttpResult put;
};

// Checkpoint URL for `step` (minting one records it: lease_quota.h).
Upload MintCheckpoint(Rig& rig, int64_t step) {
  Upload u;
  HttpResult url = rig.Node().Post("/v1/jobs/" + rig.job() + "/checkpoints",
                                   {{"epoch", rig.epoch()}, {"step", step}});
  INFO(url.Describe());
  REQUIRE(url.status == 200);
  u.key = url.json()["key"].get<std::string>();
  u.url = url.json()["url"].get<std::string>();
  return u;
}

// Checkpoint URL for `step`, then PUT `bytes` to it.
Upload PutCheckpoint(Rig& rig, int64_t step, const std::string& bytes) {
  Upload u = MintCheckpoint(rig, step);
  u.put = HttpClient::Fetch("PUT", u.url, bytes);
  return u;
}

HttpResult Commit(Rig& rig, int64_t step, const std::string& bytes) {
  return rig.Node().Post(
      "/v1/jobs/" + rig.job() + "/checkpoints/" + std::to_string(step) + "/commit",
      {{"epoch", rig.epoch()}, {"sha256", Sha256Hex(bytes)}, {"size", int64_t(bytes.size())}});
}

struct BlobFault {
  const char* ops;
  int nth, count;
  const char* err;
};

}  // namespace

TEST_CASE("blob store under real write/fsync/rename faults and a full disk",
          "[coordinator][faults]") {
  Rig rig;
  rig.Start();
  const std::string prefix = rig.BlobRoot();
  int64_t step = 1;
  // Every write, fsync and rename position of one upload, EIO and ENOSPC, then a full disk.
  const BlobFault faults[] = {
      {"write", 1, 1, "EIO"},
      {"write", 2, 1, "EIO"},
      {"write", 7, 1, "ENOSPC"},
      {"fsync", 1, 1, "EIO"},
      {"fsync", 2, 1, "EIO"},
      {"fsync", 3, 1, "EIO"},
      {"fsync", 4, 1, "EIO"},
      {"fsync", 1, 1, "ENOSPC"},
      {"rename", 1, 1, "EIO"},
      {"rename", 1, 1, "ENOSPC"},
      {"write,fsync,rename", 1, 0, "ENOSPC"},
  };
  int injected = 0;
  for (const BlobFault& f : faults) {
    // A write fault stops the upload mid-body: the body is large enough that the client is
    // still sending when the answer comes (it must get the answer, not a reset).
    const bool mid_body = std::string(f.ops).rfind("write", 0) == 0;
    const std::string bytes = Pattern((mid_body ? 6 << 20 : 64 << 10) + size_t(step), int(step));
    INFO("fault: " << f.ops << " #" << f.nth << " x" << f.count << " " << f.err << ", step "
                   << step);
    const int fired_before = rig.Fired();
    rig.Arm(f.ops, prefix, f.nth, f.count, f.err);
    Upload u = PutCheckpoint(rig, step, bytes);
    // A full disk stays full: a second upload fails the same way.
    HttpResult again;
    if (f.count == 0) again = HttpClient::Fetch("PUT", u.url, bytes);
    rig.Clear();
    INFO("PUT: " << u.put.Describe());
    if (rig.Fired() == fired_before) {
      // This upload made fewer such calls than nth: it must simply have worked.
      CHECK(u.put.status == 204);
    } else {
      ++injected;
      const bool full = std::string(f.err) == "ENOSPC";
      CHECK(u.put.status == (full ? 507 : 500));
      CHECK(u.put.json()["error"]["code"] == (full ? "insufficient_storage" : "io_error"));
      if (f.count == 0) CHECK(again.status == 507);
      // Never a partial object: absent, or (when only the final directory fsync failed) whole.
      HttpResult got = rig.Download(u.key);
      CHECK((got.status == 404 || (got.status == 200 && got.body == bytes)));
      CHECK(rig.TempFiles().empty());
      // The failed upload is not stored as far as the database knows: its commit is refused.
      HttpResult commit = Commit(rig, step, bytes);
      INFO("commit: " << commit.Describe());
      CHECK(commit.status == 400);
      std::vector<std::string> problems = rig.StoreProblems();
      INFO(JoinLines(problems));
      CHECK(problems.empty());
      // The fault is gone: the same upload works now.
      HttpResult retry = HttpClient::Fetch("PUT", u.url, bytes);
      INFO("retry: " << retry.Describe());
      CHECK(retry.status == 204);
    }
    HttpResult commit = Commit(rig, step, bytes);
    INFO("commit: " << commit.Describe());
    CHECK(commit.status == 200);
    HttpResult got = rig.Download(u.key);
    CHECK(got.status == 200);
    CHECK(got.body == bytes);
    ++step;
  }
  CHECK(injected >= 9);
  // Temp files are never served: no key can name the store's temp directory.
  CHECK(rig.Download(".tmp/x.part").status / 100 == 4);
  std::vector<std::string> problems = rig.StoreProblems();
  INFO(JoinLines(problems));
  CHECK(problems.empty());
  CHECK(rig.coord().process().Running());
}

TEST_CASE("database under real write/fsync faults and a full disk", "[coordinator][faults]") {
  Rig rig;
  rig.Start();
  const std::string db = rig.Db();  // also matches db.sqlite-wal and db.sqlite-shm
  std::vector<std::string> acknowledged;
  int64_t step = 0;
  auto submit = [&]() {
    HttpClient dev = rig.Dev();
    return dev.Post("/v1/jobs", {{"kind", "synthetic"}, {"params", {{"steps", 10}}}});
  };
  auto heartbeat = [&]() {
    return rig.Node().Post("/v1/jobs/" + rig.job() + "/heartbeat",
                           {{"epoch", rig.epoch()}, {"step", step + 1}});
  };
  auto works = [&]() {
    HttpResult r = submit();
    INFO(r.Describe());
    CHECK(r.status == 201);
    if (r.status == 201) acknowledged.push_back(r.json()["id"].get<std::string>());
    HttpResult hb = heartbeat();
    INFO(hb.Describe());
    CHECK(hb.status == 200);
    if (hb.status == 200) ++step;
  };
  works();

  SECTION("full disk") {
    // The URL is minted (and recorded) while there is room.
    Upload u = MintCheckpoint(rig, 1);
    rig.Arm("write,fsync", db, 1, 0, "ENOSPC");
    for (int i = 0; i < 3; ++i) {
      HttpResult r = submit();
      INFO(r.Describe());
      CHECK(r.status == 507);
      CHECK(r.json()["error"]["code"] == "insufficient_storage");
      CHECK(heartbeat().status == 507);
    }
    // Reads need no space.
    CHECK(rig.Dev().Get("/v1/jobs/" + rig.job()).status == 200);
    CHECK(rig.Fired() > 0);
    // An upload whose object is stored but cannot be recorded: 507, and it cannot be committed.
    // Minting another URL is a write too.
    CHECK(rig.Node()
              .Post("/v1/jobs/" + rig.job() + "/checkpoints", {{"epoch", rig.epoch()}, {"step", 2}})
              .status == 507);
    const std::string bytes = Pattern(4096, 1);
    u.put = HttpClient::Fetch("PUT", u.url, bytes);
    INFO(u.put.Describe());
    CHECK(u.put.status == 507);
    rig.Clear();
    HttpResult commit = Commit(rig, 1, bytes);
    INFO(commit.Describe());
    CHECK(commit.status == 400);
    CHECK(HttpClient::Fetch("PUT", u.url, bytes).status == 204);
    CHECK(Commit(rig, 1, bytes).status == 200);
    works();
  }
  SECTION("one failed write") {
    rig.Arm("write", db, 1, 1, "EIO");
    HttpResult r = submit();
    INFO(r.Describe());
    CHECK(r.status == 500);
    CHECK(rig.Fired() == 1);
    rig.Clear();
    works();
  }
  SECTION("a failed write at each position of a few commits") {
    for (int nth = 1; nth <= 8; ++nth) {
      INFO("write #" << nth);
      const int fired = rig.Fired();
      rig.Arm("write", db, nth, 1, "EIO");
      int failed = 0;
      for (int i = 0; i < 3; ++i) {
        HttpResult r = submit();
        INFO(r.Describe());
        CHECK((r.status == 201 || r.status == 500));
        if (r.status == 201) acknowledged.push_back(r.json()["id"].get<std::string>());
        failed += r.status == 500;
      }
      rig.Clear();
      // A fault fails exactly the commit it hit; every other one is acknowledged.
      CHECK(failed == rig.Fired() - fired);
      works();
    }
    CHECK(rig.Fired() >= 6);  // most positions were reached
  }
  SECTION("one failed fsync") {
    rig.Arm("fsync", db, 1, 1, "EIO");
    HttpResult r = submit();
    INFO(r.Describe());
    CHECK(r.status == 500);
    CHECK(rig.Fired() == 1);
    rig.Clear();
    works();
  }
  SECTION("a failing disk, then a good one") {
    rig.Arm("write,fsync", db, 1, 0, "EIO");
    for (int i = 0; i < 3; ++i) {
      CHECK(submit().status == 500);
      CHECK(heartbeat().status == 500);
    }
    CHECK(rig.Dev().Get("/v1/jobs/" + rig.job()).status == 200);
    rig.Clear();
    works();
  }
  rig.Clear();  // (a restarted process would count the armed fault afresh)
  works();
  CHECK(rig.coord().process().Running());

  // kill -9 and restart: the database is intact and holds every acknowledged write.
  std::string error;
  bool restarted = rig.coord().Restart(&error);
  INFO(error);
  REQUIRE(restarted);
  std::vector<std::string> problems = rig.StoreProblems();
  INFO(JoinLines(problems));
  CHECK(problems.empty());
  for (const std::string& id : acknowledged) {
    CHECK(rig.Dev().Get("/v1/jobs/" + id).status == 200);
  }
  HttpResult job = rig.Dev().Get("/v1/jobs/" + rig.job());
  INFO(job.Describe());
  CHECK(job.json()["step"] == step);
  works();
}

// PUT URLs stay valid for a while after use: a late retry or a zombie agent holding one must not
// change a committed checkpoint or a completed job's output (it would no longer match the
// sha256 that resumes and downloads check).
TEST_CASE("a committed checkpoint or output is never replaced through its PUT URL",
          "[coordinator][faults]") {
  Rig rig;
  rig.Start();
  const std::string a = Pattern(5000, 1), b = Pattern(5000, 2);
  Upload u = PutCheckpoint(rig, 1, a);
  REQUIRE(u.put.status == 204);
  // Before its commit an upload may be redone with other bytes (a retrained step).
  REQUIRE(HttpClient::Fetch("PUT", u.url, b).status == 204);
  REQUIRE(HttpClient::Fetch("PUT", u.url, a).status == 204);
  REQUIRE(Commit(rig, 1, a).status == 200);
  HttpResult again = HttpClient::Fetch("PUT", u.url, b);
  INFO(again.Describe());
  CHECK(again.status == 409);
  CHECK(rig.Download(u.key).body == a);
  CHECK(HttpClient::Fetch("PUT", u.url, a).status == 204);  // a retry of the same bytes is fine
  CHECK(rig.TempFiles().empty());

  REQUIRE(
      rig.Node()
          .Post("/v1/jobs/" + rig.job() + "/heartbeat", {{"epoch", rig.epoch()}, {"step", 100000}})
          .status == 200);
  HttpResult out = rig.Node().Post("/v1/jobs/" + rig.job() + "/outputs",
                                   {{"epoch", rig.epoch()}, {"name", "result.bin"}});
  REQUIRE(out.status == 200);
  const std::string out_url = out.json()["url"].get<std::string>();
  REQUIRE(HttpClient::Fetch("PUT", out_url, a).status == 204);
  HttpResult done = rig.Node().Post(
      "/v1/jobs/" + rig.job() + "/complete",
      {{"epoch", rig.epoch()},
       {"outputs",
        Json::array(
            {{{"name", "result.bin"}, {"sha256", Sha256Hex(a)}, {"size", int64_t(a.size())}}})}});
  INFO(done.Describe());
  REQUIRE(done.status == 200);
  CHECK(HttpClient::Fetch("PUT", out_url, b).status == 409);
  CHECK(rig.Download(out.json()["key"].get<std::string>()).body == a);
  std::vector<std::string> problems = rig.StoreProblems();
  INFO(JoinLines(problems));
  CHECK(problems.empty());
}
