// Helpers for agent unit tests: scratch directories, running gleaner-train, parsing flags.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "agent/supervisor/config.h"
#include "shared/native/files.h"

namespace gleaner::testing {

// A fresh directory under $TMPDIR, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/gleaner-agent-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = mkdtemp(buf.data());
  }
  ~TempDir() { files::RemoveTree(path_); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return files::Join(path_, name); }

 private:
  std::string path_;
};

inline std::string TrainBin() {
  return std::string(GLEANER_BIN_DIR) + "/gleaner-train";
}

// ParseAgentConfig over args as a command line (args[0] is the first flag, not a program name,
// as ParseAgentConfig expects).
inline Result<agent::AgentConfig> ParseAgentArgs(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  return agent::ParseAgentConfig(int(argv.size()), argv.data());
}

}  // namespace gleaner::testing
