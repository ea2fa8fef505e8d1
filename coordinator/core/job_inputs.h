// A submission's inputs (POST /v1/jobs "model" and "dataset"): reading them from the body, the
// SQL condition that every input is an upload the caller may use, and the explanation when it
// is not. A model is one file ({uri, sha256, config}) or a diffusers folder ({files, config?};
// shared/model_manifest.h) whose uploaded files are inputs one by one; a file given by url must
// be on a host of core.model_hosts (else 400 naming the field and the allowed hosts); its bytes
// are not checked here (the node verifies sha256 and size of every file it fetches).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/core/routes.h"
#include "shared/model_family.h"

namespace gleaner::core {

struct InputRef {
  std::string field;  // how messages name it: "model", "dataset", "model.files[3] (vae/...)"
  std::string uri, key, sha256;
  int64_t size = -1;  // checked against the upload when >= 0 (model files declare theirs)
};

// Reads a sha256 field: 64 hex characters, returned lowercase.
bool ReadSha256(FieldReader& r, const char* key, std::string* out, const std::string& prefix);

// The family of a job's model from a submission body or stored spec ({"model": {"files": ...}}):
// a diffusers folder with transformer/ files is FLUX; anything else (a UNet file) an SD UNet.
// Reads only well-typed paths (the files are checked by ReadInput).
ModelFamily ModelFamilyOfSpec(const Json& job);

// Reads body[field]; appends its uploads to refs and sets *spec_out to what the stored spec
// keeps (uris with their blob keys, sha256, sizes, config). with_config: the single-file model
// form requires model.config. core: its model_hosts.
Status ReadInput(const Json& body, const std::string& field, bool with_config,
                 const CoreConfig& core, std::vector<InputRef>* refs, Json* spec_out);

// Appends " AND <every ref is an upload of the caller with its sha256 and size, and (built-in
// store) is stored>" to cond. The refs travel as one JSON parameter: a model may have dozens
// of files, and D1 binds at most 100 parameters per statement.
void InputsExistCondition(const std::vector<InputRef>& refs, const Ctx& ctx, std::string* cond,
                          std::vector<SqlValue>* params);
// Adds the read that ExplainInputs needs (the refs' upload rows) to b.
void InputsUploadsQuery(const std::vector<InputRef>& refs, const Ctx& ctx, Batch* b);
// Why the condition failed, from that read's rows: 400 (no such upload of the caller, sha256
// or size differs) or 409 (announced but not stored yet); ok when every ref is fine.
Status ExplainInputs(const std::vector<InputRef>& refs, const Rows& uploads, const Ctx& ctx);

}  // namespace gleaner::core
