#include "coordinator/core/outputs.h"

#include <algorithm>

#include "coordinator/core/blob_urls.h"
#include "shared/sha256.h"

namespace gleaner::core {

Status ReadOutputFiles(const Json& body, const char* field, int64_t max_size,
                       std::vector<OutputFile>* out) {
  out->clear();
  auto it = body.find(field);
  if (it == body.end()) return Status::NotFound(std::string(field) + " is absent");
  if (!it->is_array() || it->empty() || it->size() > 64) {
    return Status::Invalid(std::string(field) +
                           " must be an array of 1 to 64 {name, sha256, size} objects");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    std::string prefix = std::string(field) + "[" + std::to_string(i) + "].";
    FieldReader r((*it)[i], prefix);
    static const char* const kKeys[] = {"name", "sha256", "size", nullptr};
    r.OnlyKeys(kKeys);
    OutputFile o;
    r.String("name", &o.name, true, 128);
    r.String("sha256", &o.sha256, true, 64);
    r.Int("size", &o.size, true, 0, max_size);
    if (!r.ok()) return r.status();
    if (!IsSafeName(o.name)) {
      return Status::Invalid(prefix +
                             "name must be characters of [A-Za-z0-9._-], not starting with '.'");
    }
    if (!IsSha256Hex(o.sha256))
      return Status::Invalid(prefix + "sha256 must be 64 lowercase hex characters");
    for (const OutputFile& prev : *out) {
      if (prev.name == o.name) {
        return Status::Invalid(std::string(field) + " has a duplicate name " + o.name);
      }
    }
    out->push_back(o);
  }
  return Status::Ok();
}

std::string CanonicalOutputs(std::vector<OutputFile> files) {
  std::sort(files.begin(), files.end(),
            [](const OutputFile& a, const OutputFile& b) { return a.name < b.name; });
  Json a = Json::array();
  for (const OutputFile& f : files) {
    a.push_back({{"name", f.name}, {"sha256", f.sha256}, {"size", f.size}});
  }
  return DumpJson(a);
}

}  // namespace gleaner::core
