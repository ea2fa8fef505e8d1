// Black-box test harness: real processes on loopback, waited on with timeouts.
//
// A small library (CMake target `gleaner_test_harness`) for integration and end-to-end tests:
//   TempDir        a fresh directory, removed recursively when destroyed (kept when the
//                  environment has GLEANER_KEEP_TEMP=1, for debugging).
//   WaitUntil      polls a condition until it holds or a timeout passes; never sleep-and-hope.
//   Process        a child process started with fork/execve in its own process group, with
//                  extra environment, working directory and stdout/stderr captured to files;
//                  Signal/Wait/Kill/Stop; the destructor stops it (SIGTERM, then SIGKILL) and
//                  reaps it. The child also dies (SIGKILL) if the thread that started it exits,
//                  so a crashed test leaves nothing behind: start processes from the test's
//                  main thread.
//   WaitForPortFile  reads a port written by a child (e.g. `--port-file`), failing fast if the
//                  child exits first; lets tests listen on port 0 and run in parallel.
//   HttpClient     a tiny HTTP/1.1 client (cpp-httplib) with JSON helpers and bearer tokens;
//                  one per thread (not thread-safe). Fetch() takes absolute URLs (signed blob
//                  URLs, S3 URLs). https:// bases verify the server against a CA file.
//   BinPath        build/bin/<name> of the build the tests belong to.
// Errors are reported in return values (no exceptions escape the harness); tests REQUIRE them.
// coordinator_fixture.h builds on this: CoordinatorProcess (a real gleaner-coordinator on port 0
// with its own database and data dir) and API shortcuts (keys, node registration, jobs).
// The test process ignores SIGPIPE once an HttpClient exists (early server answers are results).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shared/json.h"

namespace gleaner::testing {

using Millis = std::chrono::milliseconds;

// ---- files and directories ---------------------------------------------------------------

class TempDir {
 public:
  // Created under $TMPDIR (default /tmp), or under `base` when given (e.g. MemoryTempBase()).
  explicit TempDir(const std::string& prefix = "gleaner-test", const std::string& base = "");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A RAM-backed directory (/dev/shm) when there is one, else "" (the default base). For tests that
// create thousands of files and do not test durability: removal on some disks is slow.
std::string MemoryTempBase();

// Whole file contents, or `fallback` if it cannot be read.
std::string ReadFile(const std::string& path, const std::string& fallback = "");
// Writes (replaces) a file; false on error.
bool WriteFile(const std::string& path, const std::string& content);
// Recursive remove (like rm -rf); ignores errors.
void RemoveAll(const std::string& path);

// utime + stime of a process in clock ticks (from /proc/<pid>/stat), or -1 if unreadable.
long long CpuTicks(pid_t pid);

// Absolute path of a built binary: <build>/bin/<name>.
std::string BinPath(const std::string& name);

// ---- waiting -------------------------------------------------------------------------------

// Calls `cond` every `poll` until it returns true (→ true) or `timeout` passes (→ false).
bool WaitUntil(const std::function<bool()>& cond, Millis timeout, Millis poll = Millis(5));

// ---- processes -----------------------------------------------------------------------------

struct ExitStatus {
  bool exited = false;  // normal exit: see code
  int code = -1;
  bool signaled = false;  // killed by a signal: see signal
  int signal = 0;
  bool clean() const { return exited && code == 0; }
  std::string ToString() const;  // "exit 0", "signal 9"
};

struct ProcessSpec {
  std::string binary;                                    // path, or a name in BinPath()
  std::vector<std::string> args;                         // without argv[0]
  std::vector<std::pair<std::string, std::string>> env;  // set on top of this process's env
  std::vector<std::string> unset_env;                    // removed from the inherited env
  std::string cwd;                                       // "" = inherit
  std::string stdout_path;                               // "" = /dev/null; appended to
  std::string stderr_path;                               // "" = /dev/null; appended to
};

class Process {
 public:
  explicit Process(ProcessSpec spec);
  ~Process();  // Stop() if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Starts the child (again, if it ran before and has exited). False + *error on failure,
  // including a failed exec.
  bool Start(std::string* error);

  pid_t pid() const { return pid_; }
  // True while the child has not exited (reaps it when it has).
  bool Running();
  // Sends sig to the child's process group.
  void Signal(int sig);
  // Waits for exit up to timeout; nullopt if still running.
  std::optional<ExitStatus> Wait(Millis timeout);
  // SIGKILL to the group and reap.
  ExitStatus Kill();
  // SIGTERM, wait up to grace, then SIGKILL; returns how it ended.
  ExitStatus Stop(Millis grace = Millis(5000));
  // Status of the last exit, if the child has exited.
  std::optional<ExitStatus> exit_status() const { return exit_; }

  ProcessSpec& spec() { return spec_; }
  std::string Stdout() const { return ReadFile(spec_.stdout_path); }
  std::string Stderr() const { return ReadFile(spec_.stderr_path); }

 private:
  ProcessSpec spec_;
  pid_t pid_ = -1;
  std::optional<ExitStatus> exit_;
};

// One run of a command line tool (e.g. the gleaner CLI) to its end: exit code (128 + signal
// when killed; -1 when it could not start or did not end within timeout), stdout, stderr. The
// output goes through files under dir (<name>N.out, <name>N.err).
struct ToolRun {
  int code = -1;
  std::string out, err;
};
ToolRun RunTool(const TempDir& dir, ProcessSpec spec, Millis timeout = Millis(60000));

// Waits until `path` holds a port number (1..65535) followed by a newline. Returns nullopt on
// timeout or as soon as `proc` (if given) exits.
std::optional<int> WaitForPortFile(const std::string& path, Process* proc, Millis timeout);

// ---- HTTP ----------------------------------------------------------------------------------

struct HttpResult {
  int status = 0;     // 0: no response (see error)
  std::string error;  // transport error text when status == 0
  std::string body;
  std::multimap<std::string, std::string> headers;  // names lowercase

  // Body parsed as JSON (null on parse failure).
  Json json() const;
  // First header value (name case-insensitive) or "".
  std::string Header(const std::string& name) const;
  // "STATUS body" for assertion messages.
  std::string Describe() const;
};

using Headers = std::vector<std::pair<std::string, std::string>>;

class HttpClient {
 public:
  // base: "http://127.0.0.1:1234" (no trailing slash needed).
  explicit HttpClient(const std::string& base);
  HttpClient(const std::string& host, int port);
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  // Adds `Authorization: Bearer <token>` to every request ("" = none).
  void set_token(std::string token) { token_ = std::move(token); }
  void set_timeout(Millis timeout);
  // Reuse one connection between requests (default on).
  void set_keep_alive(bool on);
  // https:// only: trust the CA certificates in this PEM file (verification is always on).
  void set_ca_file(const std::string& path);

  HttpResult Get(const std::string& path_and_query, const Headers& headers = {});
  HttpResult Post(const std::string& path, const Json& body, const Headers& headers = {});
  HttpResult Request(const std::string& method, const std::string& path_and_query,
                     const std::string& body, const std::string& content_type,
                     const Headers& headers = {});

  const std::string& base() const { return base_; }

  // One request to an absolute URL ("http://host:port/path?query"), new connection, no token.
  // https:// URLs are verified against ca_file.
  static HttpResult Fetch(const std::string& method, const std::string& url,
                          const std::string& body = "",
                          const std::string& content_type = "application/octet-stream",
                          const Headers& headers = {}, const std::string& ca_file = "");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string base_;
  std::string token_;
};

}  // namespace gleaner::testing
