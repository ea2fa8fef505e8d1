// Helpers for the VAE and sampler tests: every reference set of a family (vae-ref-a and, when
// present, vae-ref-b), spoiled configs, gleaner-train run with its stderr captured, tensor bounds.
#pragma once

#include <string>
#include <vector>

#include "agent/protocol/trainer_protocol.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up
// (text_test_util.h needs Catch2 first)
#include "text_test_util.h"

namespace gleaner::train::testing {

// The reference sets "<family>-ref-a" (and the companion "-ref-b" when present) holding `marker`;
// none is a skip (a failure in CI).
#define FIXTURE_SETS(sets, family, marker)                                                        \
  std::vector<std::string> sets = ::gleaner::train::text::testing::ReferenceSets(family, marker); \
  if (sets.empty()) {                                                                             \
    GLEANER_SKIP("no " family "-ref-* reference set under " GLEANER_FIXTURES_DIR);                \
  }

inline Json MustJson(const std::string& path) {
  Result<std::string> t = ReadFile(path);
  REQUIRE(t.ok());
  Result<Json> j = ParseJson(*t);
  REQUIRE(j.ok());
  return *j;
}

// Every way to spoil one field of a JSON config: each key of `config` in turn replaced by a
// value of another type or out of range (what a hostile or broken model folder could hold).
inline std::vector<Json> SpoiledConfigs(const Json& config) {
  const Json odd[] = {nullptr,
                      true,
                      -1,
                      0,
                      1e300,
                      -1e300,
                      3.5,
                      "x",
                      Json::array(),
                      Json::array({1, "a", nullptr}),
                      Json::object(),
                      18446744073709551615ull};
  std::vector<Json> out;
  for (const auto& [key, value] : config.items()) {
    for (const Json& v : odd) {
      Json c = config;
      c[key] = v;
      out.push_back(c);
    }
  }
  return out;
}

// gleaner-train run with args; its exit code and stderr.
inline text::testing::CliRun RunTrainCli(const std::vector<std::string>& args) {
  TempDir scratch;
  return text::testing::RunTrainCli(args, scratch.path());
}

// max |a - ref| and ||a - ref|| / ||ref|| within the given bounds (and the same shape).
inline void CheckClose(const std::string& what, const torch::Tensor& got, const torch::Tensor& ref,
                       double max_abs, double rel_l2) {
  INFO(what);
  REQUIRE(got.sizes() == ref.sizes());
  double mx = MaxAbs(got, ref), rel = RelL2(got, ref);
  WARN(what << ": max abs " << mx << ", rel-L2 " << rel);
  CHECK(mx <= max_abs);
  CHECK(rel <= rel_l2);
}

}  // namespace gleaner::train::testing
