// Failure attribution (DESIGN §2.8, docs/operations.md "Failure attribution"): what a failed
// lease counts against, as SQL fragments the routes put into their own batches.
//
// - A node fault (POST .../fail with cause "node", or none) bans the node from the job and
//   counts toward its quarantine; kCountedBan says which bans count: not those on a job that
//   ended failed for everyone (no node could run it: evidence against the job, not the node).
// - An input error (cause "input") is recorded in input_errors (migration 0013) and confirmed
//   by a node of another machine (routes_finish.cc, routes_work.cc); a later lease that trains
//   past the reported step, or completes the job, did not reproduce it: AddNotReproduced
//   quarantines the reporter as a forger.
// - QuarantineSql is the one statement that takes nodes out of the fleet for what they did
//   (verification verdicts, forged input errors).
//
// Pure string building: no I/O, no state. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "coordinator/core/sql.h"

namespace gleaner::core {

// "UPDATE nodes SET state = 'quarantined', state_changed_at = ?, state_reason = <reason_sql>
// WHERE state = 'active' AND id IN (<nodes_sql>)". Parameters, in order: the time, then
// reason_sql's, then nodes_sql's. Active nodes only: an operator's restore is never undone by
// an old decision, and a node already quarantined keeps its first reason.
std::string QuarantineSql(const std::string& reason_sql, const std::string& nodes_sql);

// A condition on a job_bans row `b`: the ban counts toward its node's quarantine (its job did
// not end failed for everyone). No parameters.
extern const char* const kCountedBan;

// Statements that settle the open input error of `job` as not reproduced when a lease trained
// past its step: step is the checkpoint step committed (for a completion, any value above every
// step, e.g. kMaxJobSteps + 1). guard/guard_params: the condition under which the caller's own
// write succeeds, true until the batch's last statement (the caller's job update) runs. Adds two
// statements: the reporter's quarantine, then the input_errors row's outcome.
void AddNotReproduced(Batch* b, const std::string& job, int64_t step, int64_t now,
                      const std::string& guard, const std::vector<SqlValue>& guard_params);

}  // namespace gleaner::core
