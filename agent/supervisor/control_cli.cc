#include "agent/supervisor/control_cli.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "agent/supervisor/config.h"
#include "agent/supervisor/control_socket.h"
#include "agent/supervisor/status_board.h"
#include "shared/json.h"
#include "shared/native/files.h"

namespace gleaner::agent {
namespace {

int Usage(const char* why) {
  std::fprintf(stderr,
               "gleaner-agent: %s\nusage: gleaner-agent status|pause|resume [--state-dir DIR] "
               "[--config FILE] [--json]\n",
               why);
  return 64;
}

Result<Json> Ask(const std::string& sock, const std::string& command) {
  Result<std::string> answer = ControlRequest(sock, command);
  if (!answer.ok()) return answer.status();
  Result<Json> j = ParseJson(*answer);
  if (!j.ok() || !j->is_object()) return Status::Unavailable("unreadable answer from the agent");
  auto e = j->find("error");
  if (e != j->end() && e->is_string()) return Status::Invalid(e->get<std::string>());
  return j;
}

}  // namespace

bool IsControlCommand(int argc, char** argv) {
  if (argc < 2) return false;
  return std::strcmp(argv[1], "status") == 0 || std::strcmp(argv[1], "pause") == 0 ||
         std::strcmp(argv[1], "resume") == 0;
}

int RunControlCommand(int argc, char** argv) {
  std::string command = argv[1], state_dir, config;
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if ((a == "--state-dir" || a == "--config") && i + 1 < argc) {
      (a == "--config" ? config : state_dir) = argv[++i];
    } else if (a.rfind("--state-dir=", 0) == 0) {
      state_dir = a.substr(12);
    } else if (a.rfind("--config=", 0) == 0) {
      config = a.substr(9);
    } else {
      return Usage(("unexpected argument '" + a + "'").c_str());
    }
  }
  if (state_dir.empty()) {
    const char* env = std::getenv("GLEANER_STATE_DIR");
    if (env != nullptr) state_dir = env;
  }
  if (state_dir.empty() && !config.empty()) {
    Result<std::map<std::string, std::string>> values = ReadConfigFile(config);
    if (!values.ok()) return Usage(values.status().message().c_str());
    auto it = values->find("state-dir");
    if (it != values->end()) state_dir = it->second;
  }
  if (state_dir.empty()) state_dir = "/var/lib/gleaner-agent";
  std::string sock = files::Join(state_dir, kControlSocketName);

  Result<Json> r = Ask(sock, command);
  if (r.ok() && command == "pause") {
    // Wait (bounded) for the running job to be handed back, so "paused" means paused.
    for (int i = 0; i < 1200; ++i) {
      Result<Json> s = Ask(sock, "status");
      if (!s.ok() || !(*s)["job"].is_object()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (r.ok() && command != "status") r = Ask(sock, "status");
  if (!r.ok()) {
    std::fprintf(stderr, "gleaner-agent: %s\n", r.status().message().c_str());
    return 1;
  }
  if (json) {
    std::printf("%s\n", DumpJson(*r).c_str());
  } else {
    if (command == "pause") std::printf("paused\n");
    if (command == "resume") std::printf("resumed\n");
    std::fputs(FormatStatus(*r).c_str(), stdout);
  }
  return 0;
}

}  // namespace gleaner::agent
