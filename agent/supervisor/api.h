// Typed client of the coordinator's node API (docs/api.md) over an HttpClient.
//
// Errors: transport failures and 429/5xx are kUnavailable (retry later); 409 is kConflict (the
// lease is lost: stop); 401/403 kUnauthenticated/kPermissionDenied; other 4xx kInvalidArgument
// or kNotFound, with the server's error message. Thread-safe (the token is set before threads
// start; SetToken is not synchronised).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/protocol/trainer_protocol.h"
#include "shared/json.h"
#include "shared/native/http_client.h"

namespace gleaner::agent {

// The failure reason a job gets when a remote model file cannot be fetched, whatever the cause.
constexpr const char* kModelFileUnavailable = "model file unavailable";

struct RemoteObject {
  std::string name;  // input name ("" for checkpoints)
  std::string url;
  std::string sha256;
  int64_t size = -1;  // -1 when the coordinator did not say
  // A file of a folder input (a diffusers model's "files"): its path inside the folder; empty
  // for an input that is one file.
  std::string path = std::string();  // (initialised: older aggregate initialisers omit it)
  // A file given by URL on a host the developer chose (the claim's "remote": true), not one of
  // the coordinator's own URLs: fetched behind the address guard (HttpCall::public_only), and
  // what goes wrong is never told to the developer (docs/agent.md "What the agent fetches").
  bool remote = false;
  // The model input's form (claim inputs.model.format; shared/model_manifest.h kModelFormat*),
  // as the coordinator sent it (possibly a name this agent does not know: the job runner fails
  // such a lease, lease_prepare.h); from a coordinator that does not send it, kModelFormatDiffusers
  // for a folder and kModelFormatUnetSafetensors for one file. Empty for every other input.
  std::string format = std::string();
};

// Where to download a job's inputs and resume checkpoint (claim, or POST .../downloads).
struct Downloads {
  std::vector<RemoteObject> inputs;
  std::optional<RemoteObject> resume;
  int64_t resume_step = 0;
};

struct Assignment {
  std::string job_id;
  std::string kind;
  Json params = Json::object();
  Json model = Json::object();  // job.model ({"config": UNet config} for lora-sd), passed to SPEC
  int64_t steps = 0;
  int64_t epoch = 0;
  double heartbeat_interval_s = 30;
  // The lease's length (lease.ttl_s; 0 = not sent) and when this agent asked for it: the lease
  // cannot have been granted before leased_at, so it is still valid at least until
  // leased_at + ttl (steady clock; no wall clocks are compared).
  double lease_ttl_s = 0;
  std::chrono::steady_clock::time_point leased_at{};
  std::vector<RemoteObject> inputs;
  std::optional<RemoteObject> resume;
  int64_t resume_step = 0;
  // A verification lease (claim's "verification"; docs/api.md "Verification"): replay the job
  // from `resume` (none: from scratch) to stop_step and deliver that checkpoint through the
  // verification's routes; epoch is the verification's. Empty id for a job lease.
  std::string verification_id;
  int64_t stop_step = 0;
};

struct HeartbeatReply {
  bool cancel = false;
  double ttl_s = 0;  // the lease now lasts this long from the server's receipt (0 = not sent)
};

// A result file as the trainer's manifest lists it ({name, size, sha256}).
using OutputFile = ManifestFile;

struct SampleFile {
  std::string prompt, negative_prompt, sha256;
  int64_t size = 0;
};

// Who a failed job's failure is attributed to (POST /v1/jobs/{id}/fail "cause").
enum class FailCause {
  kInput,  // the job's own inputs: the trainer exited kExitFailed, or an input cannot be had
  kNode,   // this node: a crash, a signal, no trainer, output that fails the agent's checks
};
const char* FailCauseName(FailCause cause);  // "input" | "node"

class CoordinatorApi {
 public:
  CoordinatorApi(net::HttpClient* http, std::string base_url);
  void SetToken(const std::string& token) { token_ = token; }
  // The reproducibility class sent with Register and Work (repro_class.h); null: none.
  void SetReproClass(Json repro_class) { repro_class_ = std::move(repro_class); }

  struct Registration {
    std::string node_id, token, node_secret;
  };
  // node_secret: the one a previous registration returned ("" for none); Registration's is
  // set only when the coordinator issued a new one.
  Result<Registration> Register(const std::string& enroll_token, const std::string& machine_id,
                                const std::string& gpu_name, int64_t vram_mb,
                                const std::string& agent_version, const std::string& node_secret);
  // nullopt = no work now; *retry_after_s gets the server's Retry-After (seconds) or 0.
  // verify: also take verification leases ({"verify": true}) when no job fits.
  Result<std::optional<Assignment>> Work(double* retry_after_s, bool verify = false);
  // timeout_ms bounds the whole call (the lease may run out while a reply is awaited).
  // The claim's inputs and resume with freshly minted URLs (the first ones expire after
  // blob_url_ttl_s, which a long download can outlast).
  Result<Downloads> FreshDownloads(const std::string& job, int64_t epoch);
  Result<HeartbeatReply> Heartbeat(const std::string& job, int64_t epoch, int64_t step, double loss,
                                   bool has_loss, int timeout_ms = 30000);
  // Upload URLs for the checkpoint of `step` and for a result file: `size` is the file's, the
  // URL allows exactly that (within the lease's storage quota; 413 quota_exceeded beyond it).
  Result<std::string> CreateCheckpoint(const std::string& job, int64_t epoch, int64_t step,
                                       int64_t size);
  // outputs: for the checkpoint of the last step only, the files it exports to (empty: none).
  Status CommitCheckpoint(const std::string& job, int64_t epoch, int64_t step,
                          const std::string& sha256, int64_t size,
                          const std::vector<OutputFile>& outputs = {});
  Result<std::string> CreateOutput(const std::string& job, int64_t epoch, const std::string& name,
                                   int64_t size);
  // Samples of one step (docs/api.md "Samples"): an upload URL per image, then one commit.
  Result<std::string> CreateSample(const std::string& job, int64_t epoch, int64_t step, int index);
  Status CommitSamples(const std::string& job, int64_t epoch, int64_t step, int64_t seed,
                       double seconds, const std::vector<SampleFile>& images);
  Status Complete(const std::string& job, int64_t epoch, const std::vector<OutputFile>& outputs);
  // cause: what failed (docs/api.md "Failure attribution"): kInput (the trainer refused the
  // job's dataset, model or params; another machine confirms it) or kNode (this node's fault).
  // step: the last step the trainer reached (-1: not sent).
  Status Fail(const std::string& job, int64_t epoch, const std::string& reason,
              FailCause cause = FailCause::kNode, int64_t step = -1);
  Status Release(const std::string& job, int64_t epoch, const std::string& reason);

  // A verification lease's routes (`id` = v_…, `epoch` the verification's): the heartbeat (its
  // cancel: the verification was voided), where to PUT the replayed checkpoint's archive, and
  // the commit of its sha256 and size.
  Result<HeartbeatReply> VerificationHeartbeat(const std::string& id, int64_t epoch, int64_t step,
                                               int timeout_ms = 30000);
  Result<std::string> VerificationCheckpointUrl(const std::string& id, int64_t epoch);
  // outputs: for a replay of the last segment, the files its replay exported (empty: none).
  Status VerificationCommit(const std::string& id, int64_t epoch, const std::string& sha256,
                            int64_t size, const std::vector<OutputFile>& outputs = {});

  // GET /v1/agent/release: the signed release envelope (JSON text) for platform/channel, or
  // nullopt when none is published (404).
  Result<std::optional<std::string>> AgentRelease(const std::string& platform,
                                                  const std::string& channel);

  // Object transfers to/from presigned URLs (no bearer token is sent to storage).
  Status PutFile(const std::string& url, const std::string& path);
  // GET into path; resume_from > 0 asks for the rest only (Range) and appends it to path.
  // max_bytes >= 0: the file may not grow past it (the transfer stops; kCorruption). remote: a
  // URL not minted by the coordinator (RemoteObject::remote), fetched guarded and never
  // resolved against the coordinator.
  Status GetFile(const std::string& url, const std::string& path, int64_t resume_from = 0,
                 int64_t max_bytes = -1, bool remote = false);

  // Relative URLs ("/v1/blobs/...") resolve against the coordinator.
  std::string Resolve(const std::string& url) const;

 private:
  Result<Json> Call(const std::string& method, const std::string& path, const Json& body,
                    net::HttpResponse* raw = nullptr, int timeout_ms = 30000);
  net::HttpClient* http_;
  std::string base_;
  std::string token_;
  Json repro_class_;
};

// Maps an HTTP status and error body onto a Status (ok for 2xx).
Status StatusFromHttp(int status, const std::string& body);

Result<Assignment> ParseAssignment(const Json& j);
// The "inputs" and "resume" members of a claim or downloads response.
Result<Downloads> ParseDownloads(const Json& j);

}  // namespace gleaner::agent
