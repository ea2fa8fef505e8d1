// The signed self-updater (updater.h) wired into the running agent: which keys are trusted, when
// to check, how to download, self-test and re-execute (docs/agent.md "How updates are verified").
//
// Trusted keys: the keys compiled in (CMake GLEANER_RELEASE_KEYS) plus those in --release-keys
// (a root-owned file installed with the agent, outside the state directory). No keys: updates off.
//
// Start (AtStart, before anything else): finish or undo an interrupted switch; if nothing is
// installed yet, or this binary is newer than `current` (the owner installed a newer package),
// this binary becomes `current`; if `current` is another, newer version, the start is recorded
// (three within five minutes restore `previous` and mark that version failed) and `current` is
// executed in place of this process with the same arguments.
// Between jobs (BetweenJobs, never mid-job): after a job and every --update-interval, GET
// /v1/agent/release for this platform and channel; a newer verified release is downloaded
// (streamed, cut at its declared length and at a hard cap), self-tested, switched to, and this
// process re-executes itself as the new version.
//
// Test hook: GLEANER_TEST_UPDATE_KILL_AT_STEP=N makes the agent SIGKILL itself after step N of
// the switch (updater.h), as a power cut would.
// Not thread-safe: called from the agent's main loop only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/supervisor/api.h"
#include "agent/supervisor/config.h"
#include "agent/supervisor/updater.h"
#include "shared/native/http_client.h"

namespace gleaner::agent {

// This build's release platform, e.g. "linux-x86_64".
const char* ReleasePlatform();

class SelfUpdate {
 public:
  // args: the process's arguments after argv[0], passed again on re-exec and to --self-test.
  // kInvalidArgument when --release-keys cannot be read or holds a bad key.
  static Result<std::unique_ptr<SelfUpdate>> Create(const AgentConfig& config,
                                                    std::vector<std::string> args,
                                                    net::HttpClient* http);

  // See above. Returns when this binary is the one to run (it may exec another instead).
  void AtStart();
  // after_job: a job has just ended (marks this version healthy, checks at once).
  // Re-executes into a newly installed version (does not return then).
  void BetweenJobs(CoordinatorApi* api, bool after_job);

 private:
  SelfUpdate(const AgentConfig& config, std::vector<std::string> args, net::HttpClient* http,
             release::KeyRing ring);
  // args_ with --trainer pinned to the resolved trainer (the new binary lives elsewhere).
  std::vector<std::string> PassedArgs() const;
  bool SelfTest(const std::string& binary);
  Status Download(const std::string& uri, const std::function<bool(std::string_view chunk)>& sink);
  void Exec(const std::string& binary);

  AgentConfig config_;
  std::vector<std::string> args_;
  net::HttpClient* http_;
  bool enabled_;
  std::unique_ptr<Updater> updater_;
  std::chrono::steady_clock::time_point started_, next_check_;
  bool healthy_ = false;
  std::string last_refused_;  // envelope refused for good: not downloaded again
};

}  // namespace gleaner::agent
