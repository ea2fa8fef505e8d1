#include "coordinator/core/s3_presign.h"

#include <algorithm>

#include "coordinator/core/http.h"
#include "shared/sha256.h"

namespace gleaner::core {
namespace {

std::string Raw(const Digest& d) {
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

// "2013-05-24T00:00:00.000Z" -> "20130524T000000Z".
std::string AmzDate(int64_t now_ms) {
  std::string t = FormatTime(now_ms - now_ms % 1000);
  std::string out;
  for (size_t i = 0; i < 19; ++i) {
    if (t[i] != '-' && t[i] != ':') out.push_back(t[i]);
  }
  return out + "Z";
}

std::string EncodePath(const std::string& key) {
  std::string out;
  size_t start = 0;
  while (start <= key.size()) {
    size_t slash = key.find('/', start);
    if (slash == std::string::npos) slash = key.size();
    out += "/" + UrlEncode(key.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

}  // namespace

std::string PresignS3(const S3Config& s3, const std::string& method, const std::string& key,
                      int64_t now_ms, int64_t expires_s) {
  expires_s = std::max<int64_t>(1, std::min<int64_t>(expires_s, 604800));
  std::string scheme = "https", host = s3.endpoint;
  size_t sep = host.find("://");
  if (sep != std::string::npos) {
    scheme = host.substr(0, sep);
    host = host.substr(sep + 3);
  }
  size_t slash = host.find('/');
  if (slash != std::string::npos) host.resize(slash);
  // Clients omit default ports from the Host header, so the signature must too.
  auto strip = [&host](const std::string& port) {
    if (host.size() > port.size() &&
        host.compare(host.size() - port.size(), port.size(), port) == 0) {
      host.resize(host.size() - port.size());
    }
  };
  if (scheme == "https") strip(":443");
  if (scheme == "http") strip(":80");
  std::string path = EncodePath(key);
  if (s3.path_style) {
    path = "/" + UrlEncode(s3.bucket) + path;
  } else {
    host = s3.bucket + "." + host;
  }
  std::string amz_date = AmzDate(now_ms);
  std::string date = amz_date.substr(0, 8);
  std::string scope = date + "/" + s3.region + "/s3/aws4_request";
  std::string query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" +
                      UrlEncode(s3.access_key_id + "/" + scope) + "&X-Amz-Date=" + amz_date +
                      "&X-Amz-Expires=" + std::to_string(expires_s) + "&X-Amz-SignedHeaders=host";
  std::string canonical =
      method + "\n" + path + "\n" + query + "\nhost:" + host + "\n\nhost\nUNSIGNED-PAYLOAD";
  std::string to_sign =
      "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" + Sha256Hex(canonical);
  std::string k = Raw(HmacSha256("AWS4" + s3.secret_access_key, date));
  k = Raw(HmacSha256(k, s3.region));
  k = Raw(HmacSha256(k, "s3"));
  k = Raw(HmacSha256(k, "aws4_request"));
  std::string signature = HexEncode(HmacSha256(k, to_sign));
  return scheme + "://" + host + path + "?" + query + "&X-Amz-Signature=" + signature;
}

}  // namespace gleaner::core
