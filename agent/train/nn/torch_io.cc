#include "agent/train/nn/torch_io.h"

#include <exception>
#include <limits>
#include <set>

#include "agent/train/nn/torch_compat.h"
#include "shared/json.h"
#include "shared/native/files.h"
#include "shared/safetensors.h"

namespace gleaner::train {
namespace st = gleaner::safetensors;

Status CatchTorch(const char* what, const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    return Status::Internal(std::string(what) + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::Internal(std::string(what) + ": " + e.what());
  }
}

// The trainer's names for shared/native/files.h (model weights may exceed its default limit).
Result<std::string> ReadFile(const std::string& path) {
  return files::ReadAll(path, std::numeric_limits<int64_t>::max());
}

Status SyncDir(const std::string& dir) {
  return files::Fsync(dir);
}

Status MakeDirs(const std::string& dir) {
  return files::MakeDirs(dir);
}

Status WriteFileDurable(const std::string& path, const std::string& bytes) {
  return files::WriteDurable(path, bytes);
}

namespace {

bool ToTorch(st::DType d, torch::Dtype* out) {
  switch (d) {
    case st::DType::kF32:
      *out = torch::kFloat32;
      return true;
    case st::DType::kF16:
      *out = torch::kFloat16;
      return true;
    case st::DType::kBF16:
      *out = torch::kBFloat16;
      return true;
    case st::DType::kF64:
      *out = torch::kFloat64;
      return true;
    case st::DType::kI64:
      *out = torch::kInt64;
      return true;
    case st::DType::kI32:
      *out = torch::kInt32;
      return true;
    case st::DType::kI16:
      *out = torch::kInt16;
      return true;
    case st::DType::kI8:
      *out = torch::kInt8;
      return true;
    case st::DType::kU8:
      *out = torch::kUInt8;
      return true;
    case st::DType::kBool:
      *out = torch::kBool;
      return true;
#if GLEANER_TORCH_AT_LEAST(2, 1)
    case st::DType::kF8E4M3:
      *out = c10::kFloat8_e4m3fn;
      return true;
#endif
    default:
      return false;
  }
}

bool FromTorch(torch::Dtype d, st::DType* out) {
  switch (d) {
    case torch::kFloat32:
      *out = st::DType::kF32;
      return true;
    case torch::kFloat16:
      *out = st::DType::kF16;
      return true;
    case torch::kBFloat16:
      *out = st::DType::kBF16;
      return true;
    case torch::kFloat64:
      *out = st::DType::kF64;
      return true;
    case torch::kInt64:
      *out = st::DType::kI64;
      return true;
    case torch::kInt32:
      *out = st::DType::kI32;
      return true;
    case torch::kUInt8:
      *out = st::DType::kU8;
      return true;
    case torch::kBool:
      *out = st::DType::kBool;
      return true;
#if GLEANER_TORCH_AT_LEAST(2, 1)
    case c10::kFloat8_e4m3fn:
      *out = st::DType::kF8E4M3;
      return true;
#endif
    default:
      return false;
  }
}

}  // namespace

Result<TensorMap> LoadSafetensors(const std::string& path,
                                  std::map<std::string, std::string>* metadata) {
  Result<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return DecodeSafetensors(*bytes, path, metadata);
}

Result<TensorMap> DecodeSafetensors(const std::string& bytes, const std::string& path,
                                    std::map<std::string, std::string>* metadata) {
  Result<st::ParsedFile> parsed = st::Parse(bytes);
  if (!parsed.ok()) return Status(parsed.status().code(), path + ": " + parsed.status().message());
  TensorMap out;
  Status s = CatchTorch("loading tensors", [&]() -> Status {
    for (const auto& [name, v] : parsed->tensors) {
      torch::Dtype dt;
      if (v.dtype == st::DType::kF8E4M3 && !kHasFp8) {
        return Status::Invalid(path + ": tensor " + name +
                               " is float8_e4m3fn (F8_E4M3), which needs libtorch 2.1 or newer "
                               "(this is " TORCH_VERSION "); use a bf16 or fp16 checkpoint");
      }
      if (!ToTorch(v.dtype, &dt)) {
        return Status::Invalid(path + ": tensor " + name + " has unsupported dtype " +
                               st::DTypeName(v.dtype));
      }
      torch::Tensor t = torch::empty(v.shape, torch::TensorOptions().dtype(dt));
      if (!v.data.empty()) std::memcpy(t.data_ptr(), v.data.data(), v.data.size());
      out.emplace(name, std::move(t));
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  if (metadata != nullptr) *metadata = parsed->metadata;
  return out;
}

Result<TensorMap> LoadWeights(const std::string& path) {
  const std::string suffix = ".index.json";
  if (path.size() < suffix.size() ||
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return LoadSafetensors(path);
  }
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(path + ": " + j.status().message());
  auto wm = j->find("weight_map");
  if (!j->is_object() || wm == j->end() || !wm->is_object()) {
    return Status::Invalid(path + ": no weight_map object");
  }
  std::map<std::string, std::set<std::string>> by_shard;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) return Status::Invalid(path + ": weight_map values must be files");
    const std::string& shard = it.value().get_ref<const std::string&>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "..") {
      return Status::Invalid(path + ": bad shard name \"" + shard + "\"");
    }
    by_shard[shard].insert(it.key());
  }
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  TensorMap out;
  for (const auto& [shard, keys] : by_shard) {
    Result<TensorMap> part = LoadSafetensors(dir + shard);
    if (!part.ok()) return part.status();
    for (auto& [name, t] : *part) {
      if (!keys.count(name)) {
        return Status::Invalid(shard + ": tensor " + name + " is not mapped to it by the index");
      }
      out.emplace(name, std::move(t));
    }
    for (const std::string& k : keys) {
      if (!out.count(k)) return Status::Invalid(shard + ": missing tensor " + k);
    }
  }
  return out;
}

Result<std::string> EncodeSafetensors(const TensorMap& tensors,
                                      const std::map<std::string, std::string>& metadata) {
  std::map<std::string, torch::Tensor> cpu;
  std::map<std::string, st::TensorToWrite> views;
  Result<std::string> out = Status::Internal("not encoded");
  Status s = CatchTorch("encoding tensors", [&]() -> Status {
    for (const auto& [name, t] : tensors) {
      torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
      st::DType d;
      if (!FromTorch(c.scalar_type(), &d)) {
        return Status::Invalid("tensor " + name + " has an unsupported dtype");
      }
      cpu[name] = c;
      views[name] = {d, c.sizes().vec(),
                     std::string_view(static_cast<const char*>(c.data_ptr()), c.nbytes())};
    }
    out = st::Serialize(views, metadata);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Status SaveSafetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  Result<std::string> bytes = EncodeSafetensors(tensors, metadata);
  if (!bytes.ok()) return bytes.status();
  return WriteFileDurable(path, *bytes);
}

}  // namespace gleaner::train
