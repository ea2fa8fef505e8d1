#include "agent/supervisor/owner_gate.h"

#include "agent/supervisor/log.h"
#include "shared/json.h"
#include "shared/native/files.h"

namespace gleaner::agent {

OwnerGate::OwnerGate(OwnerControls controls, std::unique_ptr<OwnerReadingSource> source,
                     std::string owner_file, StatusBoard* board, HandBack* hand_back,
                     double hand_back_deadline_s)
    : source_(std::move(source)),
      owner_file_(std::move(owner_file)),
      board_(board),
      hand_back_(hand_back),
      hand_back_deadline_s_(hand_back_deadline_s),
      policy_(std::move(controls)) {}

OwnerGate::~OwnerGate() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

Status OwnerGate::Start() {
  Result<std::string> text = files::ReadAll(owner_file_, 1 << 16);
  Status status = Status::Ok();
  if (text.ok()) {
    Result<Json> j = ParseJson(*text);
    bool p = false;
    if (j.ok()) {
      FieldReader f(*j, "owner.");
      f.Bool("paused", &p, true);
      if (!f.ok()) status = Status::Corruption(f.status().message());
    } else {
      status = Status::Corruption("owner.json: " + j.status().message());
    }
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = p;
  } else if (text.status().code() != Code::kNotFound) {
    status = text.status();
  }
  EvaluateNow();
  thread_ = std::thread([this] { Loop(); });
  return status;
}

void OwnerGate::EvaluateNow() {
  std::lock_guard<std::mutex> eval(eval_mu_);
  OwnerReadings r;
  source_->Read(policy_.controls(), &r);
  r.paused = paused();
  OwnerDecision d = policy_.Evaluate(r);
  std::string before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    before = decision_.reason;
    decision_ = d;
    cv_.notify_all();
  }
  if (d.reason != before) {
    Log("owner controls: %s", d.allowed ? "work allowed" : ("not working: " + d.reason).c_str());
  }
  board_->SetBlocked(d.reason);
  if (!d.allowed) hand_back_->Request(d.reason, hand_back_deadline_s_);
}

void OwnerGate::Loop() {
  double interval = policy_.controls().check_interval_s;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::duration<double>(interval),
                   [this] { return quit_ || wake_; });
      if (quit_) return;
      wake_ = false;
    }
    EvaluateNow();
  }
}

bool OwnerGate::WaitAllowed(const StopToken& stop) {
  for (;;) {
    if (stop.requested()) return false;
    std::unique_lock<std::mutex> lock(mu_);
    if (decision_.allowed) return true;
    // Woken by every evaluation; the timeout bounds how late a shutdown is noticed.
    cv_.wait_for(lock, std::chrono::seconds(1));
  }
}

OwnerDecision OwnerGate::decision() const {
  std::lock_guard<std::mutex> lock(mu_);
  return decision_;
}

bool OwnerGate::paused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return paused_;
}

Status OwnerGate::SetPaused(bool paused) {
  Status s = files::WriteDurable(owner_file_, DumpJson(Json{{"paused", paused}}), 0600);
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = paused;
  }
  Log("owner: %s", paused ? "paused" : "resumed");
  EvaluateNow();
  return s;
}

std::string OwnerGate::HandleCommand(const std::string& command) {
  if (command == "pause" || command == "resume") {
    Status s = SetPaused(command == "pause");
    Json j = {{"ok", true}, {"paused", command == "pause"}};
    if (!s.ok()) j["warning"] = "pause flag not saved: " + s.message();
    return DumpJson(j);
  }
  if (command == "status") {
    Json j = board_->Snapshot();
    j["paused"] = paused();
    return DumpJson(j);
  }
  return DumpJson(Json{{"error", "unknown command '" + command.substr(0, 64) + "'"}});
}

}  // namespace gleaner::agent
