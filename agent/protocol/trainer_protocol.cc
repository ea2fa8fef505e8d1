#include "agent/protocol/trainer_protocol.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "shared/sha256.h"

namespace gleaner {
namespace {

std::string PercentEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (c > 0x20 && c < 0x7f && c != '%' && c != '=') {
      out.push_back(char(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      std::string hex = s.substr(i + 1, 2), bytes;
      if (HexDecode(hex, &bytes)) {
        out += bytes;
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    if (v > (INT64_MAX - (c - '0')) / 10) return false;  // would overflow int64
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty() || s.size() > 64) return false;
  if (s == "nan" || s == "-nan") {
    *out = NAN;
    return true;
  }
  if (s == "inf") {
    *out = INFINITY;
    return true;
  }
  if (s == "-inf") {
    *out = -INFINITY;
    return true;
  }
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

std::string FormatProgressEvent(const ProgressEvent& e) {
  switch (e.type) {
    case ProgressEvent::Type::kProgress: {
      std::string s =
          "gleaner progress step=" + std::to_string(e.step) + " steps=" + std::to_string(e.steps);
      if (e.has_loss) s += " loss=" + FormatDouble(e.loss);
      s += " samples_per_s=" + FormatDouble(e.samples_per_s);
      return s;
    }
    case ProgressEvent::Type::kCheckpoint:
      return "gleaner checkpoint step=" + std::to_string(e.step) + " dir=" + PercentEncode(e.dir);
    case ProgressEvent::Type::kSamples:
      return "gleaner samples step=" + std::to_string(e.step) + " dir=" + PercentEncode(e.dir) +
             " seconds=" + FormatDouble(e.seconds);
    case ProgressEvent::Type::kDone:
      return "gleaner done step=" + std::to_string(e.step);
    case ProgressEvent::Type::kClassImages:
      return "gleaner class_images count=" + std::to_string(e.count) +
             " seconds=" + FormatDouble(e.seconds);
    case ProgressEvent::Type::kError:
      return "gleaner error reason=" + PercentEncode(e.reason.substr(0, kMaxEventText));
  }
  return "";
}

Result<ProgressEvent> ParseProgressEvent(const std::string& line) {
  if (line.rfind("gleaner ", 0) != 0) return Status::NotFound("not a progress line");
  if (line.size() > kMaxProgressLine) return Status::Invalid("progress line too long");
  std::vector<std::string> words;
  size_t pos = 8;
  while (pos < line.size()) {
    size_t sp = line.find(' ', pos);
    if (sp == std::string::npos) sp = line.size();
    if (sp > pos) words.push_back(line.substr(pos, sp - pos));
    pos = sp + 1;
  }
  if (words.empty()) return Status::Invalid("empty progress line");
  ProgressEvent e;
  const std::string& type = words[0];
  if (type == "progress") {
    e.type = ProgressEvent::Type::kProgress;
  } else if (type == "checkpoint") {
    e.type = ProgressEvent::Type::kCheckpoint;
  } else if (type == "samples") {
    e.type = ProgressEvent::Type::kSamples;
  } else if (type == "done") {
    e.type = ProgressEvent::Type::kDone;
  } else if (type == "error") {
    e.type = ProgressEvent::Type::kError;
  } else if (type == "class_images") {
    e.type = ProgressEvent::Type::kClassImages;
  } else {
    return Status::Invalid("unknown progress event '" + type.substr(0, 32) + "'");
  }
  bool has_step = false;
  for (size_t i = 1; i < words.size(); ++i) {
    size_t eq = words[i].find('=');
    if (eq == std::string::npos) return Status::Invalid("progress field without '='");
    std::string k = words[i].substr(0, eq), v = words[i].substr(eq + 1);
    bool ok = true;
    if (k == "step") {
      ok = ParseInt(v, &e.step);
      has_step = ok;
    } else if (k == "steps") {
      ok = ParseInt(v, &e.steps);
    } else if (k == "loss") {
      ok = ParseDouble(v, &e.loss);
      e.has_loss = ok;
    } else if (k == "seconds") {
      ok = ParseDouble(v, &e.seconds) && e.seconds >= 0 && e.seconds < 1e9;
    } else if (k == "count") {
      ok = ParseInt(v, &e.count) && e.count >= 0;
    } else if (k == "samples_per_s") {
      ok = ParseDouble(v, &e.samples_per_s);
    } else if (k == "dir") {
      e.dir = PercentDecode(v);
      if (e.dir.size() > kMaxEventText) return Status::Invalid("checkpoint dir too long");
    } else if (k == "reason") {
      e.reason = PercentDecode(v);
      if (e.reason.size() > kMaxEventText) e.reason.resize(kMaxEventText);
    }  // unknown keys are ignored: newer trainers may say more
    if (!ok) return Status::Invalid("bad value for progress field '" + k.substr(0, 32) + "'");
  }
  if (e.type != ProgressEvent::Type::kError && e.type != ProgressEvent::Type::kClassImages &&
      !has_step) {
    return Status::Invalid("progress event without step");
  }
  if ((e.type == ProgressEvent::Type::kCheckpoint || e.type == ProgressEvent::Type::kSamples) &&
      e.dir.empty()) {
    return Status::Invalid(type + " event without dir");
  }
  return e;
}

std::string ManifestToJson(const CheckpointManifest& m) {
  Json j = {{"format", kManifestFormat},
            {"version", kManifestVersion},
            {"kind", m.kind},
            {"job_id", m.job_id},
            {"step", m.step},
            {"files", FileListToJson(m.files)},
            {"meta", m.meta}};
  return DumpJson(j);
}

namespace {

// A manifest's list of {name, size, sha256}: plain, distinct file names, at most 1024.
Result<std::vector<ManifestFile>> ParseFileList(const Json& list, const std::string& what) {
  if (!list.is_array()) return Status::Corruption(what + " must be an array");
  if (list.size() > 1024) return Status::Corruption(what + " lists more than 1024 files");
  std::vector<ManifestFile> out;
  std::set<std::string> seen;
  for (const Json& f : list) {
    FieldReader fr(f, what + "[].");
    ManifestFile mf;
    fr.String("name", &mf.name, true, 255);
    fr.Int("size", &mf.size, true, 0, int64_t(1) << 46);
    fr.String("sha256", &mf.sha256, true, 64);
    if (!fr.ok()) return Status::Corruption(fr.status().message());
    if (mf.name.empty() || mf.name.find('/') != std::string::npos || mf.name == "." ||
        mf.name == ".." || mf.name == kManifestName || mf.name.find('\0') != std::string::npos) {
      return Status::Corruption(what + ": file name '" + mf.name + "' is not allowed");
    }
    if (!IsSha256Hex(mf.sha256))
      return Status::Corruption(what + ": sha256 of " + mf.name +
                                " is not 64 lowercase hex digits");
    if (!seen.insert(mf.name).second)
      return Status::Corruption(what + " lists " + mf.name + " twice");
    out.push_back(std::move(mf));
  }
  return out;
}

}  // namespace

Json FileListToJson(const std::vector<ManifestFile>& files) {
  Json a = Json::array();
  for (const ManifestFile& f : files) {
    a.push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
  }
  return a;
}

Result<std::vector<ManifestFile>> ParseOutputList(const Json& list) {
  Result<std::vector<ManifestFile>> files = ParseFileList(list, "outputs");
  if (files.ok() && files->empty()) return Status::Corruption("outputs is empty");
  return files;
}

Result<std::vector<ManifestFile>> ManifestOutputs(const CheckpointManifest& m) {
  auto it = m.meta.find(kManifestOutputsKey);
  if (it == m.meta.end()) return Status::NotFound("the checkpoint records no outputs");
  return ParseOutputList(*it);
}

bool SameFiles(std::vector<ManifestFile> a, std::vector<ManifestFile> b) {
  auto by_name = [](const ManifestFile& x, const ManifestFile& y) { return x.name < y.name; };
  std::sort(a.begin(), a.end(), by_name);
  std::sort(b.begin(), b.end(), by_name);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].size != b[i].size || a[i].sha256 != b[i].sha256) {
      return false;
    }
  }
  return true;
}

Result<CheckpointManifest> ParseManifest(const std::string& text) {
  if (text.size() > (1 << 20)) return Status::Corruption("manifest larger than 1 MiB");
  Result<Json> parsed = ParseJson(text);
  if (!parsed.ok()) return Status::Corruption("manifest: " + parsed.status().message());
  const Json& j = *parsed;
  FieldReader r(j, "manifest.");
  std::string format;
  int64_t version = 0;
  CheckpointManifest m;
  r.String("format", &format, true);
  r.Int("version", &version, true, 1, 1000);
  r.String("kind", &m.kind, true, 64);
  r.String("job_id", &m.job_id, false, 128);
  r.Int("step", &m.step, true, 0, int64_t(1) << 40);
  if (!r.ok()) return Status::Corruption(r.status().message());
  if (format != kManifestFormat)
    return Status::Corruption("manifest.format is not " + std::string(kManifestFormat));
  if (version != kManifestVersion) {
    return Status::Corruption("manifest.version " + std::to_string(version) + " is not supported");
  }
  auto files_it = j.find("files");
  if (files_it == j.end()) return Status::Corruption("manifest.files must be an array");
  Result<std::vector<ManifestFile>> files = ParseFileList(*files_it, "manifest.files");
  if (!files.ok()) return files.status();
  m.files = std::move(*files);
  auto meta_it = j.find("meta");
  if (meta_it != j.end() && !meta_it->is_null()) {
    if (!meta_it->is_object()) return Status::Corruption("manifest.meta must be an object");
    m.meta = *meta_it;
  }
  return m;
}

}  // namespace gleaner
