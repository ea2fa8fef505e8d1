#include "coordinator/core/blob_urls.h"

#include "coordinator/core/s3_presign.h"
#include "shared/sha256.h"

namespace gleaner::core {
namespace {

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::string Signature(const CoreConfig& config, const std::string& method, const std::string& key,
                      const std::string& exp, const std::string& max, const std::string& sha) {
  std::string msg =
      "gleaner-blob-v1\n" + method + "\n" + key + "\n" + exp + "\n" + max + "\n" + sha;
  return HexEncode(HmacSha256(config.blob_signing_key, msg));
}

std::string Base(const CoreConfig& config) {
  std::string base = config.public_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base;
}

int64_t ExpiresS(const CoreConfig& config, int64_t now_ms) {
  return now_ms / 1000 + int64_t(config.blob_url_ttl_s);
}

bool ParseDigits(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

MintedUrl PutUrl(const CoreConfig& config, const std::string& key, int64_t max_size,
                 const std::string& sha256, int64_t now_ms) {
  int64_t exp = ExpiresS(config, now_ms);
  if (config.s3.enabled()) {
    return {PresignS3(config.s3, "PUT", key, now_ms, exp - now_ms / 1000), exp * 1000};
  }
  std::string e = std::to_string(exp), m = std::to_string(max_size);
  std::string url = Base(config) + "/blobs/" + key + "?m=PUT&exp=" + e + "&max=" + m;
  if (!sha256.empty()) url += "&sha=" + sha256;
  url += "&sig=" + Signature(config, "PUT", key, e, m, sha256);
  return {url, exp * 1000};
}

MintedUrl GetUrl(const CoreConfig& config, const std::string& key, int64_t now_ms) {
  int64_t exp = ExpiresS(config, now_ms);
  if (config.s3.enabled()) {
    return {PresignS3(config.s3, "GET", key, now_ms, exp - now_ms / 1000), exp * 1000};
  }
  std::string e = std::to_string(exp);
  return {Base(config) + "/blobs/" + key + "?m=GET&exp=" + e +
              "&sig=" + Signature(config, "GET", key, e, "", ""),
          exp * 1000};
}

Result<BlobGrant> VerifyBlobUrl(const CoreConfig& config, const std::string& method,
                                const std::string& path, const std::string& query, int64_t now_ms) {
  auto deny = [](const std::string& m) { return Status(Code::kPermissionDenied, m); };
  const std::string prefix = "/blobs/";
  if (path.compare(0, prefix.size(), prefix) != 0) return deny("not a blob path");
  std::string key = path.substr(prefix.size());
  if (!IsValidBlobKey(key)) return deny("invalid blob key");
  QueryParams q(query);
  std::string m, exp, sig, max, sha;
  if (!q.Get("m", &m) || !q.Get("exp", &exp) || !q.Get("sig", &sig)) {
    return deny("blob URL is not signed");
  }
  bool has_max = q.Get("max", &max);
  q.Get("sha", &sha);
  if (m == "PUT") {
    if (method != "PUT") return deny("this URL allows PUT only");
    if (!has_max) return deny("blob URL lacks max");
  } else if (m == "GET") {
    if (method != "GET" && method != "HEAD") return deny("this URL allows GET only");
    if (has_max || !sha.empty()) return deny("blob URL is malformed");
  } else {
    return deny("blob URL has an unknown method");
  }
  int64_t exp_s = 0, max_size = 0;
  if (!ParseDigits(exp, &exp_s)) return deny("blob URL has a malformed expiry");
  if (has_max && !ParseDigits(max, &max_size)) return deny("blob URL has a malformed max");
  if (!sha.empty() && !IsSha256Hex(sha)) return deny("blob URL has a malformed sha");
  if (!ConstantTimeEquals(sig, Signature(config, m, key, exp, max, sha))) {
    return deny("blob URL signature does not match");
  }
  if (exp_s * 1000 < now_ms) return deny("blob URL expired");
  BlobGrant g;
  g.key = key;
  g.method = m;
  g.max_size = max_size;
  g.sha256 = sha;
  return g;
}

bool IsValidBlobKey(const std::string& key) {
  if (key.empty() || key.size() > 512) return false;
  size_t start = 0;
  while (start <= key.size()) {
    size_t slash = key.find('/', start);
    if (slash == std::string::npos) slash = key.size();
    std::string seg = key.substr(start, slash - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    for (char c : seg) {
      if (!NameChar(c)) return false;
    }
    start = slash + 1;
  }
  return true;
}

std::string SanitizeName(const std::string& name) {
  std::string out;
  for (char c : name) out.push_back(NameChar(c) ? c : '_');
  size_t first = out.find_first_not_of('.');
  out = first == std::string::npos ? "" : out.substr(first);
  if (out.size() > 128) out.resize(128);
  if (out.empty()) out = "file";
  return out;
}

bool IsSafeName(const std::string& name) {
  return !name.empty() && SanitizeName(name) == name;
}

}  // namespace gleaner::core
