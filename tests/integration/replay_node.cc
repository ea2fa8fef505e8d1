#include "tests/integration/replay_node.h"

#include <sstream>

#include "shared/sha256.h"

namespace gleaner::testing {
namespace {

std::string Init(const std::string& job) {
  Digest d = Sha256Of("init " + job);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

std::string Next(const std::string& state, int64_t s) {
  Digest d = Sha256Of(state + " " + std::to_string(s));
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

std::string Chain(const std::string& job, int64_t steps) {
  std::string st = Init(job);
  for (int64_t s = 1; s <= steps; ++s) st = Next(st, s);
  return st;
}

std::string CkptText(const std::string& job, int64_t step, const std::string& state) {
  return "replay-ckpt " + job + " " + std::to_string(step) + " " +
         HexEncode(state.data(), state.size());
}

}  // namespace

std::string ReplayNode::HonestCheckpoint(const std::string& job, int64_t step) {
  return CkptText(job, step, Chain(job, step));
}

std::string ReplayNode::HonestOutput(const std::string& job, int64_t steps) {
  std::string st = Chain(job, steps);
  return "replay-out " + job + " " + HexEncode(st.data(), st.size());
}

ReplayNode::ReplayNode(std::string id, HttpClient client, Forgery forgery, int64_t checkpoint_every)
    : id_(std::move(id)), client_(std::move(client)), forgery_(forgery), every_(checkpoint_every) {}

bool ReplayNode::Step(std::string* error) {
  if (!work_) return Poll(error);
  return Advance(error);
}

bool ReplayNode::Expected(const HttpResult& r, const char* what, std::string* error) {
  if (r.status == 409) {
    work_.reset();  // the lease is lost (rewound, taken over): drop everything
    return true;
  }
  *error = id_ + ": " + what + ": " + r.Describe();
  return false;
}

bool ReplayNode::Poll(std::string* error) {
  HttpResult r = client_.Post("/v1/work", {{"verify", true}});
  if (r.status == 204) {
    if (r.Header("gleaner-node-state") == "quarantined") saw_quarantine_ = true;
    return true;
  }
  if (r.status != 200) {
    *error = id_ + ": work: " + r.Describe();
    return false;
  }
  Json c = r.json();
  Work w;
  w.claim = c;
  w.job = c["job"]["id"].get<std::string>();
  w.steps = c["job"]["steps"].get<int64_t>();
  w.epoch = c["lease"]["epoch"].get<int64_t>();
  w.stop_step = w.steps;
  if (c.contains("verification")) {
    w.verification = c["verification"]["id"].get<std::string>();
    w.stop_step = c["verification"]["stop_step"].get<int64_t>();
  }
  w.state = Init(w.job);
  if (c.contains("resume")) {
    const Json& res = c["resume"];
    HttpResult got = HttpClient::Fetch("GET", res["url"].get<std::string>());
    if (got.status != 200 || Sha256Hex(got.body) != res["sha256"].get<std::string>()) {
      *error = id_ + ": resume download: " + got.Describe();
      return false;
    }
    std::istringstream in(got.body);
    std::string magic, job, hex;
    int64_t step = 0;
    in >> magic >> job >> step >> hex;
    std::string raw;
    if (magic != "replay-ckpt" || step != res["step"].get<int64_t>() || !HexDecode(hex, &raw)) {
      *error = id_ + ": resume checkpoint unreadable: " + got.body;
      return false;
    }
    w.step = step;
    w.state = raw;
  }
  work_ = std::move(w);
  return true;
}

std::string ReplayNode::CheckpointText(const Work& w) const {
  std::string st = w.state;
  // A bit pattern of this node's own: two perturbing nodes forge independently (they do not
  // collude by accident).
  if (forgery_ == Forgery::kPerturb) st[0] = char(st[0] ^ (1 + Sha256Of(id_)[0] % 255));
  if (forgery_ == Forgery::kOtherJob) return HonestCheckpoint(w.job + "-other", w.step);
  return CkptText(w.job, w.step, st);
}

std::string ReplayNode::OutputText(const Work& w) const {
  if (forgery_ == Forgery::kForgeOutput) return "replay-out forged by " + id_ + " for " + w.job;
  return "replay-out " + w.job + " " + HexEncode(w.state.data(), w.state.size());
}

Json ReplayNode::OutputList(const Work& w) const {
  const std::string out = OutputText(w);
  return Json::array(
      {{{"name", "out.txt"}, {"sha256", Sha256Hex(out)}, {"size", int64_t(out.size())}}});
}

bool ReplayNode::PutAndCommit(const std::string& url_path, const Json& url_body,
                              const std::string& commit_path, Json commit_body,
                              const std::string& text, std::string* error) {
  HttpResult u = client_.Post(url_path, url_body);
  if (u.status != 200) return Expected(u, "upload URL", error);
  HttpResult put = HttpClient::Fetch("PUT", u.json()["url"].get<std::string>(), text);
  if (put.status < 200 || put.status > 299) {
    *error = id_ + ": PUT: " + put.Describe();
    return false;
  }
  commit_body["sha256"] = Sha256Hex(text);
  commit_body["size"] = int64_t(text.size());
  HttpResult c = client_.Post(commit_path, commit_body);
  if (c.status != 200) return Expected(c, "commit", error);
  return true;
}

bool ReplayNode::Advance(std::string* error) {
  Work& w = *work_;
  const bool verifying = !w.verification.empty();
  const std::string base = verifying ? "/v1/verifications/" + w.verification : "/v1/jobs/" + w.job;
  HttpResult hb = client_.Post(base + "/heartbeat", {{"epoch", w.epoch}, {"step", w.step}});
  if (hb.status != 200) return Expected(hb, "heartbeat", error);
  if (hb.json().value("cancel", false)) {
    work_.reset();
    return true;
  }
  // Resumed at the last step's checkpoint: only its export is left to deliver.
  if (!verifying && w.step == w.steps) return Finish(error);
  // One checkpoint interval of "training".
  const int64_t target = std::min(w.stop_step, (w.step / every_ + 1) * every_);
  for (int64_t s = w.step + 1; s <= target; ++s) {
    if (forgery_ == Forgery::kSkipSteps && s % 2 == 1) continue;
    w.state = Next(w.state, s);
  }
  (verifying ? steps_replayed_ : steps_trained_) += target - w.step;
  w.step = target;
  const std::string text = CheckpointText(w);
  const bool last = w.step == w.steps;
  const bool forged = forgery_ != Forgery::kNone && (forgery_ != Forgery::kForgeOutput || last);
  // The last step's checkpoint (or its replay) comes with its export.
  Json commit = {{"epoch", w.epoch}};
  if (last) commit["outputs"] = OutputList(w);
  if (verifying) {
    if (w.step < w.stop_step) return true;
    const std::string vid = w.verification, job = w.job;
    const int64_t step = w.step;
    if (!PutAndCommit(base + "/checkpoint", {{"epoch", w.epoch}}, base + "/commit", commit, text,
                      error)) {
      return false;
    }
    if (work_)
      uploads_.push_back(
          {job, step, Sha256Hex(text), forged, true, commit.value("outputs", Json())});
    if (work_) ++verifications_done_;
    work_.reset();
    return true;
  }
  const std::string job = w.job;
  const int64_t step = w.step;
  if (!PutAndCommit(base + "/checkpoints", {{"epoch", w.epoch}, {"step", w.step}},
                    base + "/checkpoints/" + std::to_string(w.step) + "/commit", commit, text,
                    error)) {
    return false;
  }
  if (!work_) return true;  // lost meanwhile
  uploads_.push_back({job, step, Sha256Hex(text), forged, false, commit.value("outputs", Json())});
  if (w.step < w.steps) return true;
  return Finish(error);
}

bool ReplayNode::Finish(std::string* error) {
  Work& w = *work_;
  const std::string base = "/v1/jobs/" + w.job;
  const std::string out = OutputText(w);
  HttpResult u = client_.Post(base + "/outputs", {{"epoch", w.epoch}, {"name", "out.txt"}});
  if (u.status != 200) return Expected(u, "output URL", error);
  HttpResult put = HttpClient::Fetch("PUT", u.json()["url"].get<std::string>(), out);
  if (put.status < 200 || put.status > 299) {
    *error = id_ + ": output PUT: " + put.Describe();
    return false;
  }
  HttpResult c = client_.Post(base + "/complete", {{"epoch", w.epoch}, {"outputs", OutputList(w)}});
  if (c.status != 200) return Expected(c, "complete", error);
  work_.reset();
  return true;
}

}  // namespace gleaner::testing
