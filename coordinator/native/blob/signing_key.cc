#include "coordinator/native/blob/signing_key.h"

#include <openssl/rand.h>

#include "shared/sha256.h"

namespace gleaner::native {

namespace {

Result<std::string> ReadKey(Fs* fs, const std::string& path) {
  auto text = ReadWholeFile(fs, path);
  if (!text.ok()) return text.status();
  std::string key = *text;
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) {
    key.pop_back();
  }
  if (key.size() < 16) return Status::Invalid("signing key in " + path + " is too short");
  return key;
}

}  // namespace

Result<std::string> LoadOrCreateSigningKey(Fs* fs, const std::string& data_dir,
                                           const char* env_key) {
  if (env_key != nullptr) {
    std::string key = env_key;
    if (key.size() < 16) return Status::Invalid("GLEANER_SIGNING_KEY must be at least 16 bytes");
    return key;
  }
  std::string path = data_dir + "/signing.key";
  if (fs->Exists(path)) return ReadKey(fs, path);

  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) return Status::Internal("RAND_bytes failed");
  std::string key = HexEncode(raw, sizeof raw);
  unsigned char rnd[8];
  if (RAND_bytes(rnd, sizeof rnd) != 1) return Status::Internal("RAND_bytes failed");
  std::string tmp = path + ".tmp-" + HexEncode(rnd, sizeof rnd);
  auto file = fs->NewWritableFile(tmp, 0600);
  if (!file.ok()) return file.status();
  std::string content = key + "\n";
  Status st = (*file)->Append(content.data(), content.size());
  if (st.ok()) st = (*file)->Sync();
  if (st.ok()) st = (*file)->Close();
  if (st.ok()) st = fs->Link(tmp, path);  // fails with kConflict if another process won
  fs->Remove(tmp);
  if (st.code() == Code::kConflict) return ReadKey(fs, path);
  if (!st.ok()) return st;
  GLEANER_RETURN_IF_ERROR(fs->SyncDir(data_dir));
  return key;
}

}  // namespace gleaner::native
