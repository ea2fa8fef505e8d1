#include "agent/supervisor/state.h"

#include <cstdlib>

#include "shared/json.h"
#include "shared/native/files.h"
#include "shared/sha256.h"

namespace gleaner::agent {
namespace {

constexpr const char* kIdentity = "identity.json";
constexpr const char* kCurrentJob = "current_job.json";

Json JobToJson(const CurrentJob& job) {
  Json pending = Json::array();
  for (const PendingUpload& p : job.pending) {
    Json u = {{"step", p.step}, {"archive", p.archive}, {"sha256", p.sha256}, {"size", p.size}};
    if (!p.outputs.empty()) u["outputs"] = FileListToJson(p.outputs);
    pending.push_back(u);
  }
  return {{"job_id", job.job_id}, {"epoch", job.epoch}, {"pending", pending}};
}

// A job id as a file name: anything but [A-Za-z0-9_-] becomes '_' (never "", "." or "..").
std::string SafeName(const std::string& job_id) {
  std::string safe;
  for (char c : job_id)
    safe.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_');
  return safe.empty() ? "_" : safe;
}

}  // namespace

Status StateDir::Init() {
  GLEANER_RETURN_IF_ERROR(files::MakeDirs(dir_, 0700));
  GLEANER_RETURN_IF_ERROR(files::MakeDirs(CacheDir(), 0700));
  GLEANER_RETURN_IF_ERROR(files::MakeDirs(JobCacheRoot(), 0700));
  return files::MakeDirs(files::Join(dir_, "jobs"), 0700);
}

std::string StateDir::CacheDir() const {
  return files::Join(dir_, "cache");
}

std::string StateDir::JobDir(const std::string& job_id, int64_t epoch) const {
  return files::Join(files::Join(dir_, "jobs"), SafeName(job_id) + "-e" + std::to_string(epoch));
}

std::string StateDir::JobCacheRoot() const {
  return files::Join(dir_, "job-cache");
}

std::string StateDir::JobCacheDir(const std::string& job_id) const {
  return files::Join(JobCacheRoot(), SafeName(job_id));
}

Result<std::optional<Identity>> StateDir::LoadIdentity() {
  Result<std::string> text = files::ReadAll(files::Join(dir_, kIdentity), 1 << 16);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return std::optional<Identity>();
    return text.status();
  }
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Corruption("identity.json: " + j.status().message());
  Identity id;
  FieldReader f(*j, "identity.");
  f.String("machine_id", &id.machine_id, true);
  f.String("node_id", &id.node_id, true);
  f.String("token", &id.token, true);
  f.String("node_secret", &id.node_secret, false);
  f.String("coordinator", &id.coordinator, false, 4096);
  const Json* gpu = nullptr;
  f.Object("gpu", &gpu, false);
  if (!f.ok()) return Status::Corruption(f.status().message());
  if (gpu->contains("vram_mb")) {
    FieldReader g(*gpu, "identity.gpu.");
    g.String("name", &id.gpu_name, true, 256);
    g.Int("vram_mb", &id.vram_mb, true, 0, 100000000);
    if (!g.ok()) return Status::Corruption(g.status().message());
  }
  return std::optional<Identity>(id);
}

Status StateDir::SaveIdentity(const Identity& id) {
  Json j = {{"machine_id", id.machine_id},
            {"node_id", id.node_id},
            {"token", id.token},
            {"coordinator", id.coordinator}};
  if (!id.node_secret.empty()) j["node_secret"] = id.node_secret;
  if (id.vram_mb >= 0) j["gpu"] = {{"name", id.gpu_name}, {"vram_mb", id.vram_mb}};
  return files::WriteDurable(files::Join(dir_, kIdentity), DumpJson(j), 0600);
}

Result<std::optional<CurrentJob>> StateDir::LoadCurrentJob() {
  std::lock_guard<std::mutex> lock(mu_);
  Result<std::string> text = files::ReadAll(files::Join(dir_, kCurrentJob), 1 << 20);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return std::optional<CurrentJob>();
    return text.status();
  }
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Corruption("current_job.json: " + j.status().message());
  CurrentJob job;
  FieldReader f(*j, "current_job.");
  f.String("job_id", &job.job_id, true);
  f.Int("epoch", &job.epoch, true, 0, INT64_MAX);
  if (!f.ok()) return Status::Corruption(f.status().message());
  auto pending = j->find("pending");
  if (pending != j->end() && pending->is_array()) {
    for (const Json& p : *pending) {
      PendingUpload u;
      FieldReader pr(p, "pending.");
      pr.Int("step", &u.step, true, 0, INT64_MAX);
      pr.String("archive", &u.archive, true, 4096);
      pr.String("sha256", &u.sha256, true, 64);
      pr.Int("size", &u.size, true, 0, INT64_MAX);
      if (!pr.ok()) return Status::Corruption(pr.status().message());
      if (p.contains("outputs")) {
        Result<std::vector<ManifestFile>> outputs = ParseOutputList(p["outputs"]);
        if (!outputs.ok()) return Status::Corruption("pending: " + outputs.status().message());
        u.outputs = std::move(*outputs);
      }
      job.pending.push_back(u);
    }
  }
  return std::optional<CurrentJob>(job);
}

Status StateDir::SaveCurrentJob(const CurrentJob& job) {
  std::lock_guard<std::mutex> lock(mu_);
  return files::WriteDurable(files::Join(dir_, kCurrentJob), DumpJson(JobToJson(job)), 0600);
}

Status StateDir::ClearCurrentJob() {
  std::lock_guard<std::mutex> lock(mu_);
  GLEANER_RETURN_IF_ERROR(files::RemoveTree(files::Join(dir_, kCurrentJob)));
  return files::Fsync(dir_);
}

Status StateDir::AddPending(const std::string& job_id, int64_t epoch, const PendingUpload& p) {
  Result<std::optional<CurrentJob>> cur = LoadCurrentJob();
  if (!cur.ok()) return cur.status();
  CurrentJob job = cur->value_or(CurrentJob{job_id, epoch, {}});
  if (job.job_id != job_id || job.epoch != epoch) job = CurrentJob{job_id, epoch, {}};
  job.pending.push_back(p);
  return SaveCurrentJob(job);
}

Status StateDir::RemovePending(const std::string& job_id, int64_t epoch, int64_t step) {
  Result<std::optional<CurrentJob>> cur = LoadCurrentJob();
  if (!cur.ok()) return cur.status();
  if (!cur->has_value() || (*cur)->job_id != job_id || (*cur)->epoch != epoch) {
    return Status::Ok();
  }
  CurrentJob job = **cur;
  std::vector<PendingUpload> keep;
  for (const PendingUpload& p : job.pending) {
    if (p.step != step) keep.push_back(p);
  }
  job.pending = keep;
  return SaveCurrentJob(job);
}

std::string DetectMachineId(const std::string& machine_id_file) {
  const char* salad = std::getenv("SALAD_MACHINE_ID");
  if (salad != nullptr && *salad != '\0') return salad;
  Result<std::string> text = files::ReadAll(machine_id_file, 4096);
  std::string raw = text.ok() ? *text : "";
  while (!raw.empty() && (raw.back() == '\n' || raw.back() == ' ')) raw.pop_back();
  if (raw.empty()) return "";
  // Never send the raw machine id: a stable, app-specific hash of it.
  return "mid-" + Sha256Hex("gleaner-agent:" + raw).substr(0, 32);
}

}  // namespace gleaner::agent
