// Signed agent releases (DESIGN §8, docs/agent.md). Operators publish a signed envelope; nodes
// fetch the newest one for their platform and channel. The coordinator validates shape only:
// it holds no release keys, and every agent verifies the signature against its pinned keys,
// so a compromised coordinator cannot push an update.
#include "coordinator/core/routes.h"
#include "shared/release_manifest.h"

namespace gleaner::core {

Plan HandlePublishRelease(CtxPtr ctx) {
  Result<release::Envelope> env = release::ParseEnvelope(ctx->req.body);
  if (!env.ok()) return Plan::Fail(env.status());
  Result<release::Manifest> m = release::ParseManifest(env->manifest_text);
  if (!m.ok()) return Plan::Fail(Status::Invalid("manifest: " + m.status().message()));
  std::string version = m->version.ToString();
  std::string channel = m->channel;
  Batch b;
  b.Add("INSERT INTO agent_releases (version, channel, manifest, created_at) VALUES (?, ?, ?, ?)",
        {version, channel, release::EnvelopeToJson(env.value()), ctx->now()});
  return Plan::Run(std::move(b), [version, channel](BatchResult res) -> Plan {
    if (!res.status.ok()) {
      if (res.status.code() == Code::kConflict) {
        return Plan::Fail(
            Status::Conflict("release " + version + " already published on " + channel));
      }
      return DbFail(res.status);
    }
    return RespondJson(201, {{"version", version}, {"channel", channel}});
  });
}

Plan HandleGetRelease(CtxPtr ctx) {
  QueryParams q(ctx->req.query);
  std::string platform, channel = "stable";
  if (!q.Get("platform", &platform) || !release::IsValidPlatform(platform)) {
    return Plan::Fail(Status::Invalid("platform must match [a-z0-9_-]{1,64}"));
  }
  q.Get("channel", &channel);
  if (!release::IsValidChannel(channel)) {
    return Plan::Fail(Status::Invalid("channel must match [a-z0-9-]{1,32}"));
  }
  Batch b;
  b.Add("SELECT manifest FROM agent_releases WHERE channel = ? ORDER BY created_at DESC LIMIT 500",
        {channel});
  return Plan::Run(std::move(b), [platform, channel](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& rows = res.results[0];
    int64_t best = -1;
    Json best_env;
    std::string best_version;
    for (size_t i = 0; i < rows.rows.size(); ++i) {
      Result<release::Envelope> env = release::ParseEnvelope(rows.Get(i, "manifest").AsText());
      if (!env.ok()) continue;
      Result<release::Manifest> m = release::ParseManifest(env->manifest_text);
      if (!m.ok() || m->artifacts.count(platform) == 0) continue;
      if (m->version.Ordinal() > best) {
        best = m->version.Ordinal();
        best_version = m->version.ToString();
        best_env = ParseJson(rows.Get(i, "manifest").AsText()).value();
      }
    }
    if (best < 0) {
      return Plan::Fail(Status::NotFound("no release for " + platform + " on " + channel));
    }
    return RespondJson(200,
                       {{"version", best_version}, {"channel", channel}, {"release", best_env}});
  });
}

}  // namespace gleaner::core
