// Helpers for the text-pipeline tests (tokenizer, CLIP text encoders): fixture paths and running
// the gleaner-train binary with its stderr captured. Include Catch2 before this header.
#pragma once

#include <sys/stat.h>

#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace gleaner::train::text::testing {

// <fixtures>/<set>, e.g. "clip-tokenizer-ref-a".
inline std::string FixtureSet(const std::string& set) {
  return std::string(GLEANER_FIXTURES_DIR) + "/" + set;
}

inline bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The reference sets "<family>-ref-a" and "-ref-b" that hold `probe` (set b is a hidden companion
// set, checked when present), as directories.
inline std::vector<std::string> ReferenceSets(const std::string& family, const std::string& probe) {
  std::vector<std::string> sets;
  for (const char* suffix : {"-ref-a", "-ref-b"}) {
    std::string dir = FixtureSet(family + suffix);
    if (FileExists(dir + "/" + probe)) sets.push_back(dir);
  }
  return sets;
}

struct CliRun {
  int code = -1;    // exit code, or -signal
  std::string err;  // everything the command wrote to stderr
};

// Runs `gleaner-train args...`; stderr goes through a file in `scratch_dir`.
inline CliRun RunTrainCli(const std::vector<std::string>& args, const std::string& scratch_dir) {
  namespace h = gleaner::testing;
  h::ProcessSpec spec;
  spec.binary = "gleaner-train";
  spec.args = args;
  spec.stderr_path = scratch_dir + "/stderr.txt";
  h::RemoveAll(spec.stderr_path);
  h::Process p(spec);
  CliRun run;
  std::string error;
  if (!p.Start(&error)) {
    run.err = error;
    return run;
  }
  std::optional<h::ExitStatus> st = p.Wait(h::Millis(120000));
  if (!st) st = p.Kill();
  run.code = st->exited ? st->code : -st->signal;
  run.err = p.Stderr();
  return run;
}

}  // namespace gleaner::train::text::testing
