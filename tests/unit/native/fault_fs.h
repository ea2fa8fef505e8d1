// FaultFs: an Fs wrapper for tests that fails chosen operations (the Nth write, any fsync or
// rename) and counts calls. Not thread-safe.
#pragma once

#include <memory>
#include <string>

#include "coordinator/native/blob/fs.h"

namespace gleaner::native::testing {

class FaultFs : public Fs {
 public:
  explicit FaultFs(Fs* base) : base_(base) {}

  int fail_append_at = -1;  // the Nth Append (0-based, counted over all files) fails
  bool fail_sync = false;
  bool fail_rename = false;
  bool fail_sync_dir = false;
  Code fail_code = Code::kIo;
  int appends = 0, syncs = 0, renames = 0, sync_dirs = 0;

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, int mode) override;
  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) override {
    return base_->OpenReadable(path);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    ++renames;
    if (fail_rename) return Status(fail_code, "injected rename failure");
    return base_->Rename(from, to);
  }
  Status Link(const std::string& from, const std::string& to) override {
    return base_->Link(from, to);
  }
  Status Remove(const std::string& path) override { return base_->Remove(path); }
  Status SyncDir(const std::string& dir) override {
    ++sync_dirs;
    if (fail_sync_dir) return Status(fail_code, "injected dir fsync failure");
    return base_->SyncDir(dir);
  }
  Status CreateDirs(const std::string& dir) override { return base_->CreateDirs(dir); }
  bool Exists(const std::string& path) override { return base_->Exists(path); }

 private:
  class File : public WritableFile {
   public:
    File(FaultFs* fs, std::unique_ptr<WritableFile> base) : fs_(fs), base_(std::move(base)) {}
    Status Append(const char* data, size_t len) override {
      if (fs_->appends++ == fs_->fail_append_at) {
        return Status(fs_->fail_code, "injected write failure");
      }
      return base_->Append(data, len);
    }
    Status Sync() override {
      ++fs_->syncs;
      if (fs_->fail_sync) return Status(fs_->fail_code, "injected fsync failure");
      return base_->Sync();
    }
    Status Close() override { return base_->Close(); }

   private:
    FaultFs* fs_;
    std::unique_ptr<WritableFile> base_;
  };

  Fs* base_;
};

inline Result<std::unique_ptr<WritableFile>> FaultFs::NewWritableFile(const std::string& path,
                                                                      int mode) {
  auto f = base_->NewWritableFile(path, mode);
  if (!f.ok()) return f.status();
  return std::unique_ptr<WritableFile>(new File(this, std::move(f).value()));
}

}  // namespace gleaner::native::testing
