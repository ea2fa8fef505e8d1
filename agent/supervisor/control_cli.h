// `gleaner-agent status | pause | resume [--state-dir DIR] [--config FILE] [--json]`: talks to
// the running agent over its control socket (control_socket.h). The state dir comes from
// --state-dir, else GLEANER_STATE_DIR, else the config file's state-dir, else
// /var/lib/gleaner-agent. No agent running: one line on stderr, exit 1; bad usage: exit 64.
#pragma once

namespace gleaner::agent {

// True when argv[1] is a control command.
bool IsControlCommand(int argc, char** argv);
// Runs it; returns the process exit code.
int RunControlCommand(int argc, char** argv);

}  // namespace gleaner::agent
