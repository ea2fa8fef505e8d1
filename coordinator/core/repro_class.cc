#include "coordinator/core/repro_class.h"

namespace gleaner::core {

Status ReadReproClass(const Json& body, const char* field, std::string* canonical) {
  if (!body.is_object() || !body.contains(field) || body[field].is_null()) {
    return Status::NotFound(std::string(field) + " is absent");
  }
  static const char* const kKeys[] = {
      "gpu_model", "compute_capability", "sm_count",   "driver",  "cuda",  "cudnn",
      "libtorch",  "trainer_build",      "cpu_family", "threads", "device"};
  const Json& c = body[field];
  if (!c.is_object() || c.empty() || c.size() > std::size(kKeys)) {
    return Status::Invalid(std::string(field) + " must be an object of 1 to " +
                           std::to_string(std::size(kKeys)) + " known keys");
  }
  Json out = Json::object();
  for (auto it = c.begin(); it != c.end(); ++it) {
    bool known = false;
    for (const char* k : kKeys) known = known || it.key() == k;
    if (!known) return Status::Invalid(std::string(field) + "." + it.key() + " is not a known key");
    const Json& v = it.value();
    if (v.is_number_integer() || (v.is_string() && v.get<std::string>().size() <= 128)) {
      out[it.key()] = v;
    } else {
      return Status::Invalid(std::string(field) + "." + it.key() +
                             " must be a string of at most 128 bytes or an integer");
    }
  }
  *canonical = DumpJson(out);  // keys sorted (std::map)
  return Status::Ok();
}

}  // namespace gleaner::core
