#include "agent/supervisor/api.h"

#include <cstdlib>

#include "shared/model_manifest.h"
#include "shared/release_manifest.h"

namespace gleaner::agent {

Status StatusFromHttp(int status, const std::string& body) {
  if (status >= 200 && status < 300) return Status::Ok();
  std::string message = "HTTP " + std::to_string(status), code;
  Result<Json> j = ParseJson(body);
  if (j.ok() && j->is_object()) {
    auto e = j->find("error");
    if (e != j->end() && e->is_object()) {
      auto c = e->find("code");
      if (c != e->end() && c->is_string()) code = c->get<std::string>();
      auto m = e->find("message");
      if (m != e->end() && m->is_string()) message += ": " + m->get<std::string>();
    }
  }
  // A checkpoint older than the committed one is refused with 409 but the lease is still ours.
  if (status == 409 && code == "stale_checkpoint") return Status::Invalid(message);
  if (status == 409) return Status::Conflict(message);
  if (status == 401) return Status(Code::kUnauthenticated, message);
  if (status == 403) return Status(Code::kPermissionDenied, message);
  if (status == 404) return Status::NotFound(message);
  if (status == 429 || status >= 500) return Status::Unavailable(message);
  return Status::Invalid(message);
}

CoordinatorApi::CoordinatorApi(net::HttpClient* http, std::string base_url)
    : http_(http), base_(std::move(base_url)) {
  while (!base_.empty() && base_.back() == '/') base_.pop_back();
}

std::string CoordinatorApi::Resolve(const std::string& url) const {
  if (!url.empty() && url[0] == '/') return base_ + url;
  return url;
}

Result<Json> CoordinatorApi::Call(const std::string& method, const std::string& path,
                                  const Json& body, net::HttpResponse* raw, int timeout_ms) {
  net::HttpCall call;
  call.timeout_ms = timeout_ms;
  call.method = method;
  call.url = base_ + path;
  call.body = DumpJson(body);
  call.headers.push_back({"Content-Type", "application/json"});
  if (!token_.empty()) call.headers.push_back({"Authorization", "Bearer " + token_});
  Result<net::HttpResponse> resp = http_->Send(call);
  if (!resp.ok()) {
    if (resp.status().code() == Code::kUnavailable) return resp.status();
    return Status::Unavailable(resp.status().message());
  }
  if (raw != nullptr) *raw = *resp;
  GLEANER_RETURN_IF_ERROR(StatusFromHttp(resp->status, resp->body));
  if (resp->body.empty()) return Json::object();
  Result<Json> j = ParseJson(resp->body);
  if (!j.ok()) return Status::Unavailable("coordinator sent invalid JSON for " + path);
  return j;
}

Result<std::optional<std::string>> CoordinatorApi::AgentRelease(const std::string& platform,
                                                                const std::string& channel) {
  // Both names are [a-z0-9_-] (shared/release_manifest.h): no escaping needed.
  if (!release::IsValidPlatform(platform) || !release::IsValidChannel(channel)) {
    return Status::Invalid("bad platform or channel name");
  }
  Result<Json> j =
      Call("GET", "/v1/agent/release?platform=" + platform + "&channel=" + channel, Json());
  if (!j.ok()) {
    if (j.status().code() == Code::kNotFound) return std::optional<std::string>();
    return j.status();
  }
  auto r = j->find("release");
  if (r == j->end() || !r->is_object()) {
    return Status::Unavailable("coordinator sent a release without an envelope");
  }
  return std::optional<std::string>(DumpJson(*r));
}

Result<CoordinatorApi::Registration> CoordinatorApi::Register(
    const std::string& enroll_token, const std::string& machine_id, const std::string& gpu_name,
    int64_t vram_mb, const std::string& version, const std::string& node_secret) {
  std::string saved = token_;
  token_ = enroll_token;
  Json body = {{"machine_id", machine_id},
               {"gpu", {{"name", gpu_name}, {"vram_mb", vram_mb}}},
               {"agent_version", version}};
  if (!node_secret.empty()) body["node_secret"] = node_secret;
  if (!repro_class_.is_null()) body["repro_class"] = repro_class_;
  Result<Json> j = Call("POST", "/v1/nodes/register", body);
  token_ = saved;
  if (!j.ok()) return j.status();
  Registration r;
  FieldReader f(*j);
  f.String("node_id", &r.node_id, true, 256);
  f.String("token", &r.token, true, 1024);
  f.String("node_secret", &r.node_secret, false, 1024);
  if (!f.ok()) return Status::Unavailable("register: " + f.status().message());
  return r;
}

namespace {

bool ReadObject(const Json& j, const std::string& name, RemoteObject* out, Status* st) {
  FieldReader f(j, name + ".");
  out->name = name;
  f.String("url", &out->url, true, 8192);
  f.String("sha256", &out->sha256, true, 64);
  f.Int("size", &out->size, false, 0, int64_t(1) << 46);
  if (!f.ok()) {
    *st = f.status();
    return false;
  }
  return true;
}

// inputs.<name>.files: one object per file of a folder input, each with its path.
bool ReadFolder(const Json& files, const std::string& name, std::vector<RemoteObject>* out,
                Status* st) {
  if (!files.is_array() || files.empty() || files.size() > kMaxModelFiles) {
    *st = Status::Invalid(name + ".files must be a non-empty array");
    return false;
  }
  for (const Json& f : files) {
    RemoteObject o;
    if (!f.is_object() || !ReadObject(f, name, &o, st)) {
      if (st->ok()) *st = Status::Invalid(name + ".files holds a non-object");
      return false;
    }
    FieldReader r(f, name + ".files[].");
    r.String("path", &o.path, true, kMaxModelPathBytes);
    r.Bool("remote", &o.remote, false);
    if (r.ok() && !IsValidModelPath(o.path)) r.Fail("path '" + o.path + "' is not a safe path");
    if (!r.ok()) {
      *st = r.status();
      return false;
    }
    out->push_back(std::move(o));
  }
  return true;
}

// A heartbeat's answer (job or verification lease): {cancel?, ttl_s?}.
Result<HeartbeatReply> ParseHeartbeatReply(const Result<Json>& j) {
  if (!j.ok()) return j.status();
  HeartbeatReply r;
  auto c = j->find("cancel");
  r.cancel = c != j->end() && c->is_boolean() && c->get<bool>();
  auto ttl = j->find("ttl_s");
  if (ttl != j->end() && ttl->is_number() && ttl->get<double>() > 0) r.ttl_s = ttl->get<double>();
  return r;
}

}  // namespace

Result<Downloads> ParseDownloads(const Json& j) {
  Downloads d;
  auto inputs = j.find("inputs");
  if (inputs != j.end() && inputs->is_object()) {
    for (auto it = inputs->begin(); it != inputs->end(); ++it) {
      if (!it->is_object()) continue;
      RemoteObject o;
      Status st;
      auto files = it->find("files");
      // The model says its form; a coordinator that predates the field implies it by shape.
      std::string format;
      if (it.key() == "model") {
        FieldReader fr(*it, "model.");
        fr.String("format", &format, false, 64);
        if (!fr.ok()) return fr.status();
        if (format.empty()) {
          format = files != it->end() ? kModelFormatDiffusers : kModelFormatUnetSafetensors;
        }
      }
      if (files != it->end()) {
        const size_t first = d.inputs.size();
        if (!ReadFolder(*files, it.key(), &d.inputs, &st)) return st;
        for (size_t i = first; i < d.inputs.size(); ++i) d.inputs[i].format = format;
        continue;
      }
      if (!ReadObject(*it, it.key(), &o, &st)) return st;
      o.format = format;
      d.inputs.push_back(o);
    }
  }
  auto resume = j.find("resume");
  if (resume != j.end() && resume->is_object()) {
    RemoteObject o;
    Status st;
    if (!ReadObject(*resume, "resume", &o, &st)) return st;
    FieldReader rr(*resume, "resume.");
    rr.Int("step", &d.resume_step, true, 0, int64_t(1) << 40);
    if (!rr.ok()) return rr.status();
    d.resume = o;
  }
  return d;
}

Result<Assignment> ParseAssignment(const Json& j) {
  Assignment a;
  if (!j.is_object()) return Status::Invalid("work response is not an object");
  auto job = j.find("job");
  const Json* jobobj = &j;
  if (job != j.end() && job->is_object()) {
    jobobj = &*job;
  } else if (job != j.end() && job->is_string()) {
    a.job_id = job->get<std::string>();
  }
  FieldReader jr(*jobobj, "job.");
  if (a.job_id.empty()) jr.String("id", &a.job_id, true, 256);
  jr.String("kind", &a.kind, true, 64);
  const Json* params = nullptr;
  jr.Object("params", &params, false);
  jr.Int("steps", &a.steps, false, 0, int64_t(1) << 40);
  if (!jr.ok()) return jr.status();
  a.params = *params;
  auto model = jobobj->find("model");
  if (model != jobobj->end() && model->is_object()) a.model = *model;
  if (a.steps == 0) {
    auto s = a.params.find("steps");
    if (s != a.params.end() && s->is_number_integer()) a.steps = s->get<int64_t>();
  }
  FieldReader top(j);
  const Json* lease = nullptr;
  top.Object("lease", &lease, true);
  if (!top.ok()) return top.status();
  FieldReader lr(*lease, "lease.");
  lr.Int("epoch", &a.epoch, true, 1, INT64_MAX);
  lr.Number("heartbeat_interval", &a.heartbeat_interval_s, false, 0.01, 86400);
  lr.Number("ttl_s", &a.lease_ttl_s, false, 0, 86400 * 7);
  if (!lr.ok()) return lr.status();
  Result<Downloads> d = ParseDownloads(j);
  if (!d.ok()) return d.status();
  a.inputs = std::move(d->inputs);
  a.resume = std::move(d->resume);
  a.resume_step = d->resume_step;
  if (j.contains("verification")) {
    const Json* verification = nullptr;
    top.Object("verification", &verification, true);
    if (!top.ok()) return top.status();
    FieldReader vr(*verification, "verification.");
    vr.String("id", &a.verification_id, true, 256);
    vr.Int("stop_step", &a.stop_step, true, 1, a.steps > 0 ? a.steps : int64_t(1) << 40);
    if (vr.ok() && a.stop_step <= a.resume_step) vr.Fail("stop_step is not after the resume step");
    if (!vr.ok()) return vr.status();
  }
  return a;
}

Result<std::optional<Assignment>> CoordinatorApi::Work(double* retry_after_s, bool verify) {
  *retry_after_s = 0;
  net::HttpResponse raw;
  const auto asked_at = std::chrono::steady_clock::now();
  Json body = Json::object();
  if (verify) body["verify"] = true;
  if (!repro_class_.is_null()) body["repro_class"] = repro_class_;
  Result<Json> j = Call("POST", "/v1/work", body, &raw);
  auto ra = raw.headers.find("retry-after");
  if (ra != raw.headers.end()) *retry_after_s = std::atof(ra->second.c_str());
  if (!j.ok()) return j.status();
  if (raw.status == 204) return std::optional<Assignment>();
  Result<Assignment> a = ParseAssignment(*j);
  if (!a.ok()) return Status::Unavailable("work response: " + a.status().message());
  a->leased_at = asked_at;
  return std::optional<Assignment>(std::move(*a));
}

Result<Downloads> CoordinatorApi::FreshDownloads(const std::string& job, int64_t epoch) {
  Result<Json> j = Call("POST", "/v1/jobs/" + job + "/downloads", Json{{"epoch", epoch}});
  if (!j.ok()) return j.status();
  Result<Downloads> d = ParseDownloads(*j);
  if (!d.ok()) return Status::Unavailable("downloads: " + d.status().message());
  return d;
}

Result<HeartbeatReply> CoordinatorApi::Heartbeat(const std::string& job, int64_t epoch,
                                                 int64_t step, double loss, bool has_loss,
                                                 int timeout_ms) {
  Json body = {{"epoch", epoch}, {"step", step}};
  if (has_loss && loss == loss) body["loss"] = loss;
  return ParseHeartbeatReply(
      Call("POST", "/v1/jobs/" + job + "/heartbeat", body, nullptr, timeout_ms));
}

Result<HeartbeatReply> CoordinatorApi::VerificationHeartbeat(const std::string& id, int64_t epoch,
                                                             int64_t step, int timeout_ms) {
  return ParseHeartbeatReply(Call("POST", "/v1/verifications/" + id + "/heartbeat",
                                  Json{{"epoch", epoch}, {"step", step}}, nullptr, timeout_ms));
}

Result<std::string> CoordinatorApi::VerificationCheckpointUrl(const std::string& id,
                                                              int64_t epoch) {
  Result<Json> j = Call("POST", "/v1/verifications/" + id + "/checkpoint", Json{{"epoch", epoch}});
  if (!j.ok()) return j.status();
  std::string url;
  FieldReader f(*j);
  f.String("url", &url, true, 8192);
  if (!f.ok()) return Status::Unavailable("verification checkpoint: " + f.status().message());
  return Resolve(url);
}

Status CoordinatorApi::VerificationCommit(const std::string& id, int64_t epoch,
                                          const std::string& sha256, int64_t size,
                                          const std::vector<OutputFile>& outputs) {
  Json body = {{"epoch", epoch}, {"sha256", sha256}, {"size", size}};
  if (!outputs.empty()) body["outputs"] = FileListToJson(outputs);
  return Call("POST", "/v1/verifications/" + id + "/commit", body).status();
}

Result<std::string> CoordinatorApi::CreateCheckpoint(const std::string& job, int64_t epoch,
                                                     int64_t step, int64_t size) {
  Result<Json> j = Call("POST", "/v1/jobs/" + job + "/checkpoints",
                        Json{{"epoch", epoch}, {"step", step}, {"size", size}});
  if (!j.ok()) return j.status();
  std::string url;
  FieldReader f(*j);
  f.String("url", &url, true, 8192);
  if (!f.ok()) return Status::Unavailable("checkpoints: " + f.status().message());
  return Resolve(url);
}

Status CoordinatorApi::CommitCheckpoint(const std::string& job, int64_t epoch, int64_t step,
                                        const std::string& sha256, int64_t size,
                                        const std::vector<OutputFile>& outputs) {
  Json body = {{"epoch", epoch}, {"step", step}, {"sha256", sha256}, {"size", size}};
  if (!outputs.empty()) body["outputs"] = FileListToJson(outputs);
  return Call("POST", "/v1/jobs/" + job + "/checkpoints/" + std::to_string(step) + "/commit", body)
      .status();
}

Result<std::string> CoordinatorApi::CreateOutput(const std::string& job, int64_t epoch,
                                                 const std::string& name, int64_t size) {
  Result<Json> j = Call("POST", "/v1/jobs/" + job + "/outputs",
                        Json{{"epoch", epoch}, {"name", name}, {"size", size}});
  if (!j.ok()) return j.status();
  std::string url;
  FieldReader f(*j);
  f.String("url", &url, true, 8192);
  if (!f.ok()) return Status::Unavailable("outputs: " + f.status().message());
  return Resolve(url);
}

Result<std::string> CoordinatorApi::CreateSample(const std::string& job, int64_t epoch,
                                                 int64_t step, int index) {
  Result<Json> j = Call("POST", "/v1/jobs/" + job + "/samples",
                        Json{{"epoch", epoch}, {"step", step}, {"index", index}});
  if (!j.ok()) return j.status();
  std::string url;
  FieldReader f(*j);
  f.String("url", &url, true, 8192);
  if (!f.ok()) return Status::Unavailable("samples: " + f.status().message());
  return Resolve(url);
}

Status CoordinatorApi::CommitSamples(const std::string& job, int64_t epoch, int64_t step,
                                     int64_t seed, double seconds,
                                     const std::vector<SampleFile>& images) {
  // The prompts go along for coordinators before storage quotas (they required them); newer
  // ones ignore them and caption each image with the job's own prompt.
  Json list = Json::array();
  for (size_t i = 0; i < images.size(); ++i) {
    const SampleFile& s = images[i];
    list.push_back({{"index", int64_t(i)},
                    {"sha256", s.sha256},
                    {"size", s.size},
                    {"prompt", s.prompt},
                    {"negative_prompt", s.negative_prompt}});
  }
  Json body = {{"epoch", epoch}, {"seed", seed}, {"seconds", seconds}, {"images", list}};
  return Call("POST", "/v1/jobs/" + job + "/samples/" + std::to_string(step) + "/commit", body)
      .status();
}

Status CoordinatorApi::Complete(const std::string& job, int64_t epoch,
                                const std::vector<OutputFile>& outputs) {
  return Call("POST", "/v1/jobs/" + job + "/complete",
              Json{{"epoch", epoch}, {"outputs", FileListToJson(outputs)}})
      .status();
}

const char* FailCauseName(FailCause cause) {
  return cause == FailCause::kInput ? "input" : "node";
}

Status CoordinatorApi::Fail(const std::string& job, int64_t epoch, const std::string& reason,
                            FailCause cause, int64_t step) {
  Json body = {{"epoch", epoch}, {"reason", reason}, {"cause", FailCauseName(cause)}};
  if (step >= 0) body["step"] = step;
  return Call("POST", "/v1/jobs/" + job + "/fail", body).status();
}

Status CoordinatorApi::Release(const std::string& job, int64_t epoch, const std::string& reason) {
  return Call("POST", "/v1/jobs/" + job + "/release", Json{{"epoch", epoch}, {"reason", reason}})
      .status();
}

Status CoordinatorApi::PutFile(const std::string& url, const std::string& path) {
  net::HttpCall call;
  call.method = "PUT";
  call.url = Resolve(url);
  call.upload_file = path;
  call.timeout_ms = 600000;
  Result<net::HttpResponse> r = http_->Send(call);
  if (!r.ok()) return r.status();
  return StatusFromHttp(r->status, r->body);
}

Status CoordinatorApi::GetFile(const std::string& url, const std::string& path, int64_t resume_from,
                               int64_t max_bytes, bool remote) {
  if (remote && url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return Status::Invalid("a remote file's URL is not http(s)");
  }
  net::HttpCall call;
  call.url = remote ? url : Resolve(url);
  call.download_file = path;
  call.resume_from = resume_from;
  call.max_bytes = max_bytes;
  call.public_only = remote;
  call.timeout_ms = 600000;
  Result<net::HttpResponse> r = http_->Send(call);
  if (!r.ok()) return r.status();
  return StatusFromHttp(r->status, r->body);
}

}  // namespace gleaner::agent
