// Signed self-update: verify, download, install side by side, self-test, atomic switch, and
// crash-loop rollback (docs/agent.md "How updates are verified").
//
// State directory layout (all writes durable):
//   trust/highest_version   highest release version ever trusted; only advanced, only by this
//                           code after a full verification (the install never writes under trust/)
//   versions/<v>/gleaner-agent   verified binaries, side by side
//   current -> versions/<v>      symlink the service runs; replaced by an atomic rename
//   previous -> versions/<v>     the version before the last switch (rollback target)
//   swapping                     "<new> <old>" while a switch is in progress
//   starts                       start times of the current version (crash-loop detection)
//   failed/<v>                   versions rolled back after a crash loop; never installed again
// Invariant: at every instant `current` names a binary that passed verification and self-test,
// so a kill -9 at any step leaves a runnable agent; Recover() finishes or undoes the switch.
// Not thread-safe: one Updater per state directory, called between jobs, never mid-job.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "shared/native/release_sign.h"

namespace gleaner::agent {

struct UpdaterDeps {
  std::function<int64_t()> now_s;  // wall clock, unix seconds
  // Streams uri into sink; stops when sink returns false (the updater does that once a download
  // runs past the manifest's length) and then returns ok.
  std::function<Status(const std::string& uri,
                       const std::function<bool(std::string_view chunk)>& sink)>
      download;
  // Runs `<binary> --self-test`; true when it exits 0.
  std::function<bool(const std::string& binary)> self_test;
  // Test hook: called after each numbered step of the switch (1..5); returning false stops
  // there as a kill -9 would (the call returns kInternal "stopped").
  std::function<bool(int step)> after_step;
};

class Updater {
 public:
  Updater(std::string state_dir, release::KeyRing ring, std::string platform, UpdaterDeps deps);

  // Installs the release in envelope_json if it verifies and is newer than anything trusted (or
  // equals the highest trusted version while `current` is another one: a switch cut short).
  // Returns the installed version; kPermissionDenied (signature, key, expired), kConflict
  // (not newer, or rolled back before), kCorruption (length or sha256), kIo.
  Result<release::Version> Install(const std::string& envelope_json);
  // Makes `binary` (the agent installed by the owner, which is trusted as it is) the current
  // version `version`: copied side by side, trust raised to it if lower, switched to (the old
  // current becomes `previous`). Used at start when nothing is installed yet or the installed
  // agent is newer than `current`. kConflict if that version was rolled back before.
  Status Adopt(const release::Version& version, const std::string& binary);
  // Removes installed versions that neither `current` nor `previous` names (old releases,
  // rolled-back ones). Not during a switch (after Recover()).
  Status Prune();
  // Completes or undoes an interrupted switch. Call at start before anything else.
  Status Recover();
  // Records a start of the current version at now; after 3 starts within 5 minutes, restores
  // `previous`, marks the current version failed and returns true (the caller re-executes).
  Result<bool> RecordStart();
  // Clears the start history once the current version has run healthily (e.g. finished a job).
  Status MarkHealthy();

  std::optional<release::Version> HighestTrusted() const;
  // Version `current` points at, or "" when none is installed.
  std::string CurrentVersion() const;
  std::string CurrentBinary() const;  // <state>/current/gleaner-agent

 private:
  std::string Path(const std::string& name) const;
  Status PointLink(const std::string& link, const std::string& version);
  std::string LinkVersion(const std::string& link) const;
  Status RaiseTrust(const release::Version& v);
  // Steps 3-5: swapping flag, `current`, `previous`; stop(step) true = stop there.
  Status Switch(const std::string& version, const std::function<bool(int)>& stop);

  std::string dir_;
  release::KeyRing ring_;
  std::string platform_;
  UpdaterDeps deps_;
};

}  // namespace gleaner::agent
