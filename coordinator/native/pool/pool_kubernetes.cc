#include "coordinator/native/pool/pool_kubernetes.h"

#include <algorithm>

#include "coordinator/native/blob/fs.h"

namespace gleaner::native {
namespace {

// DNS-1123 names (pods, namespaces): safe to put in a URL path as is.
bool Dns1123(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return true;
}

std::string QueryEscape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(char(c));
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

class KubernetesPool : public PoolProvider {
 public:
  KubernetesPool(KubernetesOptions o, PoolApi api) : o_(std::move(o)), api_(std::move(api)) {
    while (!o_.api_url.empty() && o_.api_url.back() == '/') o_.api_url.pop_back();
    scale_url_ = o_.api_url + "/apis/apps/v1/namespaces/" + o_.ns + "/deployments/" +
                 o_.deployment + "/scale";
  }

  std::string name() const override { return "kubernetes"; }

  Result<int> Current() override {
    auto s = Call("GET", scale_url_, "", "read the deployment scale");
    if (!s.ok()) return s.status();
    return Replicas(*s, "status");
  }

  Status SetTarget(int target) override {
    auto s = Call("GET", scale_url_, "", "read the deployment scale");
    if (!s.ok()) return s.status();
    if (Replicas(*s, "spec") == target) return Status::Ok();
    return Call("PATCH", scale_url_, DumpJson(Json{{"spec", {{"replicas", target}}}}),
                "scale the deployment")
        .status();
  }

  Result<std::vector<PoolInstance>> Instances() override {
    std::string url = o_.api_url + "/api/v1/namespaces/" + o_.ns + "/pods";
    if (!o_.label_selector.empty()) url += "?labelSelector=" + QueryEscape(o_.label_selector);
    auto body = Call("GET", url, "", "list pods");
    if (!body.ok()) return body.status();
    std::vector<PoolInstance> out;
    if (!(*body).contains("items") || !(*body)["items"].is_array()) return out;
    for (const Json& pod : (*body)["items"]) {
      if (!pod.is_object() || !pod.contains("metadata") || !pod["metadata"].is_object()) continue;
      PoolInstance p;
      p.id = pod["metadata"].value("name", "");
      p.machine_id = p.id;
      if (pod.contains("status") && pod["status"].is_object()) {
        p.state = pod["status"].value("phase", "");
      }
      if (!p.id.empty()) out.push_back(std::move(p));
    }
    return out;
  }

  Result<bool> Reallocate(const std::string& machine_id) override {
    if (!Dns1123(machine_id)) return false;  // not a pod name: not ours to delete
    auto r = Call("DELETE", o_.api_url + "/api/v1/namespaces/" + o_.ns + "/pods/" + machine_id, "",
                  "delete pod");
    if (!r.ok() && r.status().code() == Code::kNotFound) return false;
    if (!r.ok()) return r.status();
    return true;
  }

 private:
  static int Replicas(const Json& scale, const char* part) {
    if (scale.contains(part) && scale[part].is_object() && scale[part].contains("replicas") &&
        scale[part]["replicas"].is_number_integer()) {
      return scale[part]["replicas"].get<int>();
    }
    return 0;  // the API omits zero values
  }

  Result<Json> Call(const std::string& method, const std::string& url, const std::string& body,
                    const std::string& what) {
    auto token = ReadWholeFile(DefaultFs(), o_.token_file);
    if (!token.ok()) {
      return Status::Unavailable("kubernetes token " + o_.token_file + ": " +
                                 token.status().message());
    }
    std::string t = *token;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    net::HttpCall call;
    call.method = method;
    call.url = url;
    call.headers.emplace_back("Authorization", "Bearer " + t);
    call.headers.emplace_back("Accept", "application/json");
    if (method == "PATCH") {
      call.headers.emplace_back("Content-Type", "application/merge-patch+json");
    }
    call.body = body;
    return api_.SendJson(std::move(call), "kubernetes " + what);
  }

  KubernetesOptions o_;
  PoolApi api_;
  std::string scale_url_;
};

}  // namespace

std::unique_ptr<PoolProvider> MakeKubernetesPool(KubernetesOptions options, PoolApi api) {
  return std::make_unique<KubernetesPool>(std::move(options), std::move(api));
}

}  // namespace gleaner::native
