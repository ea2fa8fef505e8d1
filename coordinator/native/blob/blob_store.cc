#include "coordinator/native/blob/blob_store.h"

#include <dirent.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "coordinator/core/blob_urls.h"
#include "shared/native/files.h"
#include "shared/sha256.h"

namespace gleaner::native {

namespace {

constexpr const char* kTmpDir = ".tmp";

class Sha256Stream {
 public:
  Sha256Stream() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256Stream() { EVP_MD_CTX_free(ctx_); }
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void Update(const char* data, size_t len) { EVP_DigestUpdate(ctx_, data, len); }
  std::string FinishHex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    return HexEncode(md, len);
  }

 private:
  EVP_MD_CTX* ctx_;
};

class FsBlobWriter : public BlobWriter {
 public:
  FsBlobWriter(Fs* fs, std::string tmp, std::string final_path, int64_t max_size,
               std::unique_ptr<WritableFile> file)
      : fs_(fs),
        tmp_(std::move(tmp)),
        final_(std::move(final_path)),
        max_size_(max_size),
        file_(std::move(file)) {}

  ~FsBlobWriter() override {
    if (file_) {
      file_->Close();
      file_.reset();
    }
    if (!committed_) fs_->Remove(tmp_);
  }

  Status Append(const char* data, size_t len) override {
    if (!file_) return Status::Internal("blob writer already finished");
    if (max_size_ >= 0 && size_ + int64_t(len) > max_size_) {
      return Status(Code::kTooLarge,
                    "body exceeds the URL's limit of " + std::to_string(max_size_) + " bytes");
    }
    GLEANER_RETURN_IF_ERROR(file_->Append(data, len));
    hash_.Update(data, len);
    size_ += int64_t(len);
    return Status::Ok();
  }

  Result<StoredBlob> Commit(const std::string& expected_sha256) override {
    auto blob = Finish(expected_sha256);
    if (!blob.ok()) return blob;
    GLEANER_RETURN_IF_ERROR(Place());
    return blob;
  }

  Result<StoredBlob> Finish(const std::string& expected_sha256) override {
    if (!file_) return Status::Internal("blob writer already finished");
    StoredBlob blob;
    blob.size = size_;
    blob.sha256 = hash_.FinishHex();
    Status st = file_->Sync();
    if (st.ok()) st = file_->Close();
    file_.reset();
    if (!st.ok()) return st;
    if (!expected_sha256.empty() && expected_sha256 != blob.sha256) {
      return Status::Invalid("sha256 mismatch: body hashes to " + blob.sha256 + ", URL expects " +
                             expected_sha256);
    }
    finished_ = true;
    return blob;
  }

  Status Place() override {
    if (!finished_ || committed_) return Status::Internal("blob writer not finished");
    std::string dir = files::Dirname(final_);
    GLEANER_RETURN_IF_ERROR(fs_->CreateDirs(dir));
    GLEANER_RETURN_IF_ERROR(fs_->Rename(tmp_, final_));
    committed_ = true;
    return fs_->SyncDir(dir);
  }

 private:
  Fs* fs_;
  std::string tmp_;
  std::string final_;
  int64_t max_size_;
  std::unique_ptr<WritableFile> file_;
  Sha256Stream hash_;
  int64_t size_ = 0;
  bool finished_ = false;
  bool committed_ = false;
};

}  // namespace

BlobStore::BlobStore(Fs* fs, std::string root) : fs_(fs), root_(std::move(root)) {}

Status BlobStore::Init() {
  GLEANER_RETURN_IF_ERROR(fs_->CreateDirs(root_ + "/" + kTmpDir));
  // Temp files of writes interrupted by a crash are garbage: nothing refers to them.
  std::string tmp = root_ + "/" + kTmpDir;
  if (DIR* d = ::opendir(tmp.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") fs_->Remove(tmp + "/" + name);
    }
    ::closedir(d);
  }
  return Status::Ok();
}

bool BlobStore::ValidKey(const std::string& key) {
  // The core's rule for keys, plus the store's own: no segment may start with '.', so no key
  // can name the store's temp directory.
  return core::IsValidBlobKey(key) && key[0] != '.' && key.find("/.") == std::string::npos;
}

Result<std::unique_ptr<BlobWriter>> BlobStore::BeginPut(const std::string& key, int64_t max_size) {
  if (!ValidKey(key)) return Status::Invalid("invalid blob key");
  unsigned char rnd[12];
  if (RAND_bytes(rnd, sizeof rnd) != 1) return Status::Internal("RAND_bytes failed");
  std::string tmp = root_ + "/" + kTmpDir + "/" + HexEncode(rnd, sizeof rnd) + ".part";
  auto file = fs_->NewWritableFile(tmp, 0644);
  if (!file.ok()) return file.status();
  return std::unique_ptr<BlobWriter>(
      new FsBlobWriter(fs_, tmp, root_ + "/" + key, max_size, std::move(file).value()));
}

Result<std::unique_ptr<ReadableFile>> BlobStore::Open(const std::string& key) {
  if (!ValidKey(key)) return Status::Invalid("invalid blob key");
  auto file = fs_->OpenReadable(root_ + "/" + key);
  if (!file.ok() && file.status().code() == Code::kNotFound) {
    return Status::NotFound("no such object");
  }
  return file;
}

Status BlobStore::Delete(const std::string& key) {
  if (!ValidKey(key)) return Status::Invalid("invalid blob key");
  Status st = fs_->Remove(root_ + "/" + key);
  if (st.code() == Code::kNotFound) return Status::Ok();
  return st;
}

}  // namespace gleaner::native
