// HttpClient over libcurl (the one adapter file for libcurl: its error codes become Status here).
// Thread-safe: each thread reuses its own easy handle (keep-alive per thread).
//
// HTTPS: every https:// URL (coordinator, blob, S3) is verified the same way: TLS 1.2 or newer,
// the peer's certificate chain against the trusted CAs and its name against the URL's host.
// There is deliberately no way to turn verification off. A refused certificate is a transport
// failure (kUnavailable, retried with backoff by the callers: the server may be fixed or its
// certificate rotated) whose message says what was wrong.
//
// Guarded calls (HttpCall::public_only): the address of every connection libcurl opens is
// checked in CURLOPT_OPENSOCKETFUNCTION, after name resolution and before the socket exists,
// so a name that resolves to a private address (or re-resolves to one: DNS rebinding) is
// refused without a byte sent. Such calls use no proxy and no pooled connection. Redirects are
// not followed by any call, so a 3xx cannot lead a fetch elsewhere.
#pragma once

#include <string>

#include "shared/native/http_client.h"

namespace gleaner::net {

struct CurlOptions {
  // "" = the system CA store; otherwise only the CA certificates in this PEM file are trusted
  // (a private CA; list several in one file to also trust e.g. a public S3 endpoint's CA).
  std::string ca_file;
  // The owner's --allow-private-fetch: public_only calls may also reach loopback and private
  // addresses (a model mirror on the LAN). Link-local, multicast and reserved stay refused.
  bool allow_private_fetch = false;
};

class CurlHttpClient : public HttpClient {
 public:
  explicit CurlHttpClient(CurlOptions options = {});  // calls curl_global_init once per process
  Result<HttpResponse> Send(const HttpCall& call) override;

 private:
  CurlOptions options_;
};

}  // namespace gleaner::net
