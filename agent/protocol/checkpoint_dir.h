// Durable checkpoint (and output) directories, as agent/protocol/trainer_protocol.h specifies.
//
// Writing: CheckpointWriter::Begin(final_dir) makes "<final_dir>.tmp" (a stale one is removed);
// the caller adds files (AddFile with bytes, or AddWrittenFile for a file it wrote itself into
// tmp_dir()); Commit() fsyncs, writes MANIFEST.json last, fsyncs, renames the directory to
// final_dir (replacing an existing one) and fsyncs the parent. A crash at any point leaves either
// no final_dir or a complete one. Not thread-safe; one writer per directory.
//
// Reading: VerifyCheckpointDir parses the manifest and checks the size and SHA-256 of every file
// it lists; anything else is kCorruption (or kNotFound when the directory/manifest is missing).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/protocol/trainer_protocol.h"
#include "shared/json.h"
#include "shared/status.h"

namespace gleaner::train {

// WORK_DIR/checkpoints/<step as %010d>.
std::string CheckpointDirFor(const std::string& work_dir, int64_t step);
// WORK_DIR/output.
std::string OutputDirFor(const std::string& work_dir);

class CheckpointWriter {
 public:
  // Creates final_dir + ".tmp" (and its parents). kIo on failure.
  static Result<CheckpointWriter> Begin(const std::string& final_dir);
  CheckpointWriter() = default;

  const std::string& tmp_dir() const { return tmp_dir_; }
  const std::string& final_dir() const { return final_dir_; }

  // Writes tmp_dir()/name (fsynced) and records it for the manifest. name: a plain file name.
  Status AddFile(const std::string& name, std::string_view bytes);
  // Records tmp_dir()/name, a file the caller has already written; fsyncs and hashes it.
  Status AddWrittenFile(const std::string& name);
  // Writes the manifest last and publishes the directory. The writer is spent afterwards.
  Status Commit(const std::string& kind, const std::string& job_id, int64_t step,
                const Json& meta = Json::object());

 private:
  std::string final_dir_;
  std::string tmp_dir_;
  CheckpointManifest manifest_;
};

// Parses DIR/MANIFEST.json and verifies every listed file (size, sha256).
Result<CheckpointManifest> VerifyCheckpointDir(const std::string& dir);

// Newest verified checkpoint directory under WORK_DIR/checkpoints ("" when none).
std::string LatestCheckpointDir(const std::string& work_dir);

// Name, size and sha256 of in-memory files (name order), as a manifest lists them: what the
// checkpoint of the last step records as its export (trainer_protocol.h, meta.outputs).
std::vector<ManifestFile> DescribeFiles(const std::map<std::string, std::string>& files);
// A run resumed from the checkpoint of the last step (`resume_dir`): the export it computed
// (`exported`) must be the files that checkpoint recorded. kCorruption when they differ or the
// checkpoint records none.
Status CheckResumedExport(const std::string& resume_dir, const std::vector<ManifestFile>& exported);

}  // namespace gleaner::train
