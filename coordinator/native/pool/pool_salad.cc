#include "coordinator/native/pool/pool_salad.h"

#include <algorithm>

namespace gleaner::native {
namespace {

constexpr int kMaxReplicas = 500;  // the container group API's bound

// SaladCloud's name pattern: ^[a-z][a-z0-9-]{0,61}[a-z0-9]$.
bool SaladName(const std::string& s) {
  if (s.size() < 2 || s.size() > 63 || !(s[0] >= 'a' && s[0] <= 'z') || s.back() == '-') {
    return false;
  }
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// A string member, or "" when absent or of another type (outside input never aborts).
std::string Str(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int Count(const Json& counts, const char* key) {
  auto it = counts.find(key);
  return it != counts.end() && it->is_number_integer() ? it->get<int>() : 0;
}

class SaladPool : public PoolProvider {
 public:
  SaladPool(SaladOptions o, PoolApi api)
      : o_(std::move(o)), api_(std::move(api)), names_(CheckSaladNames(o_)) {
    while (!o_.api_url.empty() && o_.api_url.back() == '/') o_.api_url.pop_back();
    base_ = o_.api_url + "/organizations/" + o_.organization + "/projects/" + o_.project +
            "/containers/" + o_.group;
  }

  std::string name() const override { return "salad"; }

  Result<int> Current() override {
    auto g = Group();
    if (!g.ok()) return g.status();
    return g->running;
  }

  Status SetTarget(int target) override {
    target = std::clamp(target, 0, kMaxReplicas);
    auto g = Group();
    if (!g.ok()) return g.status();
    const bool stopped = g->status == "stopped" || g->status == "stopping";
    if (target == 0) {
      if (stopped) return Status::Ok();
      return Call("POST", base_ + "/stop", "", "stop the container group").status();
    }
    if (g->replicas != target) {
      auto r = Call("PATCH", base_, DumpJson(Json{{"replicas", target}}), "set replicas");
      if (!r.ok()) return r.status();
    }
    if (stopped) return Call("POST", base_ + "/start", "", "start the container group").status();
    return Status::Ok();
  }

  Result<std::vector<PoolInstance>> Instances() override {
    auto body = Call("GET", base_ + "/instances", "", "list instances");
    if (!body.ok()) return body.status();
    std::vector<PoolInstance> out;
    const Json& list = (*body).contains("instances") ? (*body)["instances"] : Json::array();
    if (!list.is_array()) return Status::Unavailable("list instances: no instances array");
    for (const Json& i : list) {
      if (!i.is_object()) continue;
      PoolInstance p;
      p.id = Str(i, "id");
      if (p.id.empty()) p.id = Str(i, "instance_id");
      p.machine_id = Str(i, "machine_id");
      p.state = Str(i, "state");
      if (!p.id.empty()) out.push_back(std::move(p));
    }
    return out;
  }

  Result<bool> Reallocate(const std::string& machine_id) override {
    auto list = Instances();
    if (!list.ok()) return list.status();
    for (const PoolInstance& i : *list) {
      if (i.machine_id != machine_id) continue;
      if (!SafeSegment(i.id)) return Status::Unavailable("instance id is not URL-safe: " + i.id);
      auto r = Call("POST", base_ + "/instances/" + i.id + "/reallocate", "", "reallocate");
      if (!r.ok()) return r.status();
      return true;
    }
    return false;
  }

 private:
  struct GroupState {
    int replicas = 0;
    int running = 0;
    std::string status;
  };

  static bool SafeSegment(const std::string& s) {
    if (s.empty() || s.size() > 200) return false;
    for (char c : s) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
        return false;
      }
    }
    return true;
  }

  Result<Json> Call(const std::string& method, const std::string& url, const std::string& body,
                    const std::string& what) {
    if (!names_.ok()) return names_;
    net::HttpCall call;
    call.method = method;
    call.url = url;
    call.headers.emplace_back("Salad-Api-Key", o_.api_key);
    call.headers.emplace_back("Accept", "application/json");
    if (method == "PATCH") {
      call.headers.emplace_back("Content-Type", "application/merge-patch+json");
    }
    call.body = body;
    return api_.SendJson(std::move(call), "salad " + what);
  }

  // replicas, current_state.status and current_state.instance_status_counts: running plus
  // starting (allocating, creating) instances (falls back to replicas when the counts are
  // missing).
  Result<GroupState> Group() {
    auto body = Call("GET", base_, "", "read the container group");
    if (!body.ok()) return body.status();
    const Json& g = *body;
    GroupState s;
    if (g.contains("replicas") && g["replicas"].is_number_integer()) {
      s.replicas = g["replicas"].get<int>();
    }
    s.running = s.replicas;
    if (g.contains("current_state") && g["current_state"].is_object()) {
      const Json& cs = g["current_state"];
      s.status = Str(cs, "status");
      if (cs.contains("instance_status_counts") && cs["instance_status_counts"].is_object()) {
        const Json& c = cs["instance_status_counts"];
        s.running =
            Count(c, "running_count") + Count(c, "allocating_count") + Count(c, "creating_count");
      }
    }
    if (s.status == "stopped") s.running = 0;
    return s;
  }

  SaladOptions o_;
  PoolApi api_;
  Status names_;
  std::string base_;
};

}  // namespace

Status CheckSaladNames(const SaladOptions& o) {
  for (const auto& [what, name] :
       {std::pair{"--salad-organization", &o.organization},
        std::pair{"--salad-project", &o.project}, std::pair{"--salad-container-group", &o.group}}) {
    if (!SaladName(*name)) {
      return Status::Invalid(std::string(what) + " '" + name->substr(0, 80) +
                             "' is not a SaladCloud name (lowercase letters, digits and '-', "
                             "starting with a letter, 2 to 63 characters)");
    }
  }
  return Status::Ok();
}

std::unique_ptr<PoolProvider> MakeSaladPool(SaladOptions options, PoolApi api) {
  return std::make_unique<SaladPool>(std::move(options), std::move(api));
}

}  // namespace gleaner::native
