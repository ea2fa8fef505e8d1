// gleaner-train gets only the environment a trainer needs, never the agent's secrets.
#include "agent/supervisor/trainer_env.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "agent/supervisor/child_process.h"

using namespace gleaner::agent;

TEST_CASE("trainer environment: secrets and settings stay with the agent", "[trainer_env]") {
  const char* const env[] = {"PATH=/usr/bin",
                             "GLEANER_ENROLL_TOKEN=glt_secret",
                             "GLEANER_COORDINATOR=https://c.example",
                             "GLEANER_OPERATOR_TOKEN=glt_op",
                             "SALAD_API_KEY=k",
                             "SALAD_MACHINE_ID=m",
                             "AWS_SECRET_ACCESS_KEY=s",
                             "HOME=/home/gleaner",
                             "CUDA_VISIBLE_DEVICES=1",
                             "LC_ALL=C.UTF-8",
                             "OMP_NUM_THREADS=4",
                             "GLEANER_SYNTHETIC_FAIL_AT_STEP=5",
                             "PATHOLOGICAL=1",
                             "CUDA_=x",
                             "NOEQUALS",
                             nullptr};
  std::vector<std::string> got = TrainerEnvironment(env);
  CHECK(got == std::vector<std::string>{"PATH=/usr/bin", "HOME=/home/gleaner",
                                        "CUDA_VISIBLE_DEVICES=1", "LC_ALL=C.UTF-8",
                                        "OMP_NUM_THREADS=4", "GLEANER_SYNTHETIC_FAIL_AT_STEP=5"});
  CHECK(TrainerEnvironment(nullptr).empty());
}

TEST_CASE("child process: an explicit environment is the child's whole environment",
          "[trainer_env]") {
  std::mutex mu;
  std::vector<std::string> lines;
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "ONLY_THIS=1"};
  auto child = ChildProcess::Start(
      {"/usr/bin/env"},
      [&](const std::string& l) {
        std::lock_guard<std::mutex> lock(mu);
        lines.push_back(l);
      },
      [](const std::string&) {}, &env);
  REQUIRE(child.ok());
  int status = 0;
  REQUIRE((*child)->WaitFor(10000, &status));
  std::lock_guard<std::mutex> lock(mu);
  CHECK(lines == env);
}

TEST_CASE("trainer limits: a memory budget for every trainer, RLIMIT_DATA on CPU nodes only",
          "[trainer_env]") {
  const int64_t gib = int64_t(1) << 30;
  TrainerLimits cpu = TrainerLimitsFor("cpu", 0, 8 * gib);
  CHECK(cpu.budget.host_bytes == 8 * gib);
  CHECK(cpu.budget.device_bytes == 0);
  CHECK(cpu.rlimits.data_bytes == 8 * gib);
  CHECK(cpu.rlimits.max_processes == kTrainerMaxProcesses);
  CHECK(BudgetEnvironment(cpu.budget) ==
        std::vector<std::string>{"GLEANER_MEMORY_BUDGET_BYTES=" + std::to_string(8 * gib)});
  // A GPU node: its advertised VRAM (the owner's max_vram_mb already applied); no RLIMIT_DATA,
  // which the CUDA driver's own mappings would trip.
  TrainerLimits gpu = TrainerLimitsFor("NVIDIA GeForce RTX 4090", 24000, 32 * gib);
  CHECK(gpu.budget.device_bytes == int64_t(24000) << 20);
  CHECK(gpu.budget.host_bytes == 32 * gib);
  CHECK(gpu.rlimits.data_bytes == 0);
  CHECK(gpu.rlimits.max_processes == kTrainerMaxProcesses);
  CHECK(BudgetEnvironment(gpu.budget).size() == 2);
  // Host memory unknown: no budget and no RLIMIT_DATA (never a limit of 0).
  TrainerLimits unknown = TrainerLimitsFor("cpu", 0, 0);
  CHECK(unknown.rlimits.data_bytes == 0);
  CHECK(BudgetEnvironment(unknown.budget).empty());
  // A budget handed to a trainer is not one the agent inherited: TrainerEnvironment drops it.
  const char* const inherited[] = {"GLEANER_MEMORY_BUDGET_BYTES=1", "PATH=/bin", nullptr};
  CHECK(TrainerEnvironment(inherited) == std::vector<std::string>{"PATH=/bin"});
}

TEST_CASE("child process: limits are set in the child before exec", "[trainer_env]") {
  std::mutex mu;
  std::vector<std::string> lines;
  ChildLimits limits;
  limits.data_bytes = int64_t(1) << 30;
  limits.max_processes = 512;
  auto child = ChildProcess::Start(
      {"/bin/bash", "-c", "ulimit -d; ulimit -Hd; ulimit -u"},
      [&](const std::string& l) {
        std::lock_guard<std::mutex> lock(mu);
        lines.push_back(l);
      },
      [](const std::string&) {}, nullptr, &limits);
  REQUIRE(child.ok());
  int status = 0;
  REQUIRE((*child)->WaitFor(10000, &status));
  CHECK(DescribeWaitStatus(status) == "exit 0");
  std::lock_guard<std::mutex> lock(mu);
  // bash reports the data limit in KiB; soft = hard, so the child cannot raise it.
  CHECK(lines == std::vector<std::string>{"1048576", "1048576", "512"});
}
