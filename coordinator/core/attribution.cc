#include "coordinator/core/attribution.h"

#include "coordinator/core/context.h"

namespace gleaner::core {

std::string QuarantineSql(const std::string& reason_sql, const std::string& nodes_sql) {
  return "UPDATE nodes SET state = 'quarantined', state_changed_at = ?, state_reason = " +
         reason_sql + " WHERE state = 'active' AND id IN (" + nodes_sql + ")";
}

const char* const kCountedBan =
    "NOT EXISTS (SELECT 1 FROM jobs fj WHERE fj.id = b.job_id AND fj.state = 'failed')";

void AddNotReproduced(Batch* b, const std::string& job, int64_t step, int64_t now,
                      const std::string& guard, const std::vector<SqlValue>& guard_params) {
  const std::string open =
      "FROM input_errors e WHERE e.job_id = ? AND e.outcome IS NULL AND e.step < ?";
  b->Add(QuarantineSql("'input_error_not_reproduced: reported an input error in job ' || ? || "
                       "' at step ' || (SELECT MIN(e.step) " +
                           open + ") || ' that another machine trained past'",
                       "SELECT e.node_id " + open + " AND " + guard),
         Cat({now, job, job, step, job, step}, guard_params));
  b->Add(
      "UPDATE input_errors SET outcome = 'not_reproduced', outcome_at = ? WHERE job_id = ? AND "
      "outcome IS NULL AND step < ? AND " +
          guard,
      Cat({now, job, step}, guard_params));
}

}  // namespace gleaner::core
