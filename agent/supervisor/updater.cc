#include "agent/supervisor/updater.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "shared/native/files.h"
#include "shared/sha256.h"

namespace gleaner::agent {
namespace {

constexpr int kCrashLoopStarts = 3;
constexpr int64_t kCrashLoopWindowS = 300;
constexpr char kBinary[] = "gleaner-agent";
constexpr int64_t kMaxAdoptBytes = int64_t(1) << 30;

}  // namespace

Updater::Updater(std::string state_dir, release::KeyRing ring, std::string platform,
                 UpdaterDeps deps)
    : dir_(std::move(state_dir)),
      ring_(std::move(ring)),
      platform_(std::move(platform)),
      deps_(std::move(deps)) {}

std::string Updater::Path(const std::string& name) const {
  return files::Join(dir_, name);
}

std::optional<release::Version> Updater::HighestTrusted() const {
  Result<std::string> text = files::ReadAll(Path("trust/highest_version"), 64);
  if (!text.ok()) return std::nullopt;
  std::string t = text.value();
  while (!t.empty() && t.back() == '\n') t.pop_back();
  Result<release::Version> v = release::ParseVersion(t);
  if (!v.ok()) return std::nullopt;
  return v.value();
}

std::string Updater::LinkVersion(const std::string& link) const {
  char buf[512];
  ssize_t n = readlink(Path(link).c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string target(buf, size_t(n));
  const std::string prefix = "versions/";
  return target.rfind(prefix, 0) == 0 ? target.substr(prefix.size()) : "";
}

std::string Updater::CurrentVersion() const {
  return LinkVersion("current");
}
std::string Updater::CurrentBinary() const {
  return files::Join(Path("current"), kBinary);
}

Status Updater::PointLink(const std::string& link, const std::string& version) {
  std::string tmp = Path(link + ".tmp");
  unlink(tmp.c_str());
  if (symlink(("versions/" + version).c_str(), tmp.c_str()) != 0) {
    return Status::Io("symlink " + tmp + " failed");
  }
  return files::RenameDurable(tmp, Path(link));
}

Result<release::Version> Updater::Install(const std::string& envelope_json) {
  Result<release::Envelope> env = release::ParseEnvelope(envelope_json);
  if (!env.ok()) return env.status();
  Result<release::Manifest> m = release::VerifyEnvelope(env.value(), ring_);
  if (!m.ok()) return m.status();
  std::string version = m->version.ToString();
  // A version already trusted but never switched to (a kill -9 between advancing the trust and
  // the switch) may be installed again; anything lower, or the version running now, may not.
  std::optional<release::Version> floor = HighestTrusted();
  if (floor && *floor == m->version && CurrentVersion() != version) floor.reset();
  Status trust = release::CheckTrust(m.value(), floor, deps_.now_s());
  if (!trust.ok()) return trust;
  if (files::Exists(Path("failed/" + version))) {
    return Status::Conflict("release " + version + " was rolled back before");
  }
  auto art = m->artifacts.find(platform_);
  if (art == m->artifacts.end()) return Status::NotFound("release has no " + platform_ + " build");
  const release::Artifact& a = art->second;

  // Download into memory bounded by the declared length (binaries are tens of MB).
  std::string bytes;
  bool overflow = false;
  Status dl = deps_.download(a.uri, [&](std::string_view chunk) {
    if (int64_t(bytes.size() + chunk.size()) > a.length) {
      overflow = true;
      return false;
    }
    bytes.append(chunk.data(), chunk.size());
    return true;
  });
  if (overflow) return Status::Corruption("download is longer than " + std::to_string(a.length));
  if (!dl.ok()) return dl;
  if (int64_t(bytes.size()) != a.length) {
    return Status::Corruption("download is " + std::to_string(bytes.size()) + " bytes, expected " +
                              std::to_string(a.length));
  }
  if (!ConstantTimeEquals(Sha256Hex(bytes), a.sha256)) {
    return Status::Corruption("download sha256 does not match the manifest");
  }

  // Step 1: side-by-side install.
  std::string vdir = Path("versions/" + version);
  Status s = files::MakeDirs(vdir, 0755);
  if (s.ok()) s = files::WriteDurable(files::Join(vdir, kBinary), bytes, 0755);
  if (!s.ok()) return s;
  auto stop = [&](int step) { return deps_.after_step && !deps_.after_step(step); };
  if (stop(1)) return Status::Internal("stopped");
  // Step 2: self-test of the new binary.
  if (!deps_.self_test(files::Join(vdir, kBinary))) {
    files::RemoveTree(vdir);
    return Status::Internal("release " + version + " failed its self-test");
  }
  // Step 3: trust advances (never backwards) before anything points at the new version.
  s = RaiseTrust(m->version);
  if (!s.ok()) return s;
  if (stop(2)) return Status::Internal("stopped");
  s = Switch(version, stop);
  if (!s.ok()) return s;
  return m->version;
}

Status Updater::RaiseTrust(const release::Version& v) {
  std::optional<release::Version> highest = HighestTrusted();
  if (highest && !(*highest < v)) return Status::Ok();
  Status s = files::MakeDirs(Path("trust"), 0700);
  if (s.ok()) s = files::WriteDurable(Path("trust/highest_version"), v.ToString() + "\n", 0600);
  return s;
}

Status Updater::Switch(const std::string& version, const std::function<bool(int)>& stop) {
  // Step 4: the switch, recorded with a swapping flag.
  std::string old = CurrentVersion();
  Status s = files::WriteDurable(Path("swapping"), version + " " + old + "\n");
  if (!s.ok()) return s;
  if (stop(3)) return Status::Internal("stopped");
  s = PointLink("current", version);
  if (!s.ok()) return s;
  if (stop(4)) return Status::Internal("stopped");
  if (!old.empty() && old != version) {
    s = PointLink("previous", old);
    if (!s.ok()) return s;
  }
  if (stop(5)) return Status::Internal("stopped");
  unlink(Path("starts").c_str());
  unlink(Path("swapping").c_str());
  return files::Fsync(dir_);
}

Status Updater::Adopt(const release::Version& version, const std::string& binary) {
  std::string v = version.ToString();
  if (files::Exists(Path("failed/" + v))) {
    return Status::Conflict("version " + v + " was rolled back before");
  }
  Result<std::string> bytes = files::ReadAll(binary, kMaxAdoptBytes);
  if (!bytes.ok()) return bytes.status();
  std::string vdir = Path("versions/" + v);
  Status s = files::MakeDirs(vdir, 0755);
  if (s.ok()) s = files::WriteDurable(files::Join(vdir, kBinary), bytes.value(), 0755);
  if (s.ok()) s = RaiseTrust(version);
  if (!s.ok()) return s;
  return Switch(v, [](int) { return false; });
}

Status Updater::Prune() {
  if (files::Exists(Path("swapping"))) return Status::Ok();
  Result<std::vector<std::string>> versions = files::ListDir(Path("versions"));
  if (!versions.ok()) return Status::Ok();  // nothing installed
  std::string keep1 = CurrentVersion(), keep2 = LinkVersion("previous");
  Status result = Status::Ok();
  for (const std::string& v : versions.value()) {
    if (v == keep1 || v == keep2) continue;
    Status s = files::RemoveTree(Path("versions/" + v));
    if (!s.ok()) result = s;
  }
  return result;
}

Status Updater::Recover() {
  Result<std::string> flag = files::ReadAll(Path("swapping"), 256);
  if (!flag.ok()) return Status::Ok();
  std::string text = flag.value();
  size_t sp = text.find(' ');
  std::string want = text.substr(0, sp);
  std::string old = sp == std::string::npos ? "" : text.substr(sp + 1);
  while (!old.empty() && (old.back() == '\n' || old.back() == ' ')) old.pop_back();
  // `current` is either the old or the new verified version; finish what the rename decided.
  if (CurrentVersion() == want && !old.empty()) {
    Status s = PointLink("previous", old);
    if (!s.ok()) return s;
    unlink(Path("starts").c_str());
  }
  unlink(Path("swapping").c_str());
  unlink(Path("current.tmp").c_str());
  unlink(Path("previous.tmp").c_str());
  return files::Fsync(dir_);
}

Result<bool> Updater::RecordStart() {
  int64_t now = deps_.now_s();
  std::vector<int64_t> starts;
  Result<std::string> text = files::ReadAll(Path("starts"), 4096);
  if (text.ok()) {
    const char* p = text->c_str();
    char* end = nullptr;
    for (int64_t t = std::strtoll(p, &end, 10); end != p; t = std::strtoll(p, &end, 10)) {
      if (now - t < kCrashLoopWindowS && t <= now) starts.push_back(t);
      p = end;
    }
  }
  starts.push_back(now);
  std::string current = CurrentVersion();
  std::string previous = LinkVersion("previous");
  if (int(starts.size()) >= kCrashLoopStarts && !previous.empty() && previous != current &&
      files::Exists(files::Join(Path("versions/" + previous), kBinary))) {
    Status s = files::MakeDirs(Path("failed"), 0700);
    if (s.ok()) s = files::WriteDurable(Path("failed/" + current), "crash loop\n");
    if (s.ok()) s = PointLink("current", previous);
    if (!s.ok()) return s;
    unlink(Path("starts").c_str());
    return true;
  }
  std::string out;
  for (int64_t t : starts) out += std::to_string(t) + "\n";
  Status s = files::WriteDurable(Path("starts"), out);
  if (!s.ok()) return s;
  return false;
}

Status Updater::MarkHealthy() {
  unlink(Path("starts").c_str());
  return Status::Ok();
}

}  // namespace gleaner::agent
