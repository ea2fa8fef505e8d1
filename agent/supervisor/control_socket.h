// The agent's local control socket: a unix stream socket `<state dir>/control.sock`, mode 0600
// inside the 0700 state dir, answering only peers with the agent's own uid (or root, checked with
// SO_PEERCRED). One request per connection: the client sends one line (a command word), the
// server answers one line (JSON) and closes. Used by `gleaner-agent status | pause | resume`.
//
// Threading: ControlServer runs one thread that serves connections one at a time (a client gets
// 2 s to send its line); the handler runs on that thread. Stop() (or the destructor) ends it.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "shared/status.h"

namespace gleaner::agent {

constexpr const char* kControlSocketName = "control.sock";

class ControlServer {
 public:
  using Handler = std::function<std::string(const std::string& command)>;
  ~ControlServer();
  // Binds `path` (replacing a stale socket; refusing when another live agent answers there)
  // and starts serving. The handler's answer is sent as one line.
  Status Start(const std::string& path, Handler handler);
  void Stop();

 private:
  void Loop();
  std::string path_;
  Handler handler_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Sends `command` to the agent listening at `path` and returns its one-line answer.
// kUnavailable when no agent answers there.
Result<std::string> ControlRequest(const std::string& path, const std::string& command,
                                   double timeout_s = 10);

}  // namespace gleaner::agent
