#include "agent/supervisor/lease_prepare.h"

#include <functional>
#include <map>
#include <set>
#include <utility>

#include "agent/supervisor/archive.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/retry.h"
#include "shared/model_manifest.h"
#include "shared/native/files.h"

namespace gleaner::agent {
namespace {

// Runs download(*obj) with retries; when storage refuses the URL (403: it expired during an
// earlier long download), asks the coordinator once for fresh URLs and tries again.
Status Download(LeaseRun* run, const std::string& what, RemoteObject* obj,
                const std::function<Status(const RemoteObject&)>& download) {
  Assignment& job = run->job;
  const ShutdownState* sd = run->sd;
  auto give_up = [run, sd] { return run->GiveUp() || sd->stop.requested(); };
  auto attempt = [&] { return download(*obj); };
  Status s = Retry(what, attempt, give_up, &sd->stop);
  // A verification lease has no route that mints its URLs again.
  if (s.code() != Code::kPermissionDenied || run->replay()) return s;
  Log("job %s: %s: URL refused (%s); asking for fresh URLs", job.job_id.c_str(), what.c_str(),
      s.message().c_str());
  Result<Downloads> fresh = Status::Unavailable("not asked");
  Status asked = Retry(
      "fresh download URLs",
      [&] {
        fresh = run->api->FreshDownloads(job.job_id, job.epoch);
        return fresh.status();
      },
      give_up, &sd->stop);
  if (asked.code() == Code::kConflict) {
    Log("job %s: fresh URLs refused (%s)", job.job_id.c_str(), asked.message().c_str());
    run->Apply(run->Event(JobEvent::Type::kLeaseRefused));
  }
  if (!asked.ok()) return asked;
  for (const RemoteObject& in : fresh->inputs) {
    for (RemoteObject& mine : job.inputs) {
      if (mine.name == in.name && mine.sha256 == in.sha256) mine.url = in.url;
    }
  }
  if (job.resume && fresh->resume && fresh->resume->sha256 == job.resume->sha256) {
    job.resume->url = fresh->resume->url;
  }
  return Retry(what, attempt, give_up, &sd->stop);
}

}  // namespace

Status CheckModelFormat(const Assignment& job) {
  for (const RemoteObject& in : job.inputs) {
    if (in.name != "model" || IsKnownModelFormat(in.format)) continue;
    return Status::Invalid("model format '" + in.format + "' is not supported by this agent (" +
                           kModelFormatDiffusers + ", " + kModelFormatUnetSafetensors + ")");
  }
  return Status::Ok();
}

Status PrepareInputs(LeaseRun* run, std::vector<TrainerInput>* inputs) {
  const std::string& job_id = run->job.job_id;
  std::set<std::string> keep;
  // A folder input (a diffusers model's files) is fetched file by file into the cache, then
  // linked into work_dir/<name>/ in its layout; the trainer gets that directory.
  struct Folder {
    std::vector<std::string> paths, files;
    std::string format;
  };
  std::map<std::string, Folder> folders;
  for (RemoteObject& in : run->job.inputs) {
    std::string path;
    std::string what = "input " + in.name + (in.path.empty() ? "" : "/" + in.path);
    Status s = Download(run, what, &in, [&](const RemoteObject& o) {
      Result<std::string> p = run->cache->Fetch(run->api, o);
      if (p.ok()) path = *p;
      return p.status();
    });
    if (!s.ok() && in.remote) {
      // A file on a host the developer chose: what it answered (status, bytes, sizes, hashes)
      // or that it could not be reached stays in this log, never in the job's failure reason.
      Log("job %s: %s: %s", job_id.c_str(), what.c_str(), s.ToString().c_str());
      return Status(s.code(), kModelFileUnavailable);
    }
    if (!s.ok()) return Status(s.code(), what + ": " + s.message());
    keep.insert(path);
    if (in.path.empty()) {
      inputs->push_back({in.name, path, in.format});
      continue;
    }
    Folder& f = folders[in.name];
    f.paths.push_back(in.path);
    f.files.push_back(path);
    f.format = in.format;
  }
  for (const auto& [name, f] : folders) {
    std::string dir = files::Join(run->work_dir, "inputs/" + name);
    Status s = MaterializeFolder(dir, f.paths, f.files);
    if (!s.ok()) return Status(Code::kIo, "input " + name + ": " + s.message());
    inputs->push_back({name, dir, f.format});
  }
  run->cache->Evict(keep);
  return Status::Ok();
}

std::string PrepareResume(LeaseRun* run) {
  Assignment& job = run->job;
  if (!job.resume) return "";
  std::string archive = files::Join(run->work_dir, "resume.gckpt");
  std::string dir = files::Join(run->work_dir, "resume");
  Status s = Download(run, "resume checkpoint", &*job.resume, [&](const RemoteObject& r) {
    return DownloadVerified(run->api, r.url, r.sha256, r.size, archive);
  });
  if (s.ok()) {
    Result<CheckpointManifest> m = UnpackCheckpoint(archive, dir);
    if (!m.ok()) {
      s = m.status();
    } else if (m->step != job.resume_step) {
      s = Status::Corruption("archive holds step " + std::to_string(m->step));
    }
  }
  files::RemoveTree(archive);
  if (!s.ok() && (run->sd->stop.requested() || !run->state().held())) return "";  // stops next
  if (!s.ok()) {
    Log("%s: resume checkpoint step %lld failed verification (%s); starting from scratch",
        run->What().c_str(), static_cast<long long>(job.resume_step), s.ToString().c_str());
    job.resume.reset();
    job.resume_step = 0;
    files::RemoveTree(dir);
    return "";
  }
  Log("%s: resuming from checkpoint step %lld (sha256 verified)", run->What().c_str(),
      static_cast<long long>(job.resume_step));
  return dir;
}

TrainerSpec SpecFor(const Assignment& job, std::vector<TrainerInput> inputs,
                    const std::string& resume_dir) {
  TrainerSpec spec;
  spec.job_id = job.job_id;
  spec.kind = job.kind;
  spec.params = job.params;
  spec.steps = job.steps;
  spec.epoch = job.epoch;
  spec.inputs = std::move(inputs);
  auto config = job.model.find("config");
  if (config != job.model.end() && config->is_object()) spec.model_config = *config;
  if (!resume_dir.empty()) {
    spec.resume_dir = resume_dir;
    spec.resume_step = job.resume_step;
  }
  if (!job.verification_id.empty()) spec.stop_at_step = job.stop_step;
  return spec;
}

Result<std::string> WriteSpec(const TrainerSpec& spec, const std::string& work_dir) {
  GLEANER_RETURN_IF_ERROR(spec.Validate());
  std::string path = files::Join(work_dir, "SPEC.json");
  Status s = files::WriteDurable(path, DumpJson(spec.ToJson()));
  if (!s.ok()) return Status(Code::kIo, s.message());
  return path;
}

}  // namespace gleaner::agent
