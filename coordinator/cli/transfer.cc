// upload, submit (--wait), download: the commands that move files or wait.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "coordinator/cli/cli.h"
#include "coordinator/cli/progress.h"
#include "shared/sha256.h"

namespace gleaner::cli {

Failure HashFile(const std::string& path, std::string* sha, int64_t* size) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return {kExitLocal, "cannot read " + path};
  Sha256 h;
  char buf[1 << 16];
  *size = 0;
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    h.Update(buf, n);
    *size += int64_t(n);
  }
  bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) return {kExitLocal, "error reading " + path};
  *sha = HexEncode(h.Finish());
  return {};
}

namespace {

std::string Base(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Str(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
int64_t Int(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<int64_t>() : 0;
}

bool Final(const std::string& state) {
  return state == "completed" || state == "failed" || state == "canceled";
}

}  // namespace

Failure UploadFile(Api& api, const std::string& path, const std::string& name, Json* upload) {
  std::string sha;
  int64_t size = 0;
  Failure f = HashFile(path, &sha, &size);
  if (!f.ok()) return f;
  Json body = {{"name", name}, {"size", size}, {"sha256", sha}};
  Reply r;
  f = api.Call("POST", "/v1/uploads", &body, &r);
  if (!f.ok()) return f;
  std::string url = Str(r.json, "url");
  f = WithTransferProgress("upload " + name, path, size, true,
                           [&] { return api.PutFile(url, path, size); });
  if (!f.ok()) return f;
  *upload = r.json;
  return {};
}

int CmdUpload(Api& api, const Args& a) {
  if (a.words.size() != 1) return Report({kExitUsage, "usage: gleaner upload FILE [--name NAME]"});
  const std::string& path = a.words[0];
  Reply r;
  Failure f = UploadFile(api, path, a.Flag("name", Base(path)), &r.json);
  if (!f.ok()) return Report(f);
  if (a.Has("json")) {
    Json out = r.json;
    out.erase("url");
    PrintJson(out);
  } else {
    std::printf("%s\n", Str(r.json, "uri").c_str());
  }
  return kExitOk;
}

int CmdSubmit(Api& api, const Args& a) {
  if (a.words.size() != 1) {
    return Report({kExitUsage, "usage: gleaner submit JOB.json [--wait] [--idempotency-key K]"});
  }
  std::string text;
  {
    FILE* f = a.words[0] == "-" ? stdin : std::fopen(a.words[0].c_str(), "rb");
    if (f == nullptr) return Report({kExitLocal, "cannot read " + a.words[0]});
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    if (f != stdin) std::fclose(f);
  }
  auto spec = ParseJson(text);
  if (!spec.ok() || !spec->is_object()) {
    return Report(
        {kExitLocal, a.words[0] + " is not a JSON object: " +
                         (spec.ok() ? std::string("wrong type") : spec.status().message())});
  }
  std::vector<std::pair<std::string, std::string>> headers;
  if (a.Has("idempotency-key")) headers.emplace_back("Idempotency-Key", a.Flag("idempotency-key"));
  Reply r;
  Failure f = api.Call("POST", "/v1/jobs", &*spec, &r, headers);
  if (!f.ok()) return Report(f);
  return PrintOrWaitJob(api, a, r.json);
}

int PrintOrWaitJob(Api& api, const Args& a, const Json& created) {
  Reply r;
  r.json = created;
  Failure f;
  std::string id = Str(r.json, "id");
  if (!a.Has("wait")) {
    if (a.Has("json")) {
      PrintJson(r.json);
    } else {
      std::printf("%s\n", id.c_str());
    }
    return kExitOk;
  }
  double poll_s = std::atof(a.Flag("poll", "1").c_str());
  if (!(poll_s > 0)) poll_s = 1;
  Json job = r.json;
  Progress progress("job " + id, Int(job, "steps"), "steps");
  while (true) {
    std::string state = Str(job, "state");
    progress.Update(Int(job, "step"), state);
    if (Final(state)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(int64_t(poll_s * 1000)));
    f = api.Call("GET", "/v1/jobs/" + id, nullptr, &r);
    if (!f.ok()) {
      progress.Finish("");
      return Report(f);
    }
    job = r.json;
  }
  std::string state = Str(job, "state");
  progress.Finish("");
  if (a.Has("json")) {
    PrintJson(job);
  } else {
    std::printf("%s %s\n", id.c_str(), state.c_str());
  }
  if (state != "completed") {
    return Report({kExitJob, "job " + id + " " + state +
                                 (Str(job, "reason").empty() ? "" : ": " + Str(job, "reason"))});
  }
  return kExitOk;
}

Failure DownloadVerified(Api& api, const Json& o, const std::string& dest, const std::string& label,
                         std::string* sha, int64_t* got) {
  std::string tmp = dest + ".part";
  int64_t size = Int(o, "size");
  Failure f = WithTransferProgress("download " + label, tmp, size, false,
                                   [&] { return api.GetFile(Str(o, "url"), tmp, size); });
  if (f.ok()) f = HashFile(tmp, sha, got);
  if (f.ok() && (*sha != Str(o, "sha256") || *got != size)) {
    f = {kExitLocal, label + ": sha256/size mismatch (got " + *sha + ", " + std::to_string(*got) +
                         " bytes; expected " + Str(o, "sha256") + ", " + std::to_string(size) +
                         ")"};
  }
  if (f.ok() && std::rename(tmp.c_str(), dest.c_str()) != 0) {
    f = {kExitLocal, "cannot rename " + tmp + " to " + dest};
  }
  if (!f.ok()) unlink(tmp.c_str());
  return f;
}

int CmdDownload(Api& api, const Args& a) {
  if (a.words.size() != 1) return Report({kExitUsage, "usage: gleaner download ID [-o DIR]"});
  std::string dir = a.Flag("o", ".");
  Reply r;
  Failure f = api.Call("GET", "/v1/jobs/" + a.words[0] + "/result", nullptr, &r);
  if (!f.ok()) return Report(f);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 && mkdir(dir.c_str(), 0755) != 0) {
    return Report({kExitLocal, "cannot create " + dir});
  }
  Json files = Json::array();
  Json outputs = Json::array();
  if (r.json.is_object() && r.json.contains("outputs") && r.json["outputs"].is_array()) {
    outputs = r.json["outputs"];
  }
  for (const Json& o : outputs) {
    std::string name = Base(Str(o, "name"));
    if (name.empty() || name[0] == '.') return Report({kExitApi, "refusing output name " + name});
    std::string dest = dir + "/" + name, sha;
    int64_t got = 0;
    f = DownloadVerified(api, o, dest, name, &sha, &got);
    if (!f.ok()) return Report(f);
    files.push_back({{"name", name}, {"path", dest}, {"sha256", sha}, {"size", got}});
    if (!a.Has("json")) std::printf("%s  %s\n", sha.c_str(), dest.c_str());
  }
  if (a.Has("json")) PrintJson({{"job_id", a.words[0]}, {"files", files}});
  return kExitOk;
}

}  // namespace gleaner::cli
