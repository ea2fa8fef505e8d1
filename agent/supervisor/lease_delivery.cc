#include "agent/supervisor/lease_delivery.h"

#include <string>
#include <vector>

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/trainer_protocol.h"
#include "agent/supervisor/archive.h"
#include "agent/supervisor/lease_recovery.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/retry.h"
#include "shared/native/files.h"

namespace gleaner::agent {

JobOutcome Complete(LeaseRun* run) {
  const Assignment& job = run->job;
  auto give_up = [run] { return run->GiveUp(); };
  if (CheckpointUploader* uploader = run->uploader.get()) {
    // The checkpoint of the last step supersedes any pending one before it, and must be
    // committed (with the outputs it exports to) before the job completes; the samples (the
    // final ones last) are part of the result, so they go up before it too.
    uploader->DropCheckpointsBefore(job.steps);
    while (!uploader->Drain(0.2)) {
      run->Apply(run->Tick());
      if (run->GiveUp()) {  // the lease ran out (or the deadline came) while they were uploading
        Log("job %s: sample upload not finished in time", job.job_id.c_str());
        break;
      }
    }
    if (uploader->lease_lost()) run->Apply(run->Event(JobEvent::Type::kLeaseRefused));
    uploader->Abort();
    if (!run->state().held()) return Lost(run);
  }
  std::string out_dir = train::OutputDirFor(run->work_dir);
  Result<CheckpointManifest> m = train::VerifyCheckpointDir(out_dir);
  if (!m.ok()) {
    return ReportFailure(run, "trainer output failed verification: " + m.status().message(),
                         FailCause::kNode);
  }
  std::vector<OutputFile> outputs;
  for (const ManifestFile& f : m->files) {
    std::string url;
    Status s = Retry(
        "output url " + f.name,
        [&] {
          Result<std::string> u = run->api->CreateOutput(job.job_id, job.epoch, f.name, f.size);
          if (u.ok()) url = *u;
          return u.status();
        },
        give_up, nullptr);
    if (s.ok()) {
      s = Retry(
          "output upload " + f.name,
          [&] { return run->api->PutFile(url, files::Join(out_dir, f.name)); }, give_up, nullptr);
    }
    if (s.code() == Code::kConflict) {
      run->Apply(run->Event(JobEvent::Type::kLeaseRefused));
      return Lost(run);
    }
    if (!s.ok()) {
      Log("job %s: output %s not uploaded: %s", job.job_id.c_str(), f.name.c_str(),
          s.ToString().c_str());
      return JobOutcome::kAbandoned;
    }
    outputs.push_back(f);
  }
  run->Apply(run->Event(JobEvent::Type::kFinishing));
  // The coordinator completes a job only once its last step is reported (the heartbeat thread
  // may not have sent the trainer's final step yet).
  Status s = Retry(
      "final heartbeat",
      [&] {
        int64_t step = 0;
        double loss = 0;
        bool has_loss = false;
        run->Progress(&step, &loss, &has_loss);
        return run->api->Heartbeat(job.job_id, job.epoch, step, loss, has_loss).status();
      },
      give_up, nullptr);
  if (s.ok()) {
    s = Retry(
        "complete", [&] { return run->api->Complete(job.job_id, job.epoch, outputs); }, give_up,
        nullptr);
  }
  if (s.code() == Code::kConflict) return Lost(run);
  if (!s.ok()) {
    Log("job %s: complete not accepted: %s", job.job_id.c_str(), s.ToString().c_str());
    return JobOutcome::kAbandoned;
  }
  run->state_dir->ClearCurrentJob();
  files::RemoveTree(run->work_dir);
  run->RemoveJobCache();
  Log("job %s: completed (%zu output files)", job.job_id.c_str(), outputs.size());
  return JobOutcome::kCompleted;
}

JobOutcome CommitReplay(LeaseRun* run) {
  const Assignment& job = run->job;
  const std::string dir = train::CheckpointDirFor(run->work_dir, job.stop_step);
  const std::string archive = files::Join(run->work_dir, "replay.gckpt");
  Result<CheckpointManifest> m = PackCheckpoint(dir, archive);
  if (m.ok() && m->step != job.stop_step) m = Status::Corruption("it holds another step");
  if (!m.ok()) return Drop(run, "the replayed checkpoint: " + m.status().message());
  // A replay of the last segment also exported the output: its files are committed too, and
  // must be the ones its checkpoint records.
  std::vector<OutputFile> outputs;
  if (job.stop_step == job.steps) {
    Result<std::vector<ManifestFile>> recorded = ManifestOutputs(*m);
    Result<CheckpointManifest> out = train::VerifyCheckpointDir(train::OutputDirFor(run->work_dir));
    if (!recorded.ok()) {
      return Drop(run, "the replayed checkpoint: " + recorded.status().message());
    }
    if (!out.ok()) return Drop(run, "the replay's output: " + out.status().message());
    if (!SameFiles(*recorded, out->files)) {
      return Drop(run, "the replay's output differs from the outputs its checkpoint records");
    }
    outputs = out->files;
  }
  Result<files::FileDigest> d = files::Digest(archive);
  if (!d.ok()) return Drop(run, "the replayed checkpoint: " + d.status().message());
  auto give_up = [run] { return run->GiveUp(); };
  const StopToken* wake = &run->sd->stop;
  std::string url;
  Status s = Retry(
      "replay checkpoint url",
      [&] {
        Result<std::string> u = run->api->VerificationCheckpointUrl(job.verification_id, job.epoch);
        if (u.ok()) url = *u;
        return u.status();
      },
      give_up, wake);
  if (s.ok()) {
    s = Retry(
        "replay checkpoint upload", [&] { return run->api->PutFile(url, archive); }, give_up, wake);
  }
  if (s.ok()) {
    // A retried commit of the same result is answered 200; a 409 from here on is the lease.
    run->Apply(run->Event(JobEvent::Type::kFinishing));
    s = Retry(
        "replay commit",
        [&] {
          return run->api->VerificationCommit(job.verification_id, job.epoch, d->sha256, d->size,
                                              outputs);
        },
        give_up, wake);
  }
  if (s.code() == Code::kConflict) {
    run->Apply(run->Event(JobEvent::Type::kLeaseRefused));
    return Lost(run);
  }
  if (!s.ok()) return Drop(run, "the replayed checkpoint was not delivered: " + s.ToString());
  files::RemoveTree(run->work_dir);
  Log("%s: committed the checkpoint of step %lld (sha256 %s)", run->What().c_str(),
      static_cast<long long>(job.stop_step), d->sha256.c_str());
  return JobOutcome::kCompleted;
}

}  // namespace gleaner::agent
