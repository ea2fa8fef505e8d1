// gleaner: the developer and operator command line (see docs/cli.md).
//
// Contract: every command prints its result on stdout (a readable table/line, or the API's JSON
// with --json) and on failure exactly one line "gleaner: <why>" on stderr, with an exit code
// scripts can rely on (ExitCode). Progress (upload, download, submit --wait) goes to stderr: a
// bar on a terminal, plain lines otherwise.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shared/json.h"
#include "shared/native/http_client.h"

namespace gleaner::cli {

enum ExitCode {
  kExitOk = 0,
  kExitUsage = 1,    // bad command line
  kExitApi = 2,      // the coordinator answered with an error (4xx/5xx)
  kExitNetwork = 3,  // no answer: connection refused, DNS, timeout, reset
  kExitJob = 4,      // submit --wait: the job ended failed or canceled
  kExitLocal = 5,    // local file error, or a download failed its sha256/size check
};

// A failure on its way to main(): one line and an exit code.
struct Failure {
  int code = kExitOk;
  std::string message;
  bool ok() const { return code == kExitOk; }
};

// Parsed command line: positional words and --flags (a flag's value follows it; boolean flags
// are listed in main.cc).
struct Args {
  std::vector<std::string> words;
  std::map<std::string, std::string> flags;
  bool Has(const std::string& f) const { return flags.count(f) != 0; }
  std::string Flag(const std::string& f, const std::string& fallback = "") const {
    auto it = flags.find(f);
    return it == flags.end() ? fallback : it->second;
  }
};

struct Reply {
  int status = 0;
  std::string body;
  Json json;  // parsed body (null when not JSON)
};

// The coordinator API over the agent's libcurl client.
class Api {
 public:
  // ca_file: "" = the system CA store; otherwise only the CAs in this PEM file are trusted.
  Api(std::string base_url, std::string token, std::string ca_file = "");
  // A JSON (or CSV) call; non-2xx answers become kExitApi failures with the API's message.
  Failure Call(const std::string& method, const std::string& path, const Json* body, Reply* out,
               const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Streams a file to / from an absolute (signed blob) URL.
  Failure PutFile(const std::string& url, const std::string& path, int64_t size);
  Failure GetFile(const std::string& url, const std::string& path, int64_t size);
  const std::string& base() const { return base_; }

 private:
  std::string base_, token_;
  std::unique_ptr<net::HttpClient> http_;
};

// Commands (commands.cc, transfer.cc). Each returns the exit code.
int CmdUpload(Api& api, const Args& a);
int CmdSubmit(Api& api, const Args& a);
int CmdStatus(Api& api, const Args& a);
int CmdList(Api& api, const Args& a);
int CmdLogs(Api& api, const Args& a);
int CmdCancel(Api& api, const Args& a);
int CmdDownload(Api& api, const Args& a);
int CmdReport(Api& api, const Args& a);
int CmdNodes(Api& api, const Args& a);
int CmdKeys(Api& api, const Args& a);

int CmdModels(Api& api, const Args& a);
int CmdJobs(Api& api, const Args& a);         // jobs submit … (models.cc) | jobs samples …
int CmdJobsSamples(Api& api, const Args& a);  // jobs samples ID [--out DIR] (samples.cc)

// sha256 (hex) and size of a file, streamed.
Failure HashFile(const std::string& path, std::string* sha, int64_t* size);
// POST /v1/uploads for the file, then PUT it with a progress bar; *upload = the API's answer
// (id, uri, key, size, sha256, ...).
Failure UploadFile(Api& api, const std::string& path, const std::string& name, Json* upload);
// After POST /v1/jobs: prints the job id (or the job with --json), or with --wait polls until
// the job is final (exit kExitJob unless it completed).
int PrintOrWaitJob(Api& api, const Args& a, const Json& created);

// Downloads object o ({url, sha256, size}) to dest through dest + ".part", checks its sha256
// and size, then renames it into place; *sha and *got are what arrived. label names it in
// progress and errors.
Failure DownloadVerified(Api& api, const Json& o, const std::string& dest, const std::string& label,
                         std::string* sha, int64_t* got);

// Prints "gleaner: <message>" on stderr; returns f.code.
int Report(const Failure& f);
// Prints a JSON value (pretty, 2 spaces) on stdout.
void PrintJson(const Json& j);

}  // namespace gleaner::cli
