// Samples: images the trainer renders with the weights of a step, stored as job artifacts
// through the same presigned-URL path as checkpoints and outputs.
//   node:      POST /v1/jobs/{id}/samples {epoch, step, index} -> where to PUT image <index>
//              POST /v1/jobs/{id}/samples/{step}/commit {epoch, seed, seconds, images: [...]}
//   developer: GET /v1/jobs/{id}/samples -> the committed steps, newest first, with GET URLs
// Both node writes are fenced by the lease (lease.h). A step is committed once, all its images
// together: with the built-in store every image must be stored with its sha256 and size. The
// first commit of a step wins (a resumed trainer renders the same step again); a later one
// answers 200 {committed: false}. The seconds are added to the lease's segment (cost report).
#include "coordinator/core/blob_urls.h"
#include "coordinator/core/lease.h"
#include "coordinator/core/lease_quota.h"
#include "coordinator/core/routes.h"
#include "shared/job_params.h"
#include "shared/sha256.h"

namespace gleaner::core {
namespace {

struct SampleImage {
  int64_t index = 0, size = 0;
  std::string sha256;
};

bool ParseStep(const std::string& s, int64_t* step) {
  bool ok = !s.empty() && s.size() <= 8;
  int64_t v = 0;
  for (char c : s) {
    ok = ok && c >= '0' && c <= '9';
    if (ok) v = v * 10 + (c - '0');
  }
  *step = v;
  return ok && v >= 1 && v <= kMaxJobSteps;
}

Status ReadImages(const Json& body, int64_t max_size, std::vector<SampleImage>* out) {
  auto it = body.find("images");
  if (it == body.end() || !it->is_array() || it->empty() ||
      it->size() > size_t(kMaxSamplePrompts)) {
    return Status::Invalid("images must be an array of 1 to " + std::to_string(kMaxSamplePrompts) +
                           " {index, sha256, size} objects");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    FieldReader r((*it)[i], "images[" + std::to_string(i) + "].");
    SampleImage s;
    r.Int("index", &s.index, true, int64_t(i), int64_t(i));
    r.String("sha256", &s.sha256, true, 64);
    r.Int("size", &s.size, true, 1, max_size);
    // A caption is the job's (its sample_prompts), never the node's: the fields agents send
    // along are read as text and ignored.
    std::string ignored;
    r.String("prompt", &ignored, false, kMaxSamplePromptChars);
    r.String("negative_prompt", &ignored, false, kMaxSamplePromptChars);
    if (r.ok() && !IsSha256Hex(s.sha256)) r.Fail("sha256 must be 64 lowercase hex characters");
    if (!r.ok()) return r.status();
    out->push_back(std::move(s));
  }
  return Status::Ok();
}

Json ImagesJson(const Rows& rows, size_t from, size_t to, const Ctx& ctx) {
  Json images = Json::array();
  for (size_t i = from; i < to; ++i) {
    MintedUrl get = GetUrl(*ctx.config, rows.Get(i, "key").AsText(), ctx.now());
    images.push_back({{"index", rows.Get(i, "idx").AsInt()},
                      {"name", "samples/" + std::to_string(rows.Get(i, "step").AsInt()) + "/" +
                                   std::to_string(rows.Get(i, "idx").AsInt()) + ".png"},
                      {"prompt", rows.Get(i, "prompt").AsText()},
                      {"negative_prompt", rows.Get(i, "negative_prompt").AsText()},
                      {"sha256", rows.Get(i, "sha256").AsText()},
                      {"size", rows.Get(i, "size").AsInt()},
                      {"url", get.url},
                      {"expires_at", FormatTime(get.expires_at_ms)}});
  }
  return images;
}

}  // namespace

Json SampleStepsJson(const Rows& steps, const Rows& images, const Ctx& ctx) {
  Json out = Json::array();
  size_t i = 0;
  for (size_t s = 0; s < steps.rows.size(); ++s) {
    const int64_t step = steps.Get(s, "step").AsInt();
    while (i < images.rows.size() && images.Get(i, "step").AsInt() > step) ++i;
    size_t end = i;
    while (end < images.rows.size() && images.Get(end, "step").AsInt() == step) ++end;
    out.push_back({{"step", step},
                   {"seed", steps.Get(s, "seed").AsInt()},
                   {"seconds", steps.Get(s, "seconds").AsReal()},
                   {"committed_at", FormatTime(steps.Get(s, "committed_at").AsInt())},
                   {"images", ImagesJson(images, i, end, ctx)}});
    i = end;
  }
  return out;
}

// {epoch, step, index} -> {key, url, method, max_size, expires_at}: where to PUT image <index>
// (one of the job's sample_prompts) of a step, at most what a PNG of the job's sample_resolution
// can take and within the lease's allowance for uncommitted objects (lease_quota.h).
Plan HandleSampleUrl(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such job"));
  FieldReader r(ctx->body);
  LeaseObject o;
  o.kind = LeaseObjectKind::kSample;
  ReadEpoch(r, &o.epoch);
  r.Int("step", &o.step, true, 1, kMaxJobSteps);
  r.Int("index", &o.index, true, 0, kMaxSamplePrompts - 1);
  if (!r.ok()) return Plan::Fail(r.status());
  o.key = SampleKey(ctx->args[0], o.epoch, o.step, o.index);
  Batch b;
  AddMint(*ctx, o, &b);
  b.Add(std::string("SELECT ") + kLeaseColumns +
            ", COALESCE(json_array_length(spec, '$.params.sample_prompts'), 0) AS prompts "
            "FROM jobs WHERE id = ?",
        {ctx->args[0]});
  return Plan::Run(std::move(b), [ctx, o](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    if (!res.results[0].empty()) {
      return RespondPutUrl(*ctx, o.key, res.results[0].Get(0, "max_size").AsInt());
    }
    const Rows& job = res.results[2];
    Status st = ExplainLease(job, *ctx, o.epoch);
    if (!st.ok()) return Plan::Fail(st);
    if (o.step > job.Get(0, "steps_total").AsInt()) {
      return Plan::Fail(Status::Invalid("step is beyond the job's steps"));
    }
    if (o.index >= job.Get(0, "prompts").AsInt()) {
      return Plan::Fail(
          Status::Invalid("index " + std::to_string(o.index) + " is beyond the job's " +
                          std::to_string(job.Get(0, "prompts").AsInt()) + " sample prompts"));
    }
    return RefuseQuota(*ctx, o, res.results[1]);
  });
}

// {epoch, seed, seconds, images: [{index, sha256, size}]} -> {committed, step, images}. Every
// image of the step in one commit, one per sample prompt of the job, indexes 0..n-1 in order.
// Each image's caption is the job's prompt of its index, copied in SQL from the job's spec: a
// prompt or negative_prompt the node sends along is ignored.
Plan HandleSampleCommit(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such job"));
  int64_t step = 0;
  if (!ParseStep(ctx->args[1], &step)) {
    return Plan::Fail(Status::Invalid("sample step in the path must be an integer in [1, " +
                                      std::to_string(kMaxJobSteps) + "]"));
  }
  FieldReader r(ctx->body);
  int64_t epoch = 0, seed = 0;
  double seconds = 0;
  ReadEpoch(r, &epoch);
  r.Int("seed", &seed, true, 0, kMaxSafeInteger);
  r.Number("seconds", &seconds, true, 0, 1e9);
  if (!r.ok()) return Plan::Fail(r.status());
  std::vector<SampleImage> images;
  Status st = ReadImages(ctx->body, ctx->config->max_output_bytes, &images);
  if (!st.ok()) return Plan::Fail(st);
  const std::string& job = ctx->args[0];
  const int64_t now = ctx->now();
  const bool builtin = !ctx->config->s3.enabled();
  Fence f = LeaseFence(*ctx, epoch);
  std::string guard =
      f.sql +
      " AND ? <= steps_total AND json_array_length(spec, '$.params.sample_prompts') "
      "= ?";
  std::vector<SqlValue> gp = Cat(f.params, {step, int64_t(images.size())});
  if (builtin) {
    std::string terms;
    for (const SampleImage& s : images) {
      terms += std::string(terms.empty() ? "" : " OR ") + "(key = ? AND sha256 = ? AND size = ?)";
      gp = Cat(gp, {SampleKey(job, epoch, step, s.index), s.sha256, s.size});
    }
    guard += " AND (SELECT count(*) FROM blobs WHERE " + terms + ") = ?";
    gp.push_back(int64_t(images.size()));
  }
  Batch b;
  b.Add(
      "INSERT INTO sample_steps (job_id, step, epoch, seed, seconds, images, committed_at) "
      "SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM jobs WHERE " +
          guard + ") ON CONFLICT DO NOTHING RETURNING step",
      Cat({job, step, epoch, seed, seconds, int64_t(images.size()), now}, gp));
  // Only a step this commit inserted adds its time (changes() counts the statement before).
  b.Add(
      "UPDATE segments SET sampling_s = sampling_s + ? WHERE job_id = ? AND epoch = ? AND "
      "ended_at IS NULL AND changes() = 1",
      {seconds, job, epoch});
  for (const SampleImage& s : images) {
    b.Add(
        "INSERT INTO samples (job_id, step, idx, key, sha256, size, prompt, negative_prompt) "
        "SELECT ?1, ?2, ?3, ?4, ?5, ?6, json_extract(j.spec, '$.params.sample_prompts[' || ?3 "
        "|| '].prompt'), COALESCE(json_extract(j.spec, '$.params.sample_prompts[' || ?3 || "
        "'].negative_prompt'), '') FROM jobs j WHERE j.id = ?1 AND EXISTS (SELECT 1 FROM "
        "sample_steps WHERE job_id = ?1 AND step = ?2 AND epoch = ?7 AND committed_at = ?8) ON "
        "CONFLICT DO NOTHING",
        {job, step, s.index, SampleKey(job, epoch, step, s.index), s.sha256, s.size, epoch, now});
  }
  const size_t n = images.size();
  b.Add(std::string("SELECT ") + kLeaseColumns + " FROM jobs WHERE id = ?", {job});
  b.Add("SELECT epoch FROM sample_steps WHERE job_id = ? AND step = ?", {job, step});
  std::string keys = "''";
  std::vector<SqlValue> kp;
  for (const SampleImage& s : images) {
    keys += ", ?";
    kp.push_back(SampleKey(job, epoch, step, s.index));
  }
  b.Add("SELECT key, sha256, size FROM blobs WHERE key IN (" + keys + ")", kp);
  // 5 + n: committed images leave the lease's uncommitted allowance (lease_quota.h).
  b.Add(
      "DELETE FROM lease_objects WHERE key IN (SELECT key FROM samples WHERE job_id = ? AND "
      "step = ?)",
      {job, step});
  b.Add(
      "SELECT COALESCE(json_array_length(spec, '$.params.sample_prompts'), 0) AS prompts FROM "
      "jobs WHERE id = ?",
      {job});
  return Plan::Run(
      std::move(b), [ctx, epoch, step, n, images, builtin, job](BatchResult res) -> Plan {
        if (!res.status.ok()) return DbFail(res.status);
        Json answer = {{"step", step}, {"images", int64_t(n)}};
        if (!res.results[0].empty()) {
          answer["committed"] = true;
          return RespondJson(200, answer);
        }
        const Rows& row = res.results[2 + n];
        Status st = ExplainLease(row, *ctx, epoch);
        if (!st.ok()) return Plan::Fail(st);
        if (step > row.Get(0, "steps_total").AsInt()) {
          return Plan::Fail(Status::Invalid("step is beyond the job's steps"));
        }
        if (!res.results[3 + n].empty()) {  // committed before (a retry, or an earlier lease)
          answer["committed"] = false;
          return RespondJson(200, answer);
        }
        const int64_t prompts = res.results[6 + n].Get(0, "prompts").AsInt();
        if (int64_t(n) != prompts) {
          return Plan::Fail(Status::Invalid(
              "a sample step has one image per sample prompt of the job: " +
              std::to_string(prompts) + " expected, " + std::to_string(n) + " given"));
        }
        if (builtin) {
          const Rows& blobs = res.results[4 + n];
          for (const SampleImage& s : images) {
            std::string key = SampleKey(job, epoch, step, s.index);
            bool found = false;
            for (size_t i = 0; i < blobs.rows.size(); ++i) {
              if (blobs.Get(i, "key").AsText() == key) {
                found = blobs.Get(i, "sha256").AsText() == s.sha256 &&
                        blobs.Get(i, "size").AsInt() == s.size;
              }
            }
            if (!found) {
              return Plan::Fail(Status::Invalid("no object with image " + std::to_string(s.index) +
                                                "'s sha256 and size is stored at " + key +
                                                "; upload it before committing"));
            }
          }
        }
        return Plan::Fail(Status::Conflict("commit raced with another change; retry"));
      });
}

// GET /v1/jobs/{id}/samples?limit=&before= : committed steps, newest first (at most limit,
// default 50, steps below `before` when given), each with its images and GET URLs.
Plan HandleListSamples(CtxPtr ctx) {
  if (!IsPlainId(ctx->args[0])) return Plan::Fail(Status::NotFound("no such job"));
  QueryParams q(ctx->req.query);
  std::string v;
  int64_t limit = 50, before = kMaxJobSteps + 1;
  if (q.Get("limit", &v) && !ParseStep(v, &limit)) {
    return Plan::Fail(Status::Invalid("limit must be an integer in [1, 1000]"));
  }
  if (limit > 1000) return Plan::Fail(Status::Invalid("limit must be an integer in [1, 1000]"));
  if (q.Get("before", &v) && !ParseStep(v, &before)) {
    return Plan::Fail(
        Status::Invalid("before must be a step in [1, " + std::to_string(kMaxJobSteps) + "]"));
  }
  const std::string& job = ctx->args[0];
  std::string owned = "EXISTS (SELECT 1 FROM jobs WHERE id = ? AND " + OwnerSql() + ")";
  std::vector<SqlValue> op = Cat({job}, OwnerParams(*ctx));
  std::string page =
      "SELECT step, seed, seconds, committed_at FROM sample_steps WHERE job_id = ? AND step < ? "
      "AND " +
      owned + " ORDER BY step DESC LIMIT ?";
  std::vector<SqlValue> pp = Cat(Cat({job, before}, op), {limit});
  Batch b;
  b.Add(
      "SELECT id, steps_total, (SELECT COALESCE(SUM(seconds), 0) FROM sample_steps WHERE "
      "job_id = jobs.id) AS sampling_s FROM jobs WHERE id = ? AND " +
          OwnerSql(),
      op);
  b.Add(page, pp);
  b.Add(
      "SELECT step, idx, key, sha256, size, prompt, negative_prompt FROM samples WHERE "
      "job_id = ? AND step IN (SELECT step FROM (" +
          page + ")) ORDER BY step DESC, idx",
      Cat({job}, pp));
  return Plan::Run(std::move(b), [ctx, limit](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& jobs = res.results[0];
    if (jobs.empty()) return Plan::Fail(Status::NotFound("no such job"));
    const Rows& steps = res.results[1];
    Json next = nullptr;
    if (int64_t(steps.rows.size()) == limit) {
      next = steps.Get(steps.rows.size() - 1, "step").AsInt();
    }
    return RespondJson(200, {{"job_id", ctx->args[0]},
                             {"sampling_s", jobs.Get(0, "sampling_s").AsReal()},
                             {"steps", SampleStepsJson(steps, res.results[2], *ctx)},
                             {"next_before", next}});
  });
}

}  // namespace gleaner::core
