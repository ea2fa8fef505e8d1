// HttpClient over libcurl (the one adapter file for libcurl: its error codes become Status here).
// Thread-safe: each thread reuses its own easy handle (keep-alive per thread).
//
// HTTPS: every https:// URL (coordinator, blob, S3) is verified the same way: TLS 1.2 or newer,
// the peer's certificate chain against the trusted CAs and its name against the URL's host.
// There is deliberately no way to turn verification off. A refused certificate is a transport
// failure (kUnavailable, retried with backoff by the callers: the server may be fixed or its
// certificate rotated) whose message says what was wrong.
#pragma once

#include <string>

#include "shared/native/http_client.h"

namespace gleaner::net {

struct CurlOptions {
  // "" = the system CA store; otherwise only the CA certificates in this PEM file are trusted
  // (a private CA; list several in one file to also trust e.g. a public S3 endpoint's CA).
  std::string ca_file;
};

class CurlHttpClient : public HttpClient {
 public:
  explicit CurlHttpClient(CurlOptions options = {});  // calls curl_global_init once per process
  Result<HttpResponse> Send(const HttpCall& call) override;

 private:
  CurlOptions options_;
};

}  // namespace gleaner::net
