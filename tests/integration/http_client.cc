// The HTTP half of the black-box harness (harness.h): HttpResult and HttpClient over
// cpp-httplib. Kept apart from harness.cc (files, waiting, processes) so that tests which start
// only processes, such as the trainer-only build's train_tests, link without cpp-httplib.
#include <httplib.h>
#include <signal.h>

#include <cctype>
#include <mutex>
#include <string>
#include <utility>

#include "tests/integration/harness.h"

namespace gleaner::testing {

// ---- HTTP ----------------------------------------------------------------------------------

Json HttpResult::json() const {
  auto parsed = ParseJson(body);
  return parsed.ok() ? *parsed : Json();
}

std::string HttpResult::Header(const std::string& name) const {
  std::string lower = name;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  auto it = headers.find(lower);
  return it == headers.end() ? "" : it->second;
}

std::string HttpResult::Describe() const {
  if (status == 0) return "no response: " + error;
  return std::to_string(status) + " " + body;
}

namespace {
// A server may answer early and close while a request body is still being sent; that must be
// an error result, not a SIGPIPE that kills the test process.
void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { ::signal(SIGPIPE, SIG_IGN); });
}
}  // namespace

struct HttpClient::Impl {
  explicit Impl(const std::string& base) : cli(base) {
    IgnoreSigpipe();
    cli.set_tcp_nodelay(true);
    cli.set_url_encode(false);  // send paths and signed queries byte for byte
    cli.set_keep_alive(true);
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(30, 0);
    cli.set_write_timeout(30, 0);
  }
  httplib::Client cli;
};

namespace {

HttpResult Convert(httplib::Result&& r) {
  HttpResult out;
  if (!r) {
    out.error = httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.body = std::move(r->body);
  for (const auto& [k, v] : r->headers) {
    std::string lower = k;
    for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
    out.headers.emplace(lower, v);
  }
  return out;
}

HttpResult Send(httplib::Client& cli, const std::string& method, const std::string& path,
                const std::string& body, const std::string& content_type,
                const httplib::Headers& headers) {
  try {
    if (method == "GET") return Convert(cli.Get(path.c_str(), headers));
    if (method == "POST")
      return Convert(cli.Post(path.c_str(), headers, body, content_type.c_str()));
    if (method == "PUT") return Convert(cli.Put(path.c_str(), headers, body, content_type.c_str()));
    if (method == "PATCH") {
      return Convert(cli.Patch(path.c_str(), headers, body, content_type.c_str()));
    }
    if (method == "DELETE") {
      return Convert(cli.Delete(path.c_str(), headers, body, content_type.c_str()));
    }
    if (method == "HEAD") return Convert(cli.Head(path.c_str(), headers));
    HttpResult bad;
    bad.error = "unsupported method " + method;
    return bad;
  } catch (const std::exception& e) {
    HttpResult bad;
    bad.error = std::string("exception: ") + e.what();
    return bad;
  }
}

httplib::Headers MakeHeaders(const Headers& extra, const std::string& token) {
  httplib::Headers h;
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  for (const auto& kv : extra) h.emplace(kv.first, kv.second);
  return h;
}

}  // namespace

HttpClient::HttpClient(const std::string& base)
    : impl_(std::make_unique<Impl>(base)), base_(base) {}
HttpClient::HttpClient(const std::string& host, int port)
    : HttpClient("http://" + host + ":" + std::to_string(port)) {}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

void HttpClient::set_timeout(Millis timeout) {
  auto s = timeout.count() / 1000, us = (timeout.count() % 1000) * 1000;
  impl_->cli.set_read_timeout(time_t(s), time_t(us));
  impl_->cli.set_write_timeout(time_t(s), time_t(us));
}

void HttpClient::set_keep_alive(bool on) {
  impl_->cli.set_keep_alive(on);
}

void HttpClient::set_ca_file(const std::string& path) {
  impl_->cli.set_ca_cert_path(path);
  impl_->cli.enable_server_certificate_verification(true);
}

HttpResult HttpClient::Get(const std::string& path_and_query, const Headers& headers) {
  return Send(impl_->cli, "GET", path_and_query, "", "", MakeHeaders(headers, token_));
}

HttpResult HttpClient::Post(const std::string& path, const Json& body, const Headers& headers) {
  return Send(impl_->cli, "POST", path, DumpJson(body), "application/json",
              MakeHeaders(headers, token_));
}

HttpResult HttpClient::Request(const std::string& method, const std::string& path_and_query,
                               const std::string& body, const std::string& content_type,
                               const Headers& headers) {
  return Send(impl_->cli, method, path_and_query, body, content_type, MakeHeaders(headers, token_));
}

HttpResult HttpClient::Fetch(const std::string& method, const std::string& url,
                             const std::string& body, const std::string& content_type,
                             const Headers& headers, const std::string& ca_file) {
  size_t scheme = url.find("://");
  size_t slash = scheme == std::string::npos ? std::string::npos : url.find('/', scheme + 3);
  if (slash == std::string::npos) {
    HttpResult bad;
    bad.error = "not an absolute URL: " + url;
    return bad;
  }
  IgnoreSigpipe();
  try {
    httplib::Client cli(url.substr(0, slash));
    cli.set_tcp_nodelay(true);
    cli.set_url_encode(false);
    cli.set_read_timeout(30, 0);
    if (!ca_file.empty()) cli.set_ca_cert_path(ca_file);
    cli.enable_server_certificate_verification(true);
    return Send(cli, method, url.substr(slash), body, content_type, MakeHeaders(headers, ""));
  } catch (const std::exception& e) {
    HttpResult bad;
    bad.error = std::string("exception: ") + e.what();
    return bad;
  }
}

}  // namespace gleaner::testing
