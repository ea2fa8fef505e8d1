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
