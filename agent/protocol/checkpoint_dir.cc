#include "agent/protocol/checkpoint_dir.h"

#include <cstdio>

#include "shared/native/files.h"
#include "shared/sha256.h"

namespace gleaner::train {
namespace {

bool PlainName(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name.find('/') == std::string::npos &&
         name != "." && name != ".." && name != kManifestName &&
         name.find('\0') == std::string::npos;
}

}  // namespace

std::string CheckpointDirFor(const std::string& work_dir, int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%010lld", static_cast<long long>(step));
  return files::Join(files::Join(work_dir, "checkpoints"), buf);
}

std::string OutputDirFor(const std::string& work_dir) {
  return files::Join(work_dir, "output");
}

Result<CheckpointWriter> CheckpointWriter::Begin(const std::string& final_dir) {
  CheckpointWriter w;
  w.final_dir_ = final_dir;
  w.tmp_dir_ = final_dir + ".tmp";
  GLEANER_RETURN_IF_ERROR(files::RemoveTree(w.tmp_dir_));
  GLEANER_RETURN_IF_ERROR(files::MakeDirs(w.tmp_dir_));
  return w;
}

Status CheckpointWriter::AddFile(const std::string& name, std::string_view bytes) {
  if (!PlainName(name)) return Status::Invalid("checkpoint file name '" + name + "' not allowed");
  for (const ManifestFile& f : manifest_.files) {
    if (f.name == name) return Status::Invalid("checkpoint file " + name + " added twice");
  }
  GLEANER_RETURN_IF_ERROR(files::WriteSynced(files::Join(tmp_dir_, name), bytes));
  return AddWrittenFile(name);
}

Status CheckpointWriter::AddWrittenFile(const std::string& name) {
  if (!PlainName(name)) return Status::Invalid("checkpoint file name '" + name + "' not allowed");
  for (const ManifestFile& f : manifest_.files) {
    if (f.name == name) return Status::Invalid("checkpoint file " + name + " added twice");
  }
  std::string path = files::Join(tmp_dir_, name);
  GLEANER_RETURN_IF_ERROR(files::Fsync(path));
  Result<files::FileDigest> d = files::Digest(path);
  if (!d.ok()) return d.status();
  manifest_.files.push_back(ManifestFile{name, d->size, d->sha256});
  return Status::Ok();
}

Status CheckpointWriter::Commit(const std::string& kind, const std::string& job_id, int64_t step,
                                const Json& meta) {
  if (tmp_dir_.empty()) return Status::Internal("checkpoint writer used after commit");
  manifest_.kind = kind;
  manifest_.job_id = job_id;
  manifest_.step = step;
  manifest_.meta = meta.is_object() ? meta : Json::object();
  GLEANER_RETURN_IF_ERROR(
      files::WriteSynced(files::Join(tmp_dir_, kManifestName), ManifestToJson(manifest_)));
  GLEANER_RETURN_IF_ERROR(files::Fsync(tmp_dir_));
  // A directory for the same step may exist (a resumed run re-reaching it): replace it.
  GLEANER_RETURN_IF_ERROR(files::RemoveTree(final_dir_));
  GLEANER_RETURN_IF_ERROR(files::RenameDurable(tmp_dir_, final_dir_));
  tmp_dir_.clear();
  return Status::Ok();
}

Result<CheckpointManifest> VerifyCheckpointDir(const std::string& dir) {
  Result<std::string> text = files::ReadAll(files::Join(dir, kManifestName), 1 << 20);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) {
      return Status::NotFound(dir + " has no " + kManifestName);
    }
    if (text.status().code() == Code::kTooLarge) {
      return Status::Corruption(dir + ": manifest larger than 1 MiB");
    }
    return text.status();
  }
  Result<CheckpointManifest> m = ParseManifest(*text);
  if (!m.ok()) return Status::Corruption(dir + ": " + m.status().message());
  for (const ManifestFile& f : m->files) {
    Result<files::FileDigest> d = files::Digest(files::Join(dir, f.name));
    if (!d.ok()) return Status::Corruption(dir + ": " + f.name + ": " + d.status().message());
    if (d->size != f.size) {
      return Status::Corruption(dir + ": " + f.name + " has " + std::to_string(d->size) +
                                " bytes, manifest says " + std::to_string(f.size));
    }
    if (d->sha256 != f.sha256) {
      return Status::Corruption(dir + ": " + f.name + " sha256 does not match the manifest");
    }
  }
  return m;
}

std::string LatestCheckpointDir(const std::string& work_dir) {
  Result<std::vector<std::string>> names = files::ListDir(files::Join(work_dir, "checkpoints"));
  if (!names.ok()) return "";
  for (auto it = names->rbegin(); it != names->rend(); ++it) {
    if (it->size() != 10 || it->find_first_not_of("0123456789") != std::string::npos) continue;
    std::string dir = files::Join(files::Join(work_dir, "checkpoints"), *it);
    if (VerifyCheckpointDir(dir).ok()) return dir;
  }
  return "";
}

std::vector<ManifestFile> DescribeFiles(const std::map<std::string, std::string>& files) {
  std::vector<ManifestFile> out;
  for (const auto& [name, bytes] : files) {
    out.push_back(ManifestFile{name, int64_t(bytes.size()), Sha256Hex(bytes)});
  }
  return out;
}

Status CheckResumedExport(const std::string& resume_dir,
                          const std::vector<ManifestFile>& exported) {
  Result<CheckpointManifest> m = VerifyCheckpointDir(resume_dir);
  if (!m.ok()) return m.status();
  Result<std::vector<ManifestFile>> recorded = ManifestOutputs(*m);
  if (!recorded.ok()) {
    return Status::Corruption("the checkpoint of the last step records no outputs: " +
                              recorded.status().message());
  }
  if (!SameFiles(*recorded, exported)) {
    return Status::Corruption(
        "the export of the checkpoint of the last step differs from the outputs it recorded");
  }
  return Status::Ok();
}

}  // namespace gleaner::train
