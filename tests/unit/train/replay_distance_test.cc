// The replay comparison of verified training: per-tensor relative L2 distance of two LoRAs
// (training/replay_distance.h) and `gleaner-train compare-checkpoints`.
#include "agent/train/training/replay_distance.h"

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "agent/protocol/trainer_protocol.h"
#include "tests/unit/train/train_test_util.h"

namespace gleaner::train::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TensorMap TwoTensors(double scale_b) {
  torch::manual_seed(3);
  return {{"a.lora_A.weight", torch::randn({4, 8}, torch::kFloat64)},
          {"a.lora_B.weight", torch::randn({8, 4}, torch::kFloat64) * scale_b}};
}

// Runs `gleaner-train compare-checkpoints args...`; its stdout in *out (stderr in *err when
// given), the exit code returned.
int Compare(const std::string& args, std::string* out, std::string* err = nullptr) {
  TempDir tmp;
  std::string cmd = std::string(GLEANER_BIN_DIR) + "/gleaner-train compare-checkpoints " + args +
                    " 2>" + (tmp / "stderr");
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  out->clear();
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out->append(buf, n);
  int status = ::pclose(p);
  if (err != nullptr) *err = Bytes(tmp / "stderr");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Json MustParse(const std::string& line) {
  Result<Json> j = ParseJson(line);
  REQUIRE(j.ok());
  return *j;
}

}  // namespace

TEST_CASE("replay distance: symmetric relative L2 per tensor and +inf for what cannot agree",
          "[lora_sd][replay]") {
  // float64, so that the expected distances below are exact to the last digits.
  torch::Tensor a = torch::randn({16, 4}, torch::kFloat64);
  CHECK(*training::TensorDistance(a, a.clone()) == 0);
  // ||a - 1.25a|| / max(||a||, ||1.25a||) = 0.25 / 1.25, whichever side is first.
  CHECK(*training::TensorDistance(a, a * 1.25) == Approx(0.2).epsilon(1e-12));
  CHECK(*training::TensorDistance(a * 1.25, a) == Approx(0.2).epsilon(1e-12));
  CHECK(*training::TensorDistance(torch::zeros({3}), torch::zeros({3})) == 0);
  // bf16 against fp32: compared in float64.
  CHECK(*training::TensorDistance(a.to(torch::kBFloat16), a) < 4e-3);
  CHECK(*training::TensorDistance(a.to(torch::kFloat32), a) < 1e-7);
  CHECK(*training::TensorDistance(a, torch::randn({4, 16})) == kInf);
  torch::Tensor nan = a.clone();
  nan[0][0] = std::nan("");
  CHECK(*training::TensorDistance(nan, a) == kInf);
  torch::Tensor inf = a.clone();
  inf[1][1] = kInf;
  CHECK(*training::TensorDistance(a, inf) == kInf);
  CHECK(!training::TensorDistance(torch::ones({2}, torch::kInt64), torch::ones({2})).ok());
}

TEST_CASE("replay distance: the worst tensor decides against the tolerance", "[lora_sd][replay]") {
  TensorMap ref = TwoTensors(1.0);
  TensorMap got = ref;
  const double e = std::ldexp(1.0, -13);  // 1.2e-4, exact as a float scalar too
  got["a.lora_B.weight"] = ref["a.lora_B.weight"] * (1 + e);
  Result<training::ReplayDistance> d = training::CompareLora(got, ref, 1e-3);
  REQUIRE(d.ok());
  CHECK(d->worst_tensor == "a.lora_B.weight");
  CHECK(d->worst == Approx(e / (1 + e)).epsilon(1e-9));
  CHECK(d->median == Approx(d->worst / 2).epsilon(1e-6));
  CHECK(d->tensors == 2);
  CHECK(d->within);
  CHECK(d->reason.empty());
  CHECK(!training::CompareLora(got, ref, 1e-5)->within);
  // Tolerance 0 means equal values.
  CHECK(training::CompareLora(ref, TwoTensors(1.0), 0)->within);

  got.erase("a.lora_A.weight");
  d = training::CompareLora(got, ref, 1.0);
  REQUIRE(d.ok());
  CHECK(d->worst_tensor == "a.lora_A.weight");
  CHECK(d->worst == kInf);
  CHECK(d->reason == "missing from a");
  CHECK(!d->within);
  got["extra"] = torch::ones({1});
  got["a.lora_A.weight"] = ref["a.lora_A.weight"];
  CHECK(training::CompareLora(got, ref, 1.0)->reason == "missing from b");
  got.erase("extra");
  got["a.lora_A.weight"] = ref["a.lora_A.weight"].t().contiguous();
  CHECK(training::CompareLora(got, ref, 1.0)->reason == "shapes differ");

  CHECK(!training::CompareLora({}, ref, 1.0).ok());
  CHECK(!training::CompareLora({{"x", torch::ones({2}, torch::kInt32)}},
                               {{"x", torch::ones({2}, torch::kInt32)}}, 1.0)
             .ok());
}

TEST_CASE(
    "compare-checkpoints: one JSON line and exit 0 within the tolerance or 1 outside or 2 on "
    "bad input",
    "[lora_sd][replay][cli]") {
  // Two real checkpoints of the same job at step 4 (bit-identical on CPU; the last step writes
  // the output, not a checkpoint) and one of a job with another seed.
  TinyJob job;
  Json spec = job.Spec({{"steps", 6}, {"checkpoint_every", 4}, {"rank", 2}});
  REQUIRE(job.Run(spec, job.tmp / "w1") == kExitDone);
  REQUIRE(job.Run(spec, job.tmp / "w2") == kExitDone);
  spec["params"]["seed"] = 5;
  REQUIRE(job.Run(spec, job.tmp / "w3") == kExitDone);
  std::string c1 = job.tmp / "w1/checkpoints/0000000004";
  std::string c2 = job.tmp / "w2/checkpoints/0000000004";
  std::string c3 = job.tmp / "w3/checkpoints/0000000004";

  std::string out, err;
  int rc = Compare(c1 + " " + c2, &out, &err);
  INFO(err);
  REQUIRE(rc == 0);
  Json j = MustParse(out);
  CHECK(j["distance"] == 0.0);
  CHECK(j["within"] == true);
  CHECK(j["tolerance"] == 0.0);
  CHECK(j["tensor"].get<std::string>().rfind("lora.safetensors:", 0) == 0);
  CHECK(out.find('\n') == out.size() - 1);

  REQUIRE(Compare(c1 + " " + c3 + " --tolerance 1e-5", &out) == 1);
  j = MustParse(out);
  CHECK(j["distance"].get<double>() > 1e-5);
  CHECK(j["within"] == false);
  CHECK(Compare(c1 + " " + c3 + " --tolerance 10", &out) == 0);

  // Files work as well as directories; a perturbed copy is caught at a tolerance below it.
  TensorMap lora = MustLoad(c1 + "/lora.safetensors");
  TensorMap noisy = lora;
  const double e = std::ldexp(1.0, -10);  // about 1e-3
  for (auto& [k, v] : noisy) v = v * (1 + e);
  REQUIRE(SaveSafetensors(job.tmp / "noisy.safetensors", noisy).ok());
  CHECK(Compare(c1 + "/lora.safetensors " + (job.tmp / "noisy.safetensors") + " --tolerance 1e-4",
                &out) == 1);
  CHECK(MustParse(out)["distance"].get<double>() == Approx(e / (1 + e)).epsilon(1e-3));
  // A LoRA with another tensor set disagrees (distance null: infinite).
  noisy.erase(noisy.begin());
  REQUIRE(SaveSafetensors(job.tmp / "fewer.safetensors", noisy).ok());
  CHECK(Compare(c1 + "/lora.safetensors " + (job.tmp / "fewer.safetensors") + " --tolerance 1",
                &out) == 1);
  CHECK(MustParse(out)["distance"].is_null());
  CHECK(MustParse(out)["reason"] == "missing from b");

  // Bad input: 2, nothing on stdout; bad command line: 64.
  REQUIRE(WriteFileDurable(job.tmp / "junk.safetensors", "not safetensors").ok());
  CHECK(Compare(c1 + " " + (job.tmp / "junk.safetensors"), &out) == kExitFailed);
  CHECK(out.empty());
  CHECK(Compare(c1 + " " + (job.tmp / "absent"), &out) == kExitFailed);
  CHECK(Compare(c1 + " " + job.tmp.path(), &out) == kExitFailed);  // a directory, no checkpoint
  CHECK(Compare(c1, &out) == kExitUsage);
  CHECK(Compare(c1 + " " + c2 + " --tolerance -1", &out) == kExitUsage);
  CHECK(Compare(c1 + " " + c2 + " --tolerance x", &out) == kExitUsage);
  CHECK(Compare(c1 + " " + c2 + " --bogus 1", &out) == kExitUsage);
}

}  // namespace gleaner::train::testing
