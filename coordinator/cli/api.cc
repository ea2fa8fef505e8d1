#include <algorithm>

#include "coordinator/cli/cli.h"
#include "shared/native/curl_http.h"

namespace gleaner::cli {
namespace {

Failure Transport(const Status& st) {
  return {st.code() == Code::kIo ? kExitLocal : kExitNetwork, st.message()};
}

// "409 conflict: lease epoch 1 is stale" from the API's error envelope (or the raw body).
std::string ApiMessage(int status, const std::string& body) {
  auto parsed = ParseJson(body);
  if (parsed.ok() && parsed->is_object() && parsed->contains("error") &&
      (*parsed)["error"].is_object()) {
    const Json& e = (*parsed)["error"];
    std::string code =
        e.contains("code") && e["code"].is_string() ? e["code"].get<std::string>() : "";
    std::string msg =
        e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
    return std::to_string(status) + " " + code + ": " + msg;
  }
  std::string text = body.substr(0, 200);
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return "HTTP " + std::to_string(status) + (text.empty() ? "" : ": " + text);
}

}  // namespace

Api::Api(std::string base_url, std::string token, std::string ca_file)
    : base_(std::move(base_url)),
      token_(std::move(token)),
      http_(std::make_unique<net::CurlHttpClient>(net::CurlOptions{std::move(ca_file)})) {
  while (!base_.empty() && base_.back() == '/') base_.pop_back();
}

Failure Api::Call(const std::string& method, const std::string& path, const Json* body, Reply* out,
                  const std::vector<std::pair<std::string, std::string>>& headers) {
  net::HttpCall call;
  call.method = method;
  call.url = base_ + path;
  call.headers = headers;
  if (!token_.empty()) call.headers.emplace_back("Authorization", "Bearer " + token_);
  if (body != nullptr) {
    call.body = DumpJson(*body);
    call.headers.emplace_back("Content-Type", "application/json");
  }
  auto r = http_->Send(call);
  if (!r.ok()) return Transport(r.status());
  out->status = r->status;
  out->body = std::move(r->body);
  auto parsed = ParseJson(out->body);
  out->json = parsed.ok() ? std::move(parsed).value() : Json(nullptr);
  if (out->status < 200 || out->status >= 300) {
    return {kExitApi, method + " " + path + ": " + ApiMessage(out->status, out->body)};
  }
  return {};
}

Failure Api::PutFile(const std::string& url, const std::string& path, int64_t size) {
  net::HttpCall call;
  call.method = "PUT";
  call.url = url;
  call.upload_file = path;
  call.headers.emplace_back("Content-Type", "application/octet-stream");
  call.timeout_ms = int(std::min<int64_t>(24 * 3600 * 1000, 60000 + size / 1000));
  auto r = http_->Send(call);
  if (!r.ok()) return Transport(r.status());
  if (r->status < 200 || r->status >= 300)
    return {kExitApi, "upload: " + ApiMessage(r->status, r->body)};
  return {};
}

Failure Api::GetFile(const std::string& url, const std::string& path, int64_t size) {
  net::HttpCall call;
  call.url = url;
  call.download_file = path;
  call.timeout_ms = int(std::min<int64_t>(24 * 3600 * 1000, 60000 + size / 1000));
  auto r = http_->Send(call);
  if (!r.ok()) return Transport(r.status());
  if (r->status < 200 || r->status >= 300) {
    return {kExitApi, "download: " + ApiMessage(r->status, r->body)};
  }
  return {};
}

}  // namespace gleaner::cli
