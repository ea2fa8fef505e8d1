// gleaner jobs samples ID [--out DIR]: every committed sample image of a job, as
// DIR/<step>/<i>.png (sha256-checked), and DIR/samples.json: the listing (steps, seeds, seconds,
// prompts, sha256), without the short-lived URLs. DIR defaults to "samples-<ID>".
#include <sys/stat.h>

#include <cstdio>

#include "coordinator/cli/cli.h"
#include "shared/native/files.h"

namespace gleaner::cli {
namespace {

bool MakeDir(const std::string& dir) {
  struct stat st;
  return stat(dir.c_str(), &st) == 0 ? S_ISDIR(st.st_mode) : mkdir(dir.c_str(), 0755) == 0;
}

}  // namespace

int CmdJobsSamples(Api& api, const Args& a) {
  if (a.words.size() != 2) {
    return Report({kExitUsage, "usage: gleaner jobs samples ID [--out DIR]"});
  }
  const std::string id = a.words[1];
  const std::string dir = a.Flag("out", "samples-" + id);
  if (!MakeDir(dir)) return Report({kExitLocal, "cannot create " + dir});
  Json listing = Json::array();
  std::string before;
  int images = 0;
  do {
    Reply r;
    Failure f = api.Call("GET", "/v1/jobs/" + id + "/samples?limit=100" + before, nullptr, &r);
    if (!f.ok()) return Report(f);
    if (!r.json.is_object() || !r.json.contains("steps") || !r.json["steps"].is_array()) {
      return Report({kExitApi, "unexpected samples listing"});
    }
    for (Json step : r.json["steps"]) {
      const int64_t n = step.value("step", int64_t(-1));
      if (n < 1 || !step.contains("images") || !step["images"].is_array()) {
        return Report({kExitApi, "unexpected samples listing"});
      }
      const std::string step_dir = dir + "/" + std::to_string(n);
      if (!MakeDir(step_dir)) return Report({kExitLocal, "cannot create " + step_dir});
      for (Json& img : step["images"]) {
        const int64_t index = img.value("index", int64_t(-1));
        if (index < 0 || index > 63) return Report({kExitApi, "unexpected sample index"});
        const std::string name = std::to_string(n) + "/" + std::to_string(index) + ".png";
        std::string sha;
        int64_t got = 0;
        f = DownloadVerified(api, img, dir + "/" + name, name, &sha, &got);
        if (!f.ok()) return Report(f);
        if (!a.Has("json")) std::printf("%s  %s/%s\n", sha.c_str(), dir.c_str(), name.c_str());
        img.erase("url");
        img.erase("expires_at");
        ++images;
      }
      listing.push_back(step);
    }
    const Json& next = r.json["next_before"];
    before = next.is_number_integer() ? "&before=" + std::to_string(next.get<int64_t>()) : "";
  } while (!before.empty());
  Json summary = {{"job_id", id}, {"dir", dir}, {"images", images}, {"steps", listing}};
  Status s = files::WriteSynced(dir + "/samples.json", DumpJson(summary) + "\n");
  if (!s.ok()) return Report({kExitLocal, s.message()});
  if (a.Has("json")) PrintJson(summary);
  return kExitOk;
}

}  // namespace gleaner::cli
