#include "agent/supervisor/state.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "shared/native/files.h"
#include "test_util.h"

using namespace gleaner;
using namespace gleaner::agent;

TEST_CASE("identity is stored privately and read back", "[state]") {
  testing::TempDir t;
  StateDir state(t / "state");
  REQUIRE(state.Init().ok());
  auto none = state.LoadIdentity();
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  REQUIRE(state.SaveIdentity(Identity{"m-1", "n_1", "secret-token", "http://c"}).ok());
  struct stat st;
  REQUIRE(stat((t / "state/identity.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(stat((t / "state").c_str(), &st) == 0);
  CHECK((st.st_mode & 0077) == 0);
  auto id = state.LoadIdentity();
  REQUIRE(id.ok());
  REQUIRE(id->has_value());
  CHECK((*id)->token == "secret-token");
  CHECK((*id)->node_id == "n_1");

  CHECK((*id)->vram_mb == -1);  // not recorded
  Identity gpu{"m-1", "n_1", "secret-token", "http://c"};
  gpu.gpu_name = "RTX 4090";
  gpu.vram_mb = 8192;
  REQUIRE(state.SaveIdentity(gpu).ok());
  id = state.LoadIdentity();
  REQUIRE(id.ok());
  CHECK((*id)->gpu_name == "RTX 4090");
  CHECK((*id)->vram_mb == 8192);

  REQUIRE(files::WriteSynced(t / "state/identity.json", "{not json").ok());
  CHECK(state.LoadIdentity().status().code() == Code::kCorruption);
}

TEST_CASE("pending uploads of the current job are recorded and removed", "[state]") {
  testing::TempDir t;
  StateDir state(t / "state");
  REQUIRE(state.Init().ok());
  REQUIRE(state.SaveCurrentJob(CurrentJob{"j", 2, {}}).ok());
  REQUIRE(state.AddPending("j", 2, PendingUpload{10, "/a/10", std::string(64, 'a'), 5, {}}).ok());
  REQUIRE(state.AddPending("j", 2, PendingUpload{20, "/a/20", std::string(64, 'b'), 6, {}}).ok());
  REQUIRE(state.RemovePending("j", 2, 10).ok());
  auto cur = state.LoadCurrentJob();
  REQUIRE(cur.ok());
  REQUIRE(cur->has_value());
  CHECK((*cur)->epoch == 2);
  REQUIRE((*cur)->pending.size() == 1);
  CHECK((*cur)->pending[0].step == 20);
  // A record for another lease replaces the old one.
  REQUIRE(state.AddPending("k", 1, PendingUpload{5, "/b/5", std::string(64, 'c'), 7, {}}).ok());
  cur = state.LoadCurrentJob();
  CHECK((*cur)->job_id == "k");
  CHECK((*cur)->pending.size() == 1);
  REQUIRE(state.ClearCurrentJob().ok());
  CHECK_FALSE(state.LoadCurrentJob()->has_value());
}

TEST_CASE("the machine id comes from SALAD_MACHINE_ID, else a hash of /etc/machine-id", "[state]") {
  testing::TempDir t;
  const std::string file = t / "machine-id";
  const std::string raw = "0123456789abcdef0123456789abcdef";
  REQUIRE(files::WriteDurable(file, raw + "\n").ok());
  setenv("SALAD_MACHINE_ID", "salad-123", 1);
  CHECK(DetectMachineId(file) == "salad-123");
  unsetenv("SALAD_MACHINE_ID");
  std::string id = DetectMachineId(file);
  CHECK(id.rfind("mid-", 0) == 0);
  CHECK(id.size() == 36);
  CHECK(id.find(raw) == std::string::npos);  // never the raw id
  CHECK(DetectMachineId(file) == id);        // stable
  REQUIRE(files::WriteDurable(file, "fedcba9876543210fedcba9876543210\n").ok());
  CHECK(DetectMachineId(file) != id);
  CHECK(DetectMachineId(t / "missing") == "");
}
