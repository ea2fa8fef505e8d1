#include "coordinator/core/job_inputs.h"

#include "coordinator/core/blob_urls.h"
#include "shared/job_params.h"
#include "shared/model_manifest.h"
#include "shared/sha256.h"

namespace gleaner::core {

bool ReadSha256(FieldReader& r, const char* key, std::string* out, const std::string& prefix) {
  if (!r.String(key, out, true, 64)) return false;
  for (char& c : *out) c = char(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
  if (!IsSha256Hex(*out)) return r.Fail(prefix + key + " must be 64 hex characters");
  return true;
}

namespace {

// A file given by url must name a host the operator allows (--model-hosts).
Status CheckModelHost(const ModelFile& f, size_t i, const std::vector<std::string>& hosts) {
  const std::string host = UrlHost(f.url);
  for (const std::string& h : hosts) {
    if (h == host) return Status::Ok();
  }
  std::string field = "model.files[" + std::to_string(i) + "].url";
  if (hosts.empty()) {
    return Status::Invalid(field + ": this coordinator allows no model hosts (--model-hosts); " +
                           "upload the file (blob:// uri) instead");
  }
  std::string list;
  for (const std::string& h : hosts) list += (list.empty() ? "" : ", ") + h;
  return Status::Invalid(field + ": host '" + host +
                         "' is not allowed; allowed model hosts: " + list);
}

// model.files: a diffusers folder (shared/model_manifest.h). Each file that is an upload
// becomes an InputRef; the spec keeps the files with their blob keys, so a claim mints URLs
// without a lookup. Files given by url must be on an allowed host.
Status ReadModelFiles(const Json& model, const Json* config,
                      const std::vector<std::string>& model_hosts, std::vector<InputRef>* refs,
                      Json* spec_out) {
  Result<std::vector<ModelFile>> files = ParseModelFiles(model["files"], "model.files");
  if (!files.ok()) return files.status();
  for (size_t i = 0; i < files->size(); ++i) {
    if (!(*files)[i].url.empty()) {
      GLEANER_RETURN_IF_ERROR(CheckModelHost((*files)[i], i, model_hosts));
    }
  }
  bool sdxl = config != nullptr && config->is_object() &&
              config->value("addition_embed_type", Json()) == Json("text_time");
  Status layout = CheckDiffusersLayout(*files, sdxl);
  if (!layout.ok()) return Status::Invalid("model.files: " + layout.message());
  Json out = ModelFilesToJson(*files);
  for (size_t i = 0; i < files->size(); ++i) {
    const ModelFile& f = (*files)[i];
    if (f.uri.empty()) continue;
    InputRef ref;
    ref.field = "model.files[" + std::to_string(i) + "] (" + f.path + ")";
    ref.uri = f.uri;
    ref.key = f.uri.substr(7);
    ref.sha256 = f.sha256;
    ref.size = f.size;
    if (!IsValidBlobKey(ref.key)) {
      return Status::Invalid("model.files[" + std::to_string(i) +
                             "].uri must be a blob:// URI from POST /v1/uploads");
    }
    out[i]["key"] = ref.key;
    refs->push_back(std::move(ref));
  }
  *spec_out = {{"files", std::move(out)}};
  return Status::Ok();
}

}  // namespace

ModelFamily ModelFamilyOfSpec(const Json& job) {
  const Json* files = nullptr;
  if (job.contains("model") && job["model"].is_object() && job["model"].contains("files")) {
    files = &job["model"]["files"];
  }
  if (files == nullptr || !files->is_array()) return ModelFamily::kSdUnet;
  for (const Json& f : *files) {
    if (f.is_object() && f.contains("path") && f["path"].is_string() &&
        f["path"].get_ref<const std::string&>().rfind("transformer/", 0) == 0) {
      return ModelFamily::kFlux;
    }
  }
  return ModelFamily::kSdUnet;
}

// model: {uri, sha256, config} or {files, config?}; dataset: {uri, sha256}.
// uri = "blob://uploads/<id>/<name>".
Status ReadInput(const Json& body, const std::string& field, bool with_config,
                 const CoreConfig& core, std::vector<InputRef>* refs, Json* spec_out) {
  FieldReader top(body);
  const Json* obj = nullptr;
  top.Object(field.c_str(), &obj, true);
  if (!top.ok()) return top.status();
  static const char* const kModelKeys[] = {"uri", "sha256", "config", nullptr};
  static const char* const kModelFileKeys[] = {"files", "config", nullptr};
  static const char* const kDataKeys[] = {"uri", "sha256", nullptr};
  FieldReader r(*obj, field + ".");
  const bool files = field == "model" && obj->contains("files");
  r.OnlyKeys(files ? kModelFileKeys : with_config ? kModelKeys : kDataKeys);
  if (files) {
    const Json* config = nullptr;
    if (r.Has("config")) r.Object("config", &config, true);
    if (!r.ok()) return r.status();
    if (config != nullptr) GLEANER_RETURN_IF_ERROR(CheckUnetConfig(*config, field + ".config"));
    GLEANER_RETURN_IF_ERROR(ReadModelFiles(*obj, config, core.model_hosts, refs, spec_out));
    if (config != nullptr) (*spec_out)["config"] = *config;
    return Status::Ok();
  }
  InputRef one;
  InputRef* ref = &one;
  r.String("uri", &ref->uri, true, 600);
  ReadSha256(r, "sha256", &ref->sha256, field + ".");
  if (!r.ok()) return r.status();
  const std::string scheme = "blob://";
  if (ref->uri.compare(0, scheme.size(), scheme) != 0) {
    return Status::Invalid(field + ".uri must be a blob:// URI from POST /v1/uploads");
  }
  ref->key = ref->uri.substr(scheme.size());
  if (!IsValidBlobKey(ref->key) || ref->key.compare(0, 8, "uploads/") != 0) {
    return Status::Invalid(field + ".uri must be a blob:// URI from POST /v1/uploads");
  }
  ref->field = field;
  *spec_out = {{"uri", ref->uri}, {"key", ref->key}, {"sha256", ref->sha256}};
  if (with_config) {
    const Json* config = nullptr;
    r.Object("config", &config, true);
    if (!r.ok()) return r.status();
    GLEANER_RETURN_IF_ERROR(CheckUnetConfig(*config, field + ".config"));
    (*spec_out)["config"] = *config;
  }
  refs->push_back(std::move(one));
  return Status::Ok();
}

void InputsExistCondition(const std::vector<InputRef>& refs, const Ctx& ctx, std::string* cond,
                          std::vector<SqlValue>* params) {
  if (refs.empty()) return;
  Json list = Json::array();
  for (const InputRef& in : refs) {
    list.push_back({{"key", in.key}, {"sha256", in.sha256}, {"size", in.size}});
  }
  const std::string text = DumpJson(list);
  // size < 0 matches any upload (a single-file input's size is its upload's own).
  *cond +=
      " AND NOT EXISTS (SELECT 1 FROM json_each(?) f WHERE NOT EXISTS (SELECT 1 FROM uploads "
      "WHERE key = json_extract(f.value, '$.key') AND sha256 = json_extract(f.value, "
      "'$.sha256') AND (json_extract(f.value, '$.size') < 0 OR size = json_extract(f.value, "
      "'$.size')) AND " +
      OwnerSql() + "))";
  *params = Cat(Cat(*params, {text}), OwnerParams(ctx));
  if (!ctx.config->s3.enabled()) {
    *cond +=
        " AND NOT EXISTS (SELECT 1 FROM json_each(?) f WHERE NOT EXISTS (SELECT 1 FROM blobs "
        "WHERE key = json_extract(f.value, '$.key') AND sha256 = json_extract(f.value, "
        "'$.sha256')))";
    *params = Cat(*params, {text});
  }
}

void InputsUploadsQuery(const std::vector<InputRef>& refs, const Ctx& ctx, Batch* b) {
  Json keys = Json::array();
  for (const InputRef& in : refs) keys.push_back(in.key);
  b->Add(
      "SELECT key, sha256, size, (SELECT b.sha256 FROM blobs b WHERE b.key = uploads.key) AS "
      "stored FROM uploads WHERE key IN (SELECT value FROM json_each(?)) AND " +
          OwnerSql(),
      Cat({DumpJson(keys)}, OwnerParams(ctx)));
}

Status ExplainInputs(const std::vector<InputRef>& refs, const Rows& ups, const Ctx& ctx) {
  for (const InputRef& in : refs) {
    int row = -1;
    for (size_t i = 0; i < ups.rows.size(); ++i) {
      if (ups.Get(i, "key").AsText() == in.key) row = int(i);
    }
    if (row < 0) return Status::Invalid(in.field + ".uri names no upload of yours");
    if (ups.Get(size_t(row), "sha256").AsText() != in.sha256) {
      return Status::Invalid(in.field + ".sha256 does not match the upload's sha256");
    }
    if (in.size >= 0 && ups.Get(size_t(row), "size").AsInt() != in.size) {
      return Status::Invalid(in.field + ".size does not match the upload's size");
    }
    if (!ctx.config->s3.enabled() && ups.Get(size_t(row), "stored").is_null()) {
      return Status::Conflict(in.field + ".uri has not been uploaded yet (PUT it first)");
    }
  }
  return Status::Ok();
}

}  // namespace gleaner::core
