// Price table by GPU name (operator). The row '*' is the default for GPUs without their own
// price. A claim snapshots the node's price into its segment, so later changes never rewrite
// past costs.
#include "coordinator/core/job_view.h"
#include "coordinator/core/routes.h"

namespace gleaner::core {

Plan HandlePutPrice(CtxPtr ctx) {
  static const char* const kKeys[] = {"gpu", "usd_per_hour", nullptr};
  FieldReader r(ctx->body);
  std::string gpu;
  double price = 0;
  r.OnlyKeys(kKeys);
  r.String("gpu", &gpu, true, 128);
  r.Number("usd_per_hour", &price, true, 0, 10000);
  if (!r.ok()) return Plan::Fail(r.status());
  Batch b;
  b.Add(
      "INSERT INTO prices (gpu, usd_per_hour, updated_at) VALUES (?, ?, ?) ON CONFLICT (gpu) "
      "DO UPDATE SET usd_per_hour = excluded.usd_per_hour, updated_at = excluded.updated_at "
      "RETURNING gpu, usd_per_hour, updated_at",
      {gpu, price, ctx->now()});
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& rows = res.results[0];
    return RespondJson(200, {{"gpu", rows.Get(0, "gpu").AsText()},
                             {"usd_per_hour", rows.Get(0, "usd_per_hour").AsReal()},
                             {"updated_at", TimeOrNull(rows.Get(0, "updated_at"))}});
  });
}

Plan HandleListPrices(CtxPtr) {
  Batch b;
  b.Add("SELECT gpu, usd_per_hour, updated_at FROM prices ORDER BY gpu");
  return Plan::Run(std::move(b), [](BatchResult res) -> Plan {
    if (!res.status.ok()) return DbFail(res.status);
    const Rows& rows = res.results[0];
    Json prices = Json::array();
    Json def = nullptr;
    for (size_t i = 0; i < rows.rows.size(); ++i) {
      if (rows.Get(i, "gpu").AsText() == "*") def = rows.Get(i, "usd_per_hour").AsReal();
      prices.push_back({{"gpu", rows.Get(i, "gpu").AsText()},
                        {"usd_per_hour", rows.Get(i, "usd_per_hour").AsReal()},
                        {"updated_at", TimeOrNull(rows.Get(i, "updated_at"))}});
    }
    return RespondJson(200, {{"default_usd_per_hour", def}, {"prices", prices}});
  });
}

}  // namespace gleaner::core
