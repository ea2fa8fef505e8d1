// gleaner: command line for the Gleaner API. See usage below and docs/cli.md.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "coordinator/cli/cli.h"

using namespace gleaner::cli;

namespace {

const char kUsage[] =
    "usage: gleaner [--url URL] [--token TOKEN] [--ca-file PEM] COMMAND [args] [--json]\n"
    "\n"
    "  upload FILE [--name NAME]              upload a dataset/model; prints its blob:// uri\n"
    "  submit JOB.json [--wait] [--poll S] [--idempotency-key K]\n"
    "                                         submit a job (JOB.json '-' reads stdin)\n"
    "  models upload DIR [--name N] [-o FILE] upload a diffusers folder once; writes its\n"
    "                                         manifest (default NAME.model.json) for --model\n"
    "  models check MANIFEST                  check a model manifest\n"
    "  jobs submit --images DIR --instance-prompt TEXT --model MANIFEST|DIR\n"
    "       [--train-text-encoder] [--class-images DIR --class-prompt TEXT] [--steps N]\n"
    "       [--params JSON] [--wait]          archive the photos, upload them, submit\n"
    "  status ID                              one job\n"
    "  list [--state S] [--limit N]           jobs, newest first\n"
    "  logs ID                                a job's leases, checkpoints and failures\n"
    "  cancel ID [--reason TEXT]              cancel a pending or running job\n"
    "  download ID [-o DIR]                   a completed job's outputs (sha256-checked)\n"
    "  jobs samples ID [--out DIR]            a job's sample images, DIR/<step>/<i>.png\n"
    "  report [--by job|node|gpu|day] [--from T] [--to T] [--csv]\n"
    "                                         cost report (operator)\n"
    "  nodes [quarantine|restore|revoke ID]   the fleet (operator)\n"
    "  keys create --role R [--name N]        a new API key; prints its token (operator)\n"
    "  keys list | keys revoke ID             API keys (never their tokens); revoke one\n"
    "\n"
    "GLEANER_URL, GLEANER_TOKEN and GLEANER_CA_FILE are read when the flags are not given.\n"
    "HTTPS certificates are always verified: against the system CAs, or only the CAs in\n"
    "--ca-file (a private CA). There is no option to turn verification off.\n"
    "Exit codes: 0 ok, 1 usage, 2 API error, 3 network error, 4 job failed or canceled\n"
    "(submit --wait), 5 local file error or checksum mismatch.\n";

const std::set<std::string> kBoolFlags = {
    "json", "wait", "csv", "help", "train-text-encoder", "extend-to-enroll-key"};
const std::set<std::string> kValueFlags = {"url",
                                           "token",
                                           "name",
                                           "poll",
                                           "idempotency-key",
                                           "state",
                                           "limit",
                                           "reason",
                                           "o",
                                           "by",
                                           "from",
                                           "to",
                                           "role",
                                           "ca-file",
                                           "images",
                                           "instance-prompt",
                                           "class-images",
                                           "class-prompt",
                                           "model",
                                           "steps",
                                           "params",
                                           "out"};

bool Parse(int argc, char** argv, Args* a, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string w = argv[i];
    if (w == "-o" || w == "-h") w = w == "-o" ? "--o" : "--help";
    if (w.size() > 2 && w.rfind("--", 0) == 0) {
      std::string name = w.substr(2), value;
      size_t eq = name.find('=');
      bool has_value = eq != std::string::npos;
      if (has_value) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (kBoolFlags.count(name)) {
        if (has_value) {
          *error = "--" + name + " takes no value";
          return false;
        }
        a->flags[name] = "1";
      } else if (kValueFlags.count(name)) {
        if (!has_value) {
          if (i + 1 >= argc) {
            *error = "--" + name + " needs a value";
            return false;
          }
          value = argv[++i];
        }
        a->flags[name] = value;
      } else {
        *error = "unknown option " + w;
        return false;
      }
    } else {
      a->words.push_back(w);
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  std::string error;
  if (!Parse(argc, argv, &a, &error)) {
    return Report({kExitUsage, error + " (see gleaner --help)"});
  }
  if (a.Has("help") || a.words.empty()) {
    std::fputs(kUsage, a.Has("help") ? stdout : stderr);
    return a.Has("help") ? kExitOk : kExitUsage;
  }
  std::string cmd = a.words[0];
  a.words.erase(a.words.begin());
  const char* env_url = std::getenv("GLEANER_URL");
  const char* env_token = std::getenv("GLEANER_TOKEN");
  std::string url = a.Flag("url", env_url != nullptr ? env_url : "");
  std::string token = a.Flag("token", env_token != nullptr ? env_token : "");
  if (url.empty()) return Report({kExitUsage, "no coordinator URL (set GLEANER_URL or --url)"});
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return Report({kExitUsage, "the URL must start with http:// or https://: " + url});
  }
  if (token.empty()) return Report({kExitUsage, "no token (set GLEANER_TOKEN or --token)"});
  const char* env_ca = std::getenv("GLEANER_CA_FILE");
  std::string ca_file = a.Flag("ca-file", env_ca != nullptr ? env_ca : "");
  if (!ca_file.empty()) {
    std::FILE* f = std::fopen(ca_file.c_str(), "rb");
    if (f == nullptr) return Report({kExitUsage, "cannot read the CA file " + ca_file});
    std::fclose(f);
  }
  Api api(url, token, ca_file);
  using Cmd = int (*)(Api&, const Args&);
  const std::pair<const char*, Cmd> kCommands[] = {
      {"upload", CmdUpload},     {"submit", CmdSubmit}, {"status", CmdStatus},
      {"list", CmdList},         {"logs", CmdLogs},     {"cancel", CmdCancel},
      {"download", CmdDownload}, {"report", CmdReport}, {"nodes", CmdNodes},
      {"keys", CmdKeys},         {"models", CmdModels}, {"jobs", CmdJobs},
  };
  for (const auto& [name, fn] : kCommands) {
    if (cmd == name) return fn(api, a);
  }
  return Report({kExitUsage, "unknown command '" + cmd + "' (see gleaner --help)"});
}
