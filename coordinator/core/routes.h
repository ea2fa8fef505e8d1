// Route handlers, one group per file (routes_*.cc, reports.cc, maintenance.cc). Each gets an
// authenticated context (router.cc has done 404/405/413/401/403 and body parsing) and returns
// the plan for the rest of the request. Internal to the core.
#pragma once

#include "coordinator/core/context.h"
#include "coordinator/core/coordinator.h"

namespace gleaner::core {

// routes_keys.cc
Plan HandleCreateKey(CtxPtr ctx);
Plan HandleListKeys(CtxPtr ctx);
Plan HandleRevokeKey(CtxPtr ctx);
Plan HandleUpdateKey(CtxPtr ctx);  // PATCH /v1/keys/{id}
Plan HandleRevokeNode(CtxPtr ctx);
// routes_nodes.cc
Plan HandleRegisterNode(CtxPtr ctx);
Plan HandleListNodes(CtxPtr ctx);
Plan HandleSetNodeState(CtxPtr ctx);  // .../quarantine | .../restore (last path segment)
// routes_jobs.cc
Plan HandleCreateUpload(CtxPtr ctx);
Plan HandleCreateJob(CtxPtr ctx);
// routes_job_reads.cc
Plan HandleGetJob(CtxPtr ctx);
Plan HandleListJobs(CtxPtr ctx);
Plan HandleCancelJob(CtxPtr ctx);
Plan HandleJobEvents(CtxPtr ctx);
Plan HandleJobResult(CtxPtr ctx);
// routes_work.cc
Plan HandleWork(CtxPtr ctx);
Plan HandleDownloads(CtxPtr ctx);
// routes_lease.cc
Plan HandleHeartbeat(CtxPtr ctx);
Plan HandleCheckpointUrl(CtxPtr ctx);
Plan HandleCheckpointCommit(CtxPtr ctx);
Plan HandleOutputUrl(CtxPtr ctx);
// 200 {key, url: a PUT URL for key, method, max_size, expires_at}: where a node uploads an
// object (checkpoints, outputs, samples).
Plan RespondPutUrl(const Ctx& ctx, const std::string& key, int64_t max_size);
// routes_verify.cc
Plan HandleVerifyHeartbeat(CtxPtr ctx);
Plan HandleVerifyCheckpointUrl(CtxPtr ctx);
Plan HandleVerifyCommit(CtxPtr ctx);
// routes_samples.cc
Plan HandleSampleUrl(CtxPtr ctx);
Plan HandleSampleCommit(CtxPtr ctx);
Plan HandleListSamples(CtxPtr ctx);
// Sample steps (rows: step, seed, seconds, committed_at; step descending) with their images
// (rows: step, idx, key, sha256, size, prompt, negative_prompt; step descending, idx) as JSON
// with fresh GET URLs.
Json SampleStepsJson(const Rows& steps, const Rows& images, const Ctx& ctx);
// routes_finish.cc
Plan HandleComplete(CtxPtr ctx);
Plan HandleFail(CtxPtr ctx);
Plan HandleRelease(CtxPtr ctx);
// routes_prices.cc
Plan HandlePutPrice(CtxPtr ctx);
Plan HandleListPrices(CtxPtr ctx);
// reports.cc
Plan HandleCostReport(CtxPtr ctx);
// reports_ops.cc
Plan HandleQueueReport(CtxPtr ctx);
Plan HandleAutoscalerReport(CtxPtr ctx);
Plan HandleCostPerStepReport(CtxPtr ctx);
// metrics.cc
Plan HandleMetrics(CtxPtr ctx);
// routes_releases.cc
Plan HandlePublishRelease(CtxPtr ctx);
Plan HandleGetRelease(CtxPtr ctx);
// maintenance.cc
Plan HandleMaintenance(CtxPtr ctx);
Plan MaintenanceTick(const CoreConfig* config, int64_t now_ms, const PoolObservation& pool = {});

}  // namespace gleaner::core
