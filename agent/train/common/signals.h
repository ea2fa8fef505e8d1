// Trainer-side process lifecycle: a "stop requested" flag set by SIGTERM/SIGINT, and the
// parent-death signal so the trainer never outlives its agent.
//
// Contract: call InstallStopHandlers() once at start (main thread). StopRequested() is
// async-signal-safe and may be polled from any thread; kinds check it at step boundaries,
// write a checkpoint and exit kExitInterrupted.
#pragma once

namespace gleaner::train {

// SIGTERM and SIGINT set the stop flag (no SA_RESETHAND: a second signal is harmless; the agent
// escalates to SIGKILL if needed). Also asks the kernel for SIGKILL when the parent dies, and
// exits at once if the parent is already gone (reparented to pid 1).
void InstallStopHandlers();
bool StopRequested();
// For tests and for kinds that want to stop themselves.
void RequestStop();

}  // namespace gleaner::train
