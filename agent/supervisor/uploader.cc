#include "agent/supervisor/uploader.h"

#include "agent/protocol/checkpoint_dir.h"
#include "agent/protocol/sample_set.h"
#include "agent/supervisor/archive.h"
#include "agent/supervisor/log.h"
#include "agent/supervisor/retry.h"
#include "shared/native/files.h"

namespace gleaner::agent {

CheckpointUploader::CheckpointUploader(CoordinatorApi* api, StateDir* state, std::string job_id,
                                       int64_t epoch, std::string work_dir, int keep)
    : api_(api),
      state_(state),
      job_id_(std::move(job_id)),
      epoch_(epoch),
      work_dir_(std::move(work_dir)),
      keep_(keep < 1 ? 1 : keep) {
  thread_ = std::thread([this] { Loop(); });
}

CheckpointUploader::~CheckpointUploader() {
  Abort();
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void CheckpointUploader::Enqueue(int64_t step, const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  Item item;
  item.step = step;
  item.dir = dir;
  queue_.push_back(item);
  cv_.notify_all();
}

void CheckpointUploader::EnqueuePacked(const PendingUpload& p) {
  std::lock_guard<std::mutex> lock(mu_);
  Item item;
  item.step = p.step;
  item.packed = p;
  queue_.push_back(item);
  cv_.notify_all();
}

void CheckpointUploader::EnqueueSamples(int64_t step, const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  Item item;
  item.step = step;
  item.dir = dir;
  item.samples = true;
  queue_.push_back(item);
  cv_.notify_all();
}

void CheckpointUploader::DropCheckpointsBefore(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<Item> kept;
  for (Item& item : queue_) {
    if (item.samples || item.step >= step) kept.push_back(std::move(item));
  }
  queue_.swap(kept);
  cv_.notify_all();
}

bool CheckpointUploader::Drain(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                      [this] { return queue_.empty() && !busy_; });
}

void CheckpointUploader::Abort() {
  abort_.Request();
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
  cv_.notify_all();
}

void CheckpointUploader::Loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      busy_ = false;
      cv_.notify_all();
      cv_.wait(lock, [this] { return quit_ || !queue_.empty(); });
      if (quit_) return;
      item = queue_.front();
      queue_.pop_front();
      busy_ = true;
    }
    if (abort_.requested() || lease_lost_) continue;
    const char* what = item.samples ? "samples" : "checkpoint";
    Status s = item.samples ? UploadSamples(item) : Upload(&item);
    if (s.ok() && item.samples) {
      Log("job %s: samples of step %lld committed", job_id_.c_str(),
          static_cast<long long>(item.step));
      files::RemoveTree(item.dir);
      continue;
    }
    if (s.ok()) {
      last_committed_ = item.step;
      committed_.push_back(item.step);
      state_->RemovePending(job_id_, epoch_, item.step);
      Log("job %s: checkpoint step %lld committed", job_id_.c_str(),
          static_cast<long long>(item.step));
      Prune();
    } else if (s.code() == Code::kConflict) {
      Log("job %s: %s step %lld refused (%s): lease lost", job_id_.c_str(), what,
          static_cast<long long>(item.step), s.message().c_str());
      lease_lost_ = true;
      std::lock_guard<std::mutex> lock(mu_);
      queue_.clear();
    } else {
      Log("job %s: %s step %lld not uploaded: %s", job_id_.c_str(), what,
          static_cast<long long>(item.step), s.ToString().c_str());
    }
  }
}

Status CheckpointUploader::Upload(Item* item) {
  if (!item->dir.empty()) {
    files::MakeDirs(files::Join(work_dir_, "uploads"));
    std::string archive =
        files::Join(files::Join(work_dir_, "uploads"), std::to_string(item->step) + ".gckpt");
    Result<CheckpointManifest> m = PackCheckpoint(item->dir, archive);
    if (!m.ok()) return m.status();
    Result<files::FileDigest> d = files::Digest(archive);
    if (!d.ok()) return d.status();
    item->packed = PendingUpload{item->step, archive, d->sha256, d->size, {}};
    // The checkpoint of the last step is committed with the files it exports to.
    Result<std::vector<ManifestFile>> outputs = ManifestOutputs(*m);
    if (outputs.ok()) item->packed.outputs = std::move(*outputs);
    if (!outputs.ok() && outputs.status().code() != Code::kNotFound) return outputs.status();
    GLEANER_RETURN_IF_ERROR(state_->AddPending(job_id_, epoch_, item->packed));
  } else {
    // Packed before a restart: it must still be the archive that was recorded.
    Result<files::FileDigest> d = files::Digest(item->packed.archive);
    if (!d.ok() || d->sha256 != item->packed.sha256 || d->size != item->packed.size) {
      return Status::Corruption("the packed archive " + item->packed.archive +
                                " is damaged on disk; dropping it");
    }
  }
  const PendingUpload& p = item->packed;
  auto give_up = [this] { return abort_.requested(); };
  std::string url;
  Status s = Retry(
      "checkpoint url",
      [&] {
        Result<std::string> u = api_->CreateCheckpoint(job_id_, epoch_, p.step, p.size);
        if (u.ok()) url = *u;
        return u.status();
      },
      give_up, &abort_);
  if (!s.ok()) return s;
  s = Retry(
      "checkpoint upload", [&] { return api_->PutFile(url, p.archive); }, give_up, &abort_);
  if (!s.ok()) return s;
  return Retry(
      "checkpoint commit",
      [&] { return api_->CommitCheckpoint(job_id_, epoch_, p.step, p.sha256, p.size, p.outputs); },
      give_up, &abort_);
}

Status CheckpointUploader::UploadSamples(const Item& item) {
  Result<train::SampleSet> set = train::VerifySampleDir(item.dir);
  if (!set.ok()) return set.status();
  if (set->step != item.step) return Status::Corruption("sample set is of another step");
  auto give_up = [this] { return abort_.requested(); };
  std::vector<SampleFile> images;
  for (int i = 0; i < int(set->prompts.size()); ++i) {
    const std::string path = files::Join(item.dir, train::SampleImageName(i));
    Result<files::FileDigest> d = files::Digest(path);
    if (!d.ok()) return d.status();
    std::string url;
    Status s = Retry(
        "sample url",
        [&] {
          Result<std::string> u = api_->CreateSample(job_id_, epoch_, item.step, i);
          if (u.ok()) url = *u;
          return u.status();
        },
        give_up, &abort_);
    if (s.ok()) {
      s = Retry(
          "sample upload", [&] { return api_->PutFile(url, path); }, give_up, &abort_);
    }
    if (!s.ok()) return s;
    const train::SamplePrompt& p = set->prompts[size_t(i)];
    images.push_back(SampleFile{p.prompt, p.negative_prompt, d->sha256, d->size});
  }
  return Retry(
      "samples commit",
      [&] {
        return api_->CommitSamples(job_id_, epoch_, item.step, set->seed, set->seconds, images);
      },
      give_up, &abort_);
}

void CheckpointUploader::Prune() {
  while (int(committed_.size()) > keep_) {
    int64_t old = committed_.front();
    committed_.pop_front();
    files::RemoveTree(train::CheckpointDirFor(work_dir_, old));
    files::RemoveTree(
        files::Join(files::Join(work_dir_, "uploads"), std::to_string(old) + ".gckpt"));
  }
}

}  // namespace gleaner::agent
