#include "shared/model_manifest.h"

#include <algorithm>
#include <set>

#include "shared/sha256.h"

namespace gleaner {

bool IsKnownModelFormat(std::string_view format) {
  return format == kModelFormatDiffusers || format == kModelFormatUnetSafetensors;
}

namespace {

bool EndsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool IsSegmentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool IsPickle(std::string_view path) {
  for (const char* ext : {".bin", ".ckpt", ".pt", ".pth", ".pkl"}) {
    if (EndsWith(path, ext)) return true;
  }
  return false;
}

bool IsHttpUrl(const std::string& url) {
  for (const char* scheme : {"https://", "http://"}) {
    size_t n = std::string_view(scheme).size();
    if (url.size() > n && url.compare(0, n, scheme) == 0) {
      for (char c : url) {
        if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
      }
      return true;
    }
  }
  return false;
}

bool IsHostNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

}  // namespace

std::string NormalizeHostName(std::string_view host) {
  std::string h;
  for (char c : host) h.push_back(c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c);
  const bool bracketed = h.size() >= 2 && h.front() == '[' && h.back() == ']';
  if (bracketed || h.find(':') != std::string::npos) {
    std::string inner = bracketed ? h.substr(1, h.size() - 2) : h;
    if (inner.empty() || inner.size() > 45) return "";
    for (char c : inner) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == ':' || c == '.')) return "";
    }
    return "[" + inner + "]";
  }
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h.empty() || h.size() > 253 || h.front() == '.' || h.front() == '-') return "";
  for (char c : h) {
    if (!IsHostNameChar(c)) return "";
  }
  return h;
}

std::string UrlHost(std::string_view url) {
  size_t start = url.find("://");
  if (start == std::string_view::npos) return "";
  start += 3;
  size_t end = url.find_first_of("/?#", start);
  std::string_view authority =
      url.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  if (authority.find_first_of("@\\%") != std::string_view::npos) return "";
  std::string_view host = authority;
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    if (close == std::string_view::npos) return "";
    std::string_view rest = host.substr(close + 1);
    host = host.substr(0, close + 1);
    if (!rest.empty() && rest.front() != ':') return "";
    if (!rest.empty())
      authority = rest;  // ":port" checked below
    else
      authority = std::string_view();
  } else {
    size_t colon = host.find(':');
    authority = colon == std::string_view::npos ? std::string_view() : host.substr(colon);
    host = host.substr(0, colon);
    if (host.empty() || host.front() == '[') return "";
  }
  if (!authority.empty()) {  // ":port": digits only
    if (authority.size() < 2 || authority.size() > 6) return "";
    for (char c : authority.substr(1)) {
      if (c < '0' || c > '9') return "";
    }
  }
  return NormalizeHostName(host);
}

bool IsValidModelPath(std::string_view path) {
  if (path.empty() || path.size() > kMaxModelPathBytes) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    for (char c : seg) {
      if (!IsSegmentChar(c)) return false;
    }
    start = end + 1;
  }
  return true;
}

Result<std::vector<ModelFile>> ParseModelFiles(const Json& files, const std::string& prefix) {
  if (!files.is_array() || files.empty() || files.size() > kMaxModelFiles) {
    return Status::Invalid(prefix + " must be an array of 1 to " + std::to_string(kMaxModelFiles) +
                           " files");
  }
  static const char* const kKeys[] = {"path", "uri", "url", "sha256", "size", nullptr};
  std::vector<ModelFile> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string name = prefix + "[" + std::to_string(i) + "]";
    if (!files[i].is_object()) return Status::Invalid(name + " must be an object");
    FieldReader r(files[i], name + ".");
    ModelFile f;
    r.OnlyKeys(kKeys);
    r.String("path", &f.path, true, kMaxModelPathBytes);
    r.String("uri", &f.uri, false, 600);
    r.String("url", &f.url, false, 2048);
    r.String("sha256", &f.sha256, true, 64);
    r.Int("size", &f.size, true, 0, kMaxModelFileBytes);
    if (!r.ok()) return r.status();
    for (char& c : f.sha256) c = char(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    if (!IsSha256Hex(f.sha256)) return Status::Invalid(name + ".sha256 must be 64 hex characters");
    if (!IsValidModelPath(f.path)) {
      return Status::Invalid(name + ".path '" + f.path +
                             "' must be a relative path of [A-Za-z0-9._-] segments");
    }
    if (IsPickle(f.path)) {
      return Status::Invalid(name + ".path '" + f.path +
                             "': pickle weights are not accepted; convert them to safetensors");
    }
    if (!seen.insert(f.path).second) {
      return Status::Invalid(name + ".path '" + f.path + "' appears twice");
    }
    if (f.uri.empty() == f.url.empty()) {
      return Status::Invalid(name + " needs exactly one of uri (an upload) or url");
    }
    if (!f.uri.empty() && f.uri.rfind("blob://uploads/", 0) != 0) {
      return Status::Invalid(name + ".uri must be a blob:// URI from POST /v1/uploads");
    }
    if (!f.url.empty() && (!IsHttpUrl(f.url) || UrlHost(f.url).empty())) {
      return Status::Invalid(name +
                             ".url must be an http:// or https:// URL with a plain host[:port]");
    }
    out.push_back(std::move(f));
  }
  return out;
}

Status CheckDiffusersLayout(const std::vector<ModelFile>& files, bool sdxl) {
  std::set<std::string> paths;
  for (const ModelFile& f : files) paths.insert(f.path);
  auto has = [&](const std::string& p) { return paths.count(p) != 0; };
  auto has_weights = [&](const std::string& dir) {
    for (const std::string& p : paths) {
      if (p.compare(0, dir.size() + 1, dir + "/") == 0 && EndsWith(p, ".safetensors")) return true;
    }
    return false;
  };
  auto under = [&](const std::string& dir) {
    for (const std::string& p : paths) {
      if (p.compare(0, dir.size() + 1, dir + "/") == 0) return true;
    }
    return false;
  };
  const bool flux = under("transformer");
  if (flux && under("unet")) {
    return Status::Invalid("a diffusers folder holds unet/ or transformer/, not both");
  }
  sdxl = !flux && (sdxl || under("text_encoder_2") || under("tokenizer_2"));
  std::vector<std::string> missing;
  if (!has("model_index.json")) missing.push_back("model_index.json");
  std::vector<std::string> models = {flux ? "transformer" : "unet", "vae", "text_encoder"};
  std::vector<std::string> tokenizers = {"tokenizer"};
  if (flux) {
    models.push_back("text_encoder_2");  // T5: its tokenizer is one tokenizer.json
    if (!has("tokenizer_2/tokenizer.json")) missing.push_back("tokenizer_2/tokenizer.json");
  }
  if (sdxl) {
    models.push_back("text_encoder_2");
    tokenizers.push_back("tokenizer_2");
  }
  for (const std::string& m : models) {
    // A FLUX transformer may be one single-file checkpoint in the original layout (its config is
    // read from its shapes: the trainer's models/loader/diffusers_model.h).
    if (!has(m + "/config.json") && !(flux && m == "transformer")) {
      missing.push_back(m + "/config.json");
    }
    if (!has_weights(m)) missing.push_back(m + "/*.safetensors");
  }
  for (const std::string& t : tokenizers) {
    for (const char* f : {"/vocab.json", "/merges.txt"}) {
      if (!has(t + f)) missing.push_back(t + f);
    }
  }
  if (missing.empty()) return Status::Ok();
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
  return Status::Invalid(std::string("not a diffusers") +
                         (flux   ? " FLUX"
                          : sdxl ? " SDXL"
                                 : "") +
                         " folder: missing " + list);
}

ModelFamily ModelFamilyOfFiles(const std::vector<ModelFile>& files) {
  for (const ModelFile& f : files) {
    if (f.path.rfind("transformer/", 0) == 0) return ModelFamily::kFlux;
  }
  return ModelFamily::kSdUnet;
}

Result<ModelManifest> ParseModelManifest(std::string_view text) {
  if (text.size() > kMaxModelManifestBytes) {
    return Status::Invalid("model manifest is larger than " +
                           std::to_string(kMaxModelManifestBytes) + " bytes");
  }
  Result<Json> j = ParseJson(text, 8);
  if (!j.ok()) return Status::Invalid("model manifest: " + j.status().message());
  if (!j->is_object()) return Status::Invalid("model manifest must be a JSON object");
  static const char* const kKeys[] = {"format", "version", "name", "files", nullptr};
  FieldReader r(*j);
  std::string format;
  int64_t version = 0;
  ModelManifest m;
  r.OnlyKeys(kKeys);
  r.String("format", &format, true, 64);
  r.Int("version", &version, true, 1, 1000);
  r.String("name", &m.name, false, 128);
  if (!r.ok()) return Status::Invalid("model manifest: " + r.status().message());
  if (format != kModelManifestFormat || version != kModelManifestVersion) {
    return Status::Invalid("model manifest: format must be \"gleaner-model\" version 1");
  }
  auto files = j->find("files");
  if (files == j->end()) return Status::Invalid("model manifest: files is required");
  Result<std::vector<ModelFile>> parsed = ParseModelFiles(*files, "files");
  if (!parsed.ok()) return Status::Invalid("model manifest: " + parsed.status().message());
  m.files = std::move(parsed).value();
  Status layout = CheckDiffusersLayout(m.files, false);
  if (!layout.ok()) return Status::Invalid("model manifest: " + layout.message());
  return m;
}

Json ModelFilesToJson(const std::vector<ModelFile>& files) {
  Json out = Json::array();
  for (const ModelFile& f : files) {
    Json o = {{"path", f.path}};
    if (!f.uri.empty()) o["uri"] = f.uri;
    if (!f.url.empty()) o["url"] = f.url;
    o["sha256"] = f.sha256;
    o["size"] = f.size;
    out.push_back(std::move(o));
  }
  return out;
}

std::string ModelManifestToJson(const ModelManifest& m) {
  Json j = {{"format", kModelManifestFormat}, {"version", kModelManifestVersion}};
  if (!m.name.empty()) j["name"] = m.name;
  j["files"] = ModelFilesToJson(m.files);
  return DumpJson(j);
}

}  // namespace gleaner
