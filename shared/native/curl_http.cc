#include "shared/native/curl_http.h"

#include <curl/curl.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace gleaner::net {
namespace {

struct Ctx {
  CURL* curl = nullptr;
  HttpResponse* resp = nullptr;
  const std::string* download_file = nullptr;
  const std::function<bool(std::string_view)>* sink = nullptr;
  bool sink_stopped = false;
  FILE* out = nullptr;
  bool file_error = false;
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  Ctx* ctx = static_cast<Ctx*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) ctx->resp->headers.clear();  // a new response (redirect, 100)
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) {
      value.erase(0, 1);
    }
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) {
      value.pop_back();
    }
    ctx->resp->headers[name] = value;
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  Ctx* ctx = static_cast<Ctx*>(user);
  size_t len = size * n;
  long code = 0;
  curl_easy_getinfo(ctx->curl, CURLINFO_RESPONSE_CODE, &code);
  if (ctx->sink != nullptr && *ctx->sink && code >= 200 && code < 300) {
    if ((*ctx->sink)(std::string_view(data, len))) return len;
    ctx->sink_stopped = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  if (ctx->download_file != nullptr && !ctx->download_file->empty() && code >= 200 && code < 300) {
    if (ctx->out == nullptr) {
      ctx->out = std::fopen(ctx->download_file->c_str(), "wb");
      if (ctx->out == nullptr) {
        ctx->file_error = true;
        return 0;
      }
    }
    if (std::fwrite(data, 1, len, ctx->out) != len) {
      ctx->file_error = true;
      return 0;
    }
    return len;
  }
  if (ctx->resp->body.size() + len > (64u << 20)) return 0;  // refuse absurd error bodies
  ctx->resp->body.append(data, len);
  return len;
}

CURL* ThreadHandle() {
  struct Holder {
    CURL* h = curl_easy_init();
    ~Holder() {
      if (h != nullptr) curl_easy_cleanup(h);
    }
  };
  thread_local Holder holder;
  return holder.h;
}

// Signed URLs carry credentials in the query: keep it out of error messages (and so logs).
std::string RedactQuery(const std::string& url) {
  size_t q = url.find('?');
  return q == std::string::npos ? url : url.substr(0, q) + "?...";
}

// Why a transfer failed, for logs: libcurl's detailed message, with a hint for certificates.
std::string TransferError(CURLcode rc, const char* errbuf, const std::string& ca_file) {
  std::string detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
  if (rc == CURLE_PEER_FAILED_VERIFICATION) {
    return "TLS certificate refused: " + detail +
           (ca_file.empty() ? " (trusting the system CAs; --ca-file pins a private CA)"
                            : " (trusting only the CAs in " + ca_file + ")");
  }
  if (rc == CURLE_SSL_CONNECT_ERROR) return "TLS handshake failed: " + detail;
  return detail;
}

}  // namespace

CurlHttpClient::CurlHttpClient(CurlOptions options) : options_(std::move(options)) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

Result<HttpResponse> CurlHttpClient::Send(const HttpCall& call) {
  CURL* curl = ThreadHandle();
  if (curl == nullptr) return Status::Internal("curl_easy_init failed");
  curl_easy_reset(curl);
  HttpResponse resp;
  Ctx ctx;
  ctx.curl = curl;
  ctx.resp = &resp;
  ctx.download_file = &call.download_file;
  ctx.sink = &call.sink;
  FILE* upload = nullptr;
  curl_easy_setopt(curl, CURLOPT_URL, call.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, long(call.timeout_ms));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  // TLS policy (reset above, so set on every call): always verify, TLS 1.2 or newer.
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_SSLVERSION, long(CURL_SSLVERSION_TLSv1_2));
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options_.ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
    curl_easy_setopt(curl, CURLOPT_CAPATH,
                     static_cast<const char*>(nullptr));  // only this file, not the system store
  }
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &ctx);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &ctx);
  struct curl_slist* headers = nullptr;
  for (const auto& h : call.headers) {
    headers = curl_slist_append(headers, (h.first + ": " + h.second).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (!call.upload_file.empty()) {
    upload = std::fopen(call.upload_file.c_str(), "rb");
    if (upload == nullptr) {
      curl_slist_free_all(headers);
      return Status::Io("open " + call.upload_file + ": " + std::strerror(errno));
    }
    std::fseek(upload, 0, SEEK_END);
    long size = std::ftell(upload);
    std::fseek(upload, 0, SEEK_SET);
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READDATA, upload);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(size));
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, call.method.c_str());
  } else if (call.method == "GET") {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, call.method.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, call.body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(call.body.size()));
  }
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  if (upload != nullptr) std::fclose(upload);
  bool close_failed = false;
  if (ctx.out != nullptr) close_failed = std::fclose(ctx.out) != 0;
  if (ctx.file_error || close_failed) {
    return Status::Io("writing " + call.download_file + " failed");
  }
  if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && ctx.sink_stopped)) {
    return Status::Unavailable(call.method + " " + RedactQuery(call.url) + ": " +
                               TransferError(rc, errbuf, options_.ca_file));
  }
  if (code >= 200 && code < 300 && !call.download_file.empty() && ctx.out == nullptr) {
    // Empty 2xx body: still create the (empty) file.
    FILE* f = std::fopen(call.download_file.c_str(), "wb");
    if (f == nullptr) return Status::Io("open " + call.download_file);
    std::fclose(f);
  }
  resp.status = int(code);
  return resp;
}

}  // namespace gleaner::net
