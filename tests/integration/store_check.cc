#include "tests/integration/store_check.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "coordinator/core/blob_urls.h"
#include "coordinator/native/blob/fs.h"
#include "coordinator/native/blob/signing_key.h"
#include "coordinator/native/db/sqlite_executor.h"
#include "shared/json.h"
#include "shared/sha256.h"
#include "tests/integration/harness.h"

namespace gleaner::testing {

namespace {

struct BlobRow {
  int64_t size = 0;
  std::string sha256;
};

std::string Text(const core::SqlValue& v) {
  return v.is_null() ? "" : v.AsText();
}

void Walk(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  DIR* d = ::opendir((rel.empty() ? root : root + "/" + rel).c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != ".." && !(rel.empty() && n == ".tmp")) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    std::string child = rel.empty() ? n : rel + "/" + n;
    struct stat st;
    if (::lstat((root + "/" + child).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      Walk(root, child, out);
    } else {
      out->push_back(child);
    }
  }
}

}  // namespace

std::vector<std::string> ListObjects(const std::string& data_dir) {
  std::vector<std::string> out;
  Walk(data_dir + "/blobs", "", &out);
  return out;
}

std::string JoinLines(const std::vector<std::string>& lines, size_t max) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < max; ++i) out += lines[i] + "\n";
  if (lines.size() > max) out += "... and " + std::to_string(lines.size() - max) + " more\n";
  return out;
}

StoreCheckResult CheckStore(const StoreCheckOptions& o) {
  StoreCheckResult out;
  auto& problems = out.problems;
  auto db = native::SqliteExecutor::Open({o.db});
  if (!db.ok()) {
    problems.push_back("cannot open the database: " + db.status().ToString());
    return out;
  }
  core::Batch b;
  b.Add("PRAGMA integrity_check");
  b.Add("SELECT key, size, sha256 FROM blobs");
  b.Add("SELECT job_id, step, epoch, key, sha256, size FROM checkpoints");
  b.Add(
      "SELECT id, state, lease_epoch, ckpt_step, ckpt_key, ckpt_sha256, ckpt_size, outputs "
      "FROM jobs");
  b.Add(
      "SELECT j.id, j.lease_epoch, (SELECT COUNT(*) FROM segments s WHERE s.job_id = j.id), "
      "(SELECT MAX(epoch) FROM segments s WHERE s.job_id = j.id), (SELECT COUNT(*) FROM "
      "segments s WHERE s.job_id = j.id AND s.ended_at IS NULL), (SELECT MAX(epoch) FROM "
      "segments s WHERE s.job_id = j.id AND s.ended_at IS NULL) FROM jobs j");
  core::BatchResult r = (*db)->Execute(b);
  if (!r.status.ok()) {
    problems.push_back("cannot read the database: " + r.status.ToString());
    return out;
  }
  const core::Rows& integrity = r.results[0];
  if (integrity.rows.size() != 1 || Text(integrity.rows[0][0]) != "ok") {
    std::string all;
    for (const auto& row : integrity.rows) all += Text(row[0]) + "; ";
    problems.push_back("integrity_check: " + all);
  }

  // Every stored object the database knows: its file, byte for byte.
  const std::string root = o.data_dir + "/blobs";
  std::map<std::string, BlobRow> blobs;
  std::map<std::string, std::string> fingerprints;  // key -> cache entry, when unchanged
  for (const auto& row : r.results[1].rows) {
    BlobRow br{row[1].AsInt(), Text(row[2])};
    const std::string key = Text(row[0]);
    blobs[key] = br;
    ++out.blobs;
    std::string path = root + "/" + key;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      problems.push_back("blobs row " + key + " has no object file");
      continue;
    }
    std::string fp = key + " " + br.sha256 + " " + std::to_string(st.st_ino) + " " +
                     std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) +
                     " " + std::to_string(st.st_size);
    fingerprints[key] = fp;
    if (o.verified != nullptr && o.verified->count(fp)) {
      ++out.skipped;
      continue;
    }
    std::string bytes = ReadFile(path);
    if (int64_t(bytes.size()) != br.size || Sha256Hex(bytes) != br.sha256) {
      problems.push_back("object " + key + " is " + std::to_string(bytes.size()) + " bytes / " +
                         Sha256Hex(bytes) + ", its blobs row says " + std::to_string(br.size) +
                         " / " + br.sha256);
      fingerprints.erase(key);
    }
  }
  auto stored_as = [&](const std::string& key, const std::string& sha, int64_t size) {
    auto it = blobs.find(key);
    return it != blobs.end() && it->second.sha256 == sha && it->second.size == size;
  };

  // Checkpoints: each points at a stored object with its sha256 and size.
  std::map<std::string, std::string> ckpt_keys;  // key -> sha256
  for (const auto& row : r.results[2].rows) {
    ++out.checkpoints;
    const std::string job = Text(row[0]), key = Text(row[3]), sha = Text(row[4]);
    const int64_t size = row[5].AsInt();
    if (!stored_as(key, sha, size)) {
      problems.push_back("checkpoint " + job + "@" + std::to_string(row[1].AsInt()) +
                         " points at " + key + " which is not stored with its sha256/size");
    }
    ckpt_keys[key] = sha;
  }

  // Jobs: the latest checkpoint is a committed one; a completed job's outputs are stored.
  for (const auto& row : r.results[3].rows) {
    const std::string id = Text(row[0]), state = Text(row[1]);
    if (!row[3].is_null()) {
      auto it = ckpt_keys.find(Text(row[4]));
      if (it == ckpt_keys.end() || it->second != Text(row[5])) {
        problems.push_back("job " + id + " latest checkpoint " + Text(row[4]) +
                           " has no matching checkpoints row");
      }
      if (!stored_as(Text(row[4]), Text(row[5]), row[6].AsInt())) {
        problems.push_back("job " + id + " latest checkpoint " + Text(row[4]) + " is not stored");
      }
    }
    if (state == "completed") {
      auto outputs = ParseJson(Text(row[7]));
      if (!outputs.ok() || !outputs->is_array() || outputs->empty()) {
        problems.push_back("completed job " + id + " has no outputs");
        continue;
      }
      for (const Json& output : *outputs) {
        std::string key = output.value("key", "");
        if (!stored_as(key, output.value("sha256", ""), output.value("size", int64_t(-1)))) {
          problems.push_back("completed job " + id + " output " + key + " is not stored");
        }
      }
    }
  }

  // Leases: epochs 1..lease_epoch each have their segment; at most one open, the current one.
  for (const auto& row : r.results[4].rows) {
    const std::string id = Text(row[0]);
    const int64_t epoch = row[1].AsInt(), count = row[2].AsInt();
    const int64_t max_epoch = row[3].is_null() ? 0 : row[3].AsInt();
    if (count != epoch || max_epoch != epoch) {
      problems.push_back("job " + id + " lease_epoch " + std::to_string(epoch) + " but " +
                         std::to_string(count) + " segments up to epoch " +
                         std::to_string(max_epoch));
    }
    if (row[4].AsInt() > 1 || (row[4].AsInt() == 1 && row[5].AsInt() != epoch)) {
      problems.push_back("job " + id + " has " + std::to_string(row[4].AsInt()) +
                         " open segments (newest open epoch " + std::to_string(row[5].AsInt()) +
                         ", lease_epoch " + std::to_string(epoch) + ")");
    }
  }

  if (o.expect_no_temp_files) {
    if (DIR* d = ::opendir((root + "/.tmp").c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") problems.push_back("temp file left in the store: " + n);
      }
      ::closedir(d);
    }
  }

  // Downloads through the running coordinator with URLs signed by its own key.
  if (!o.base_url.empty()) {
    auto key = native::LoadOrCreateSigningKey(native::DefaultFs(), o.data_dir, nullptr);
    if (!key.ok()) {
      problems.push_back("cannot read the signing key: " + key.status().ToString());
      return out;
    }
    core::CoreConfig config;
    config.public_url = o.base_url;
    config.blob_signing_key = *key;
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (const auto& [ckey, sha] : ckpt_keys) {
      auto fp = fingerprints.find(ckey);
      if (fp != fingerprints.end() && o.verified != nullptr && o.verified->count(fp->second)) {
        continue;
      }
      HttpResult got = HttpClient::Fetch("GET", core::GetUrl(config, ckey, now).url);
      ++out.downloads;
      if (got.status != 200 || Sha256Hex(got.body) != sha) {
        problems.push_back("checkpoint " + ckey + " download: " + std::to_string(got.status) + " " +
                           std::to_string(got.body.size()) + " bytes sha256 " +
                           Sha256Hex(got.body) + ", committed " + sha);
        fingerprints.erase(ckey);
      }
    }
  }
  if (o.verified != nullptr) {
    for (const auto& kv : fingerprints) {
      // A checkpoint counts as verified only once it was downloaded too.
      if (o.base_url.empty() && ckpt_keys.count(kv.first)) continue;
      o.verified->insert(kv.second);
    }
  }
  return out;
}

}  // namespace gleaner::testing
