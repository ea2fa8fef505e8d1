// Base models as diffusers folders: the list of files a job's model is made of, and the rules a
// folder must meet before a node downloads gigabytes of it.
//
// Wire form (a job's "model.files", and the manifest file `gleaner models upload` writes):
//   manifest = {"format": "gleaner-model", "version": 1, "name": "sd15",     (file form only)
//               "files": [file, ...]}
//   file     = {"path": "unet/diffusion_pytorch_model.safetensors",
//               "uri": "blob://uploads/<id>/<name>"  |  "url": "https://host/path",
//               "sha256": "<64 hex>", "size": <bytes>}
// A path is relative, '/'-separated segments of [A-Za-z0-9._-] (not "." or ".."), at most
// kMaxModelPathBytes. Exactly one of uri (an upload of the submitter) or url (http or https,
// fetched as is by the node) per file; sha256 and size are required: the node verifies both.
//
// Layout rules (CheckDiffusersLayout): model_index.json; unet/config.json and unet weights;
// vae/config.json and weights; text_encoder/config.json and weights; tokenizer/vocab.json and
// tokenizer/merges.txt; an SDXL folder (any text_encoder_2/ or tokenizer_2/ file, or sdxl
// asked for) needs the same for text_encoder_2/ and tokenizer_2/. A FLUX.1 folder (any
// transformer/ file) has transformer/ weights (with config.json, or one single-file checkpoint
// in the original layout) instead of unet/, and
// text_encoder_2/ (T5) with tokenizer_2/tokenizer.json. Weights are *.safetensors (sharded or
// not); pickle formats (.bin .ckpt .pt .pth .pkl) are refused.
//
// Portable (no exceptions, no I/O). Strict: unknown keys, wrong types, bad hex, duplicate paths
// and oversized input are InvalidArgument with a message naming the field; never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shared/json.h"
#include "shared/model_family.h"
#include "shared/status.h"

namespace gleaner {

// The forms a job's base model comes in, by the name the claim's inputs.model.format and the
// trainer's SPEC.json model.format give them (the coordinator knows which a job has: a model
// with "files" is a diffusers folder, one with a uri is a single UNet weights file whose config
// is model.config).
constexpr const char* kModelFormatDiffusers = "diffusers";
constexpr const char* kModelFormatUnetSafetensors = "unet-safetensors";
// True for the two names above.
bool IsKnownModelFormat(std::string_view format);

constexpr const char* kModelManifestFormat = "gleaner-model";
constexpr int kModelManifestVersion = 1;
constexpr size_t kMaxModelFiles = 256;
constexpr size_t kMaxModelPathBytes = 200;
constexpr size_t kMaxModelManifestBytes = 256 * 1024;
constexpr int64_t kMaxModelFileBytes = int64_t(1) << 40;  // 1 TiB

struct ModelFile {
  std::string path;    // inside the folder: "unet/config.json"
  std::string uri;     // "blob://uploads/..." or empty
  std::string url;     // "https://..." or empty
  std::string sha256;  // lowercase hex
  int64_t size = 0;
};

struct ModelManifest {
  std::string name;  // file form only; may be empty
  std::vector<ModelFile> files;
};

// True if path is a safe relative path in a model folder (see above).
bool IsValidModelPath(std::string_view path);

// The host of an http(s) URL, lowercase, without port or trailing dot; an IPv6 literal keeps
// its brackets ("[::1]"). "" when the authority is not a plain host[:port]: userinfo ('@'),
// an empty host, a zone id, a backslash or any byte outside [A-Za-z0-9._-] (and ":" inside
// brackets), so that no parser can read another host out of it than this one.
std::string UrlHost(std::string_view url);
// A host name of an allow list (--model-hosts) in the form UrlHost returns; "" if it is not
// a valid name (an IPv6 literal may be given with or without brackets).
std::string NormalizeHostName(std::string_view host);

// Reads a "files" array (prefix names it in messages: "model.files").
Result<std::vector<ModelFile>> ParseModelFiles(const Json& files, const std::string& prefix);
// Parses the file form (format, version, optional name, files) and checks the layout.
Result<ModelManifest> ParseModelManifest(std::string_view text);
Json ModelFilesToJson(const std::vector<ModelFile>& files);
std::string ModelManifestToJson(const ModelManifest& m);

// The diffusers layout rules above. `sdxl` demands the second text encoder and tokenizer.
Status CheckDiffusersLayout(const std::vector<ModelFile>& files, bool sdxl);

// The family of a diffusers folder's files: kFlux when it has transformer/ files, else kSdUnet.
ModelFamily ModelFamilyOfFiles(const std::vector<ModelFile>& files);

}  // namespace gleaner
