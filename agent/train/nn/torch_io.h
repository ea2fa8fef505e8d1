// File and tensor I/O for every libtorch part of the trainer, and the one place where libtorch
// exceptions become Status.
//
// Contract: every function returns Status/Result and never throws; tensors are CPU, contiguous.
// The file functions are the trainer's names for shared/native/files.h (one implementation):
// WriteFileDurable writes "<path>.tmp", fsyncs, renames over <path> and fsyncs the directory.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>

#include "shared/status.h"

namespace gleaner::train {

using TensorMap = std::map<std::string, torch::Tensor>;

// Runs fn, turning any c10::Error / std::exception into Status::Internal("<what>: ...").
Status CatchTorch(const char* what, const std::function<Status()>& fn);

// Reads a whole file of any size (files::ReadAll); kNotFound when it does not exist.
Result<std::string> ReadFile(const std::string& path);
Status WriteFileDurable(const std::string& path, const std::string& bytes);
// fsync of a directory (after renames into it).
Status SyncDir(const std::string& dir);
Status MakeDirs(const std::string& dir);

// Reads a whole safetensors file into CPU tensors (dtype preserved). *metadata may be null.
Result<TensorMap> LoadSafetensors(const std::string& path,
                                  std::map<std::string, std::string>* metadata = nullptr);
// Decodes safetensors bytes (already in memory); `what` names the source in errors.
Result<TensorMap> DecodeSafetensors(const std::string& bytes, const std::string& what,
                                    std::map<std::string, std::string>* metadata = nullptr);
// Loads model weights from one .safetensors file or a sharded "*.safetensors.index.json"
// ({"weight_map": {key: shard file}}; shards are resolved next to the index).
Result<TensorMap> LoadWeights(const std::string& path);
// Serialises tensors (F32/F16/BF16/I64/I32/U8/BOOL) to safetensors bytes.
Result<std::string> EncodeSafetensors(const TensorMap& tensors,
                                      const std::map<std::string, std::string>& metadata = {});
Status SaveSafetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace gleaner::train
