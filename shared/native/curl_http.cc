#include "shared/native/curl_http.h"

#include <curl/curl.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "shared/native/address_guard.h"

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
  bool resuming = false;  // a Range request: a 206 body is appended to download_file
  // The size cap (HttpCall::max_bytes; -1 none) and what the body holds so far (a 206 counts
  // from resume_from).
  int64_t max_bytes = -1;
  int64_t resume_from = 0;
  int64_t body_bytes = 0;
  int header_status = 0;  // of the response whose headers are arriving
  std::string too_large;  // why the cap ended the transfer
  // The address guard (HttpCall::public_only; OnOpenSocket is installed only then).
  bool allow_private = false;
  std::string refused;  // the first address it refused, for the message
};

// The status line of each response ("HTTP/1.1 206 Partial Content").
int StatusOfLine(const std::string& line) {
  size_t sp = line.find(' ');
  if (sp == std::string::npos || sp + 4 > line.size()) return 0;
  int code = 0;
  for (size_t i = sp + 1; i < sp + 4; ++i) {
    if (line[i] < '0' || line[i] > '9') return 0;
    code = code * 10 + (line[i] - '0');
  }
  return code;
}

bool Is2xx(long code) {
  return code >= 200 && code < 300;
}

// Every connection of a guarded call (public_only): the resolved address is checked before a socket
// exists.
curl_socket_t OnOpenSocket(void* user, curlsocktype, struct curl_sockaddr* address) {
  Ctx* ctx = static_cast<Ctx*>(user);
  AddressClass c = ClassifyAddress(&address->addr);
  if (!AddressAllowed(c, ctx->allow_private)) {
    if (ctx->refused.empty()) {
      ctx->refused = AddressText(&address->addr) + " (" + AddressClassName(c) + ")";
    }
    return CURL_SOCKET_BAD;
  }
  return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  Ctx* ctx = static_cast<Ctx*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (redirect, 100)
    ctx->resp->headers.clear();
    ctx->header_status = StatusOfLine(line);
  }
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
    if (name == "content-length" && ctx->max_bytes >= 0 && Is2xx(ctx->header_status)) {
      char* end = nullptr;
      long long announced = std::strtoll(value.c_str(), &end, 10);
      const int64_t start = ctx->header_status == 206 ? ctx->resume_from : 0;
      if (end == value.c_str() || *end != '\0' || announced < 0 ||
          announced > ctx->max_bytes - start) {
        ctx->too_large = "Content-Length " + value + " exceeds the declared size of " +
                         std::to_string(ctx->max_bytes) + " bytes" +
                         (start > 0 ? " (from byte " + std::to_string(start) + ")" : "");
        return 0;  // aborts the transfer before the body
      }
    }
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  Ctx* ctx = static_cast<Ctx*>(user);
  size_t len = size * n;
  long code = 0;
  curl_easy_getinfo(ctx->curl, CURLINFO_RESPONSE_CODE, &code);
  if (ctx->max_bytes >= 0 && Is2xx(code)) {
    if (ctx->body_bytes == 0 && code == 206) ctx->body_bytes = ctx->resume_from;
    if (int64_t(len) > ctx->max_bytes - ctx->body_bytes) {
      ctx->too_large =
          "the server sent more than the declared " + std::to_string(ctx->max_bytes) + " bytes";
      return 0;  // nothing of this chunk is written: the transfer ends here
    }
    ctx->body_bytes += int64_t(len);
  }
  if (ctx->sink != nullptr && *ctx->sink && code >= 200 && code < 300) {
    if ((*ctx->sink)(std::string_view(data, len))) return len;
    ctx->sink_stopped = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  if (ctx->download_file != nullptr && !ctx->download_file->empty() && code >= 200 && code < 300) {
    if (ctx->out == nullptr) {
      ctx->out =
          std::fopen(ctx->download_file->c_str(), ctx->resuming && code == 206 ? "ab" : "wb");
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
  // Refuse absurd error bodies (a capped download's error page is small).
  if (ctx->resp->body.size() + len > (ctx->max_bytes >= 0 ? (64u << 10) : (64u << 20))) return 0;
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
  ctx.resuming = call.resume_from > 0 && !call.download_file.empty();
  ctx.max_bytes = call.max_bytes;
  ctx.resume_from = ctx.resuming ? call.resume_from : 0;
  ctx.allow_private = options_.allow_private_fetch;
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
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);  // a 3xx is the answer, never followed
  if (call.public_only) {
    curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, OnOpenSocket);
    curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, &ctx);
    // The guard must see the real peer: no proxy in between, no connection opened earlier
    // (perhaps to this coordinator) reused, and this one not kept for anybody else.
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
  }
  struct curl_slist* headers = nullptr;
  for (const auto& h : call.headers) {
    headers = curl_slist_append(headers, (h.first + ": " + h.second).c_str());
  }
  if (ctx.resuming) {
    // Set by hand, not CURLOPT_RESUME_FROM: a server that ignores it answers 200 with the whole
    // object, which simply replaces the file.
    headers = curl_slist_append(headers,
                                ("Range: bytes=" + std::to_string(call.resume_from) + "-").c_str());
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
  if (!ctx.refused.empty()) {
    return Status::Invalid(call.method + " " + RedactQuery(call.url) + ": refused to connect to " +
                           ctx.refused + ": remote files are fetched from public addresses only" +
                           " (--allow-private-fetch admits loopback and private ones)");
  }
  if (!ctx.too_large.empty()) {
    return Status::Corruption(call.method + " " + RedactQuery(call.url) + ": " + ctx.too_large +
                              "; the transfer was stopped");
  }
  if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && ctx.sink_stopped)) {
    return Status::Unavailable(call.method + " " + RedactQuery(call.url) + ": " +
                               TransferError(rc, errbuf, options_.ca_file));
  }
  if (code >= 200 && code < 300 && !call.download_file.empty() && ctx.out == nullptr) {
    // Empty 2xx body: still create the (empty) file.
    FILE* f = std::fopen(call.download_file.c_str(), ctx.resuming && code == 206 ? "ab" : "wb");
    if (f == nullptr) return Status::Io("open " + call.download_file);
    std::fclose(f);
  }
  resp.status = int(code);
  return resp;
}

}  // namespace gleaner::net
