// FlowMatchEulerDiscreteScheduler (FLUX.1): the training table, the density -> timestep/sigma
// rule, the loss weights, FluxPipeline's inference schedules with mu, and Euler trajectories
// against diffusers' reference sets (flowmatch-ref-*: every tensor and metadata value), plus
// the densities, shifts and refusals the sets do not cover, and `gleaner-train schedule
// --scheduler flow-match-euler`.
#include "agent/train/sampling/flow_match.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "agent/train/training/flow_match_timesteps.h"
#include "ref_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train::testing;
using namespace gleaner::train::sampling;
using namespace gleaner::train::training;

namespace {

FlowMatchConfig MustFlowConfig(const Json& j) {
  Result<FlowMatchConfig> c = ParseFlowMatchConfig(j);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return *c;
}

torch::Tensor AsTensor(const std::vector<double>& v) {
  return torch::tensor(v, torch::kFloat64);
}

// The README bound for timesteps, sigmas and trajectories: max |d| <= 1e-5.
void CheckMax(const std::string& what, const torch::Tensor& got, const torch::Tensor& ref) {
  INFO(what);
  REQUIRE(got.sizes() == ref.sizes());
  double d = MaxAbs(got, ref);
  WARN(what << ": max abs " << d);
  CHECK(d <= 1e-5);
}

// The configurations of a set: <name>.scheduler_config.json.
std::vector<std::string> ConfigNames(const std::string& dir) {
  std::vector<std::string> names;
  const std::string suffix = ".scheduler_config.json";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string f = e.path().filename().string();
    if (f.size() > suffix.size() &&
        f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(f.substr(0, f.size() - suffix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct InferCase {
  int steps;
  int64_t seq;
};

// The (steps, seq) cases of a configuration, from its `<name>.infer.<steps>.<seq>.*` keys.
std::vector<InferCase> InferCases(const TensorMap& t, const std::string& name) {
  std::set<std::pair<int, int64_t>> cases;
  const std::string prefix = name + ".infer.";
  for (const auto& [k, v] : t) {
    if (k.rfind(prefix, 0) != 0) continue;
    std::string rest = k.substr(prefix.size());
    size_t dot1 = rest.find('.'), dot2 = rest.find('.', dot1 + 1);
    REQUIRE(dot2 != std::string::npos);
    cases.insert(
        {std::stoi(rest.substr(0, dot1)), std::stoll(rest.substr(dot1 + 1, dot2 - dot1 - 1))});
  }
  std::vector<InferCase> out;
  for (const auto& [s, q] : cases) out.push_back({s, q});
  return out;
}

std::string CaseKey(const std::string& name, const InferCase& c) {
  return name + ".infer." + std::to_string(c.steps) + "." + std::to_string(c.seq);
}

// One whole trajectory as the reference makes it: model output sin(x + i) at step i.
torch::Tensor Trajectory(const FlowMatchSchedule& s, torch::Tensor x) {
  for (size_t i = 0; i + 1 < s.sigmas.size(); ++i) {
    torch::Tensor out = torch::sin(x + int64_t(i));
    x = EulerStep(out, s.sigmas[i], s.sigmas[i + 1], x);
  }
  return x;
}

}  // namespace

TEST_CASE("flow-match schedules, draws, weights and trajectories match diffusers",
          "[sampling][flowmatch][fixture]") {
  FIXTURE_SETS(sets, "flowmatch", "scheduler.safetensors");
  for (const std::string& dir : sets) {
    INFO(dir);
    std::map<std::string, std::string> meta;
    TensorMap ref = MustLoad(dir + "/scheduler.safetensors", &meta);
    std::set<std::string> checked_tensors, checked_meta;
    auto want = [&](const std::string& key) -> const torch::Tensor& {
      INFO(key);
      REQUIRE(ref.count(key) == 1);
      checked_tensors.insert(key);
      return ref.at(key);
    };
    const torch::Tensor& u = want("u");
    std::vector<std::string> names = ConfigNames(dir);
    REQUIRE_FALSE(names.empty());
    for (const std::string& name : names) {
      INFO(name);
      FlowMatchConfig c = MustFlowConfig(MustJson(dir + "/" + name + ".scheduler_config.json"));
      // The training table and the rule u -> (timestep, sigma).
      FlowMatchTable table = TrainTable(c);
      CHECK(table.timesteps.scalar_type() == torch::kFloat32);
      CheckMax(name + ".train_timesteps", table.timesteps, want(name + ".train_timesteps"));
      CheckMax(name + ".train_sigmas", table.sigmas, want(name + ".train_sigmas"));
      TimestepDraw d = TimestepsForU(table, u);
      CheckMax(name + ".u_timesteps", d.timesteps, want(name + ".u_timesteps"));
      CheckMax(name + ".u_sigmas", d.sigmas, want(name + ".u_sigmas"));
      const std::pair<const char*, LossWeighting> weights[] = {
          {"sigma_sqrt", LossWeighting::kSigmaSqrt},
          {"cosmap", LossWeighting::kCosmap},
          {"none", LossWeighting::kNone}};
      for (const auto& [w, kind] : weights) {
        std::string key = name + ".u_weight." + w;
        const torch::Tensor& r = want(key);
        torch::Tensor got = LossWeights(kind, d.sigmas);
        // sigma^-2 reaches 1e6 for the smallest sigma: its bound is relative.
        INFO(key);
        REQUIRE(got.sizes() == r.sizes());
        double rel =
            ((got.to(torch::kFloat64) - r.to(torch::kFloat64)).abs() / r.to(torch::kFloat64).abs())
                .max()
                .item<double>();
        WARN(key << ": max rel " << rel);
        CHECK(rel <= 1e-6);
      }
      // FluxPipeline's inference schedules, mu and Euler trajectories.
      std::vector<InferCase> cases = InferCases(ref, name);
      REQUIRE_FALSE(cases.empty());
      for (const InferCase& ic : cases) {
        std::string k = CaseKey(name, ic);
        INFO(k);
        Result<FlowMatchSchedule> s = InferenceSchedule(c, ic.steps, ic.seq);
        REQUIRE(s.ok());
        CHECK(s->timesteps.size() == size_t(ic.steps));
        CHECK(s->sigmas.back() == 0.0);
        CheckMax(k + ".timesteps", AsTensor(s->timesteps), want(k + ".timesteps"));
        CheckMax(k + ".sigmas", AsTensor(s->sigmas), want(k + ".sigmas"));
        std::string mu_key =
            name + "." + std::to_string(ic.steps) + "." + std::to_string(ic.seq) + ".mu";
        if (c.use_dynamic_shifting) {
          REQUIRE(meta.count(mu_key) == 1);
          checked_meta.insert(mu_key);
          double mu = std::stod(meta.at(mu_key));
          CHECK(std::abs(s->mu - mu) <= 1e-12 * std::max(1.0, std::abs(mu)));
          CHECK(std::abs(CalculateShift(c, ic.seq) - mu) <= 1e-12 * std::max(1.0, std::abs(mu)));
        } else {
          CHECK(meta.count(mu_key) == 0);
          CHECK(s->mu == 0.0);
        }
        torch::Tensor x = Trajectory(*s, want(k + ".x0"));
        CheckMax(k + ".x_final", x, want(k + ".x_final"));
      }
    }
    // Every tensor and metadata value of the set was checked.
    for (const auto& [k, v] : ref) {
      INFO("unchecked tensor " << k);
      CHECK(checked_tensors.count(k) == 1);
    }
    for (const auto& [k, v] : meta) {
      if (k == "format") continue;  // safetensors' own
      INFO("unchecked metadata " << k);
      CHECK(checked_meta.count(k) == 1);
    }
  }
}

TEST_CASE("flow-match configs: defaults, fields, refusals by name", "[sampling][flowmatch]") {
  FlowMatchConfig d = MustFlowConfig(Json::object());
  CHECK(d.num_train_timesteps == 1000);
  CHECK(d.shift == 1.0);
  CHECK_FALSE(d.use_dynamic_shifting);
  CHECK(d.base_image_seq_len == 256);
  CHECK(d.max_image_seq_len == 4096);
  CHECK(d.time_shift_type == TimeShiftType::kExponential);
  CHECK_FALSE(d.shift_terminal.has_value());
  CHECK(IsFlowMatchConfig(Json{{"_class_name", "FlowMatchEulerDiscreteScheduler"}}));
  CHECK_FALSE(IsFlowMatchConfig(Json{{"_class_name", "EulerDiscreteScheduler"}}));
  CHECK_FALSE(IsFlowMatchConfig(Json::array()));
  FlowMatchConfig l = MustFlowConfig(Json{{"time_shift_type", "linear"},
                                          {"shift_terminal", 0.02},
                                          {"invert_sigmas", true},
                                          {"use_karras_sigmas", false},
                                          {"stochastic_sampling", nullptr}});
  CHECK(l.time_shift_type == TimeShiftType::kLinear);
  CHECK(l.shift_terminal == 0.02);
  CHECK(l.invert_sigmas);
  CHECK_FALSE(MustFlowConfig(Json{{"shift_terminal", 0.0}}).shift_terminal.has_value());
  const std::pair<Json, const char*> bad[] = {
      {{{"_class_name", "EulerDiscreteScheduler"}}, "EulerDiscreteScheduler"},
      {{{"use_karras_sigmas", true}}, "use_karras_sigmas"},
      {{{"use_exponential_sigmas", true}}, "use_exponential_sigmas"},
      {{{"use_beta_sigmas", true}}, "use_beta_sigmas"},
      {{{"stochastic_sampling", true}}, "stochastic_sampling"},
      {{{"time_shift_type", "cubic"}}, "time_shift_type"},
      {{{"time_shift_type", 3}}, "time_shift_type"},
      {{{"shift", 0}}, "shift"},
      {{{"shift", "3"}}, "shift"},
      {{{"num_train_timesteps", 0}}, "num_train_timesteps"},
      {{{"num_train_timesteps", 2.5}}, "num_train_timesteps"},
      {{{"use_dynamic_shifting", "yes"}}, "use_dynamic_shifting"},
      {{{"base_shift", Json::array()}}, "base_shift"},
      {{{"max_image_seq_len", -4}}, "max_image_seq_len"},
      {{{"shift_terminal", 1.0}}, "shift_terminal"},
      {{{"shift_terminal", -0.5}}, "shift_terminal"},
      {{{"invert_sigmas", 1}}, "invert_sigmas"},
      {{{"use_dynamic_shifting", true}, {"base_image_seq_len", 64}, {"max_image_seq_len", 64}},
       "max_image_seq_len"}};
  for (const auto& [config, needle] : bad) {
    INFO(DumpJson(config));
    Result<FlowMatchConfig> r = ParseFlowMatchConfig(config);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(needle) != std::string::npos);
  }
  CHECK_FALSE(ParseFlowMatchConfig(Json::array()).ok());
  Result<FlowMatchConfig> missing = LoadFlowMatchConfig("/nonexistent/flow.json");
  CHECK(missing.status().message().find("/nonexistent/flow.json") != std::string::npos);
}

TEST_CASE("spoiled flow-match configs are answered, never crash",
          "[sampling][flowmatch][fixture]") {
  FIXTURE_SETS(sets, "flowmatch", "scheduler.safetensors");
  int ok = 0, refused = 0;
  for (const std::string& name : ConfigNames(sets.front())) {
    Json base = MustJson(sets.front() + "/" + name + ".scheduler_config.json");
    for (const Json& c : SpoiledConfigs(base)) {
      Result<FlowMatchConfig> r = ParseFlowMatchConfig(c);
      if (!r.ok()) {
        ++refused;
        CHECK_FALSE(r.status().message().empty());
        continue;
      }
      ++ok;
      // What parses gives a schedule or one clear error, and a table.
      for (int64_t seq : {int64_t(1), int64_t(4096), int64_t(1) << 40}) {
        Result<FlowMatchSchedule> s = InferenceSchedule(*r, 4, seq);
        if (s.ok()) {
          CHECK(s->sigmas.size() == 5);
        } else {
          CHECK_FALSE(s.status().message().empty());
        }
      }
      CHECK(TrainTable(*r).sigmas.size(0) == r->num_train_timesteps);
    }
  }
  CHECK(ok > 0);
  CHECK(refused > 0);
}

TEST_CASE("flow-match inference schedules: shifts, inversion, terminal stretch, bounds",
          "[sampling][flowmatch]") {
  FlowMatchConfig c;  // static shift 1: sigmas are linspace(1, 1/n, n)
  Result<FlowMatchSchedule> s = InferenceSchedule(c, 4, 0);
  REQUIRE(s.ok());
  CHECK(s->sigmas == std::vector<double>{1.0, double(0.75f), double(0.5f), double(0.25f), 0.0});
  CHECK(s->timesteps == std::vector<double>{1000.0, 750.0, 500.0, 250.0});
  CHECK(s->mu == 0.0);
  // A single step: sigma 1 only (linspace(1, 1, 1)).
  s = InferenceSchedule(c, 1, 0);
  REQUIRE(s.ok());
  CHECK(s->sigmas == std::vector<double>{1.0, 0.0});
  // Static shift 3 (SD3): 3σ / (1 + 2σ).
  c.shift = 3.0;
  s = InferenceSchedule(c, 2, 0);
  REQUIRE(s.ok());
  CHECK(s->sigmas[1] == Approx(1.5 / 2.0).epsilon(1e-6));
  CHECK(StaticShift(1.0, 0.3) == double(0.3f));
  CHECK(StaticShift(3.0, 1.0) == 1.0);
  // Dynamic: mu from the sequence length, exponential and linear shifts; σ = 1 stays 1.
  c.use_dynamic_shifting = true;
  CHECK(CalculateShift(c, 256) == Approx(0.5));
  CHECK(CalculateShift(c, 4096) == Approx(1.15));
  CHECK(CalculateShift(c, 2176) == Approx(0.825));
  CHECK(TimeShift(c, 1.15, 1.0) == 1.0);
  CHECK(TimeShift(c, 1.15, 0.5) == Approx(std::exp(1.15) / (std::exp(1.15) + 1)).epsilon(1e-6));
  FlowMatchConfig lin = c;
  lin.time_shift_type = TimeShiftType::kLinear;
  CHECK(TimeShift(lin, 2.0, 0.25) == Approx(2.0 / (2.0 + 3.0)).epsilon(1e-6));
  CHECK(InferenceSchedule(c, 4, 0).status().message().find("sequence length") != std::string::npos);
  // A mu whose e^mu overflows fp32 gives an error, not NaN sigmas.
  CHECK(InferenceSchedule(c, 4, int64_t(1) << 40).status().message().find("not finite") !=
        std::string::npos);
  for (int bad : {0, -3, 10001}) {
    CHECK(InferenceSchedule(c, bad, 4096).status().message().find("[1, 10000]") !=
          std::string::npos);
  }
  // shift_terminal: the last sigma before the terminal 0 is stretched to the terminal value.
  FlowMatchConfig t;
  t.shift = 3.0;
  t.shift_terminal = 0.1;
  s = InferenceSchedule(t, 10, 0);
  REQUIRE(s.ok());
  CHECK(s->sigmas[9] == Approx(0.1).epsilon(1e-6));
  CHECK(s->sigmas[0] == 1.0);
  // invert_sigmas (Mochi): 1 - σ, terminal 1, timesteps of the inverted sigmas.
  FlowMatchConfig inv;
  inv.invert_sigmas = true;
  s = InferenceSchedule(inv, 4, 0);
  REQUIRE(s.ok());
  CHECK(s->sigmas == std::vector<double>{0.0, double(0.25f), 0.5, double(0.75f), 1.0});
  CHECK(s->timesteps[3] == 750.0);
}

TEST_CASE("flow-match Euler step: x + (σ_next − σ)·v in fp32", "[sampling][flowmatch]") {
  torch::Tensor x = torch::tensor({1.0f, -2.0f, 0.5f}), v = torch::tensor({0.5f, 1.0f, -4.0f});
  torch::Tensor y = EulerStep(v, 1.0, 0.75, x);
  CHECK(torch::equal(y, torch::tensor({0.875f, -2.25f, 1.5f})));
  // The step follows the model output's dtype; x may be of another.
  torch::Tensor h = EulerStep(v.to(torch::kBFloat16), 0.5, 0.0, x.to(torch::kFloat64));
  CHECK(h.scalar_type() == torch::kBFloat16);
  // An exact velocity (noise - x0) takes σ = 1 noise to x0 in one step, and any path of steps
  // ends there.
  torch::Tensor x0 = torch::tensor({0.25f, -1.0f}), noise = torch::tensor({1.5f, 0.5f});
  CHECK(torch::allclose(EulerStep(noise - x0, 1.0, 0.0, noise), x0));
  torch::Tensor xt = noise;
  const double sig[] = {1.0, 0.6, 0.3, 0.0};
  for (int i = 0; i < 3; ++i) xt = EulerStep(noise - x0, sig[i], sig[i + 1], xt);
  CHECK(torch::allclose(xt, x0, 1e-6, 1e-6));
}

TEST_CASE("flow-match training: densities, schemes, draws, shifts, weights",
          "[training][flowmatch]") {
  FlowMatchConfig c;
  c.shift = 3.0;
  FlowMatchTable table = TrainTable(c);
  REQUIRE(table.timesteps.size(0) == 1000);
  CHECK(table.sigmas[0].item<float>() == 1.0f);
  // Static shift at construction; none with dynamic shifting.
  CHECK(table.sigmas[999].item<double>() == Approx(3 * 0.001 / (1 + 2 * 0.001)).epsilon(1e-6));
  FlowMatchConfig dyn = c;
  dyn.use_dynamic_shifting = true;
  CHECK(TrainTable(dyn).sigmas[999].item<float>() == 0.001f);
  CHECK(TrainTable(dyn).timesteps[0].item<float>() == 1000.0f);

  // The rule: index = long(u * N), clamped (u = 1 would index past the table in diffusers).
  TimestepDraw d = TimestepsForU(table, torch::tensor({0.0f, 0.0005f, 0.5f, 1.0f}));
  CHECK(d.indices.scalar_type() == torch::kInt64);
  CHECK(torch::equal(d.indices, torch::tensor({0, 0, 500, 999}, torch::kInt64)));
  CHECK(torch::equal(d.sigmas, table.sigmas.index_select(0, d.indices)));
  CHECK(torch::equal(d.timesteps, table.timesteps.index_select(0, d.indices)));

  // Densities: the torch draws diffusers makes, for the same generator seed.
  auto gen = [](uint64_t seed) { return at::detail::createCPUGenerator(seed); };
  torch::Tensor uni = SampleDensity(Density::kUniform, 0, 1, 1.29, 64, gen(5));
  CHECK(torch::equal(uni, torch::rand({64}, gen(5))));
  CHECK(torch::equal(uni, SampleDensity(Density::kUniform, 0, 1, 1.29, 64, gen(5))));
  CHECK_FALSE(torch::equal(uni, SampleDensity(Density::kUniform, 0, 1, 1.29, 64, gen(6))));
  torch::Tensor ln = SampleDensity(Density::kLogitNormal, 0.5, 2.0, 1.29, 4096, gen(5));
  CHECK(torch::equal(ln, torch::sigmoid(torch::normal(0.5, 2.0, {4096}, gen(5)))));
  CHECK(ln.min().item<float>() >= 0);
  CHECK(ln.max().item<float>() <= 1);
  CHECK(torch::logit(ln.to(torch::kFloat64)).mean().item<double>() == Approx(0.5).margin(0.1));
  torch::Tensor v = torch::rand({4096}, gen(9));
  torch::Tensor mode = SampleDensity(Density::kMode, 0, 1, 1.29, 4096, gen(9));
  torch::Tensor want = 1 - v - 1.29 * (torch::cos(M_PI * v / 2).pow(2) - 1 + v);
  CHECK(torch::allclose(mode, want, 0, 1e-6));
  CHECK(mode.min().item<float>() >= 0);
  CHECK(mode.max().item<float>() <= 1);
  // mode_scale 0 is uniform mirrored.
  CHECK(torch::allclose(SampleDensity(Density::kMode, 0, 1, 0.0, 16, gen(2)),
                        1 - torch::rand({16}, gen(2))));
  CHECK(CheckDensityParams(Density::kLogitNormal, 0, 1, 0).ok());
  CHECK_FALSE(CheckDensityParams(Density::kLogitNormal, 0, 0, 0).ok());
  CHECK_FALSE(CheckDensityParams(Density::kLogitNormal, NAN, 1, 0).ok());
  CHECK_FALSE(CheckDensityParams(Density::kMode, 0, 1, INFINITY).ok());
  CHECK(CheckDensityParams(Density::kUniform, NAN, -1, NAN).ok());

  // Names: diffusers' single weighting_scheme, and each half.
  Result<WeightingScheme> ws = ParseWeightingScheme("logit_normal");
  REQUIRE(ws.ok());
  CHECK(ws->density == Density::kLogitNormal);
  CHECK(ws->weighting == LossWeighting::kNone);
  ws = ParseWeightingScheme("cosmap");
  REQUIRE(ws.ok());
  CHECK(ws->density == Density::kUniform);
  CHECK(ws->weighting == LossWeighting::kCosmap);
  CHECK(ParseWeightingScheme("sigma_sqrt")->weighting == LossWeighting::kSigmaSqrt);
  CHECK(ParseWeightingScheme("mode")->density == Density::kMode);
  CHECK(ParseWeightingScheme("none")->density == Density::kUniform);
  CHECK(ParseWeightingScheme("lognorm").status().message().find("lognorm") != std::string::npos);
  CHECK(*ParseDensity("uniform") == Density::kUniform);
  CHECK_FALSE(ParseDensity("sigma_sqrt").ok());
  CHECK(*ParseLossWeighting("cosmap") == LossWeighting::kCosmap);
  CHECK(ParseLossWeighting("mode").status().message().find("mode") != std::string::npos);

  // Weights: closed forms.
  torch::Tensor s = torch::tensor({0.5f, 0.25f, 1.0f});
  CHECK(torch::allclose(LossWeights(LossWeighting::kSigmaSqrt, s),
                        torch::tensor({4.0f, 16.0f, 1.0f})));
  CHECK(torch::allclose(LossWeights(LossWeighting::kCosmap, s),
                        2 / (M_PI * (1 - 2 * s + 2 * s.pow(2)))));
  CHECK(torch::equal(LossWeights(LossWeighting::kNone, s), torch::ones({3})));
  CHECK(LossWeights(LossWeighting::kCosmap, s).scalar_type() == torch::kFloat32);

  // Optional shifts of drawn sigmas.
  torch::Tensor sg = torch::tensor({1.0f, 0.5f, 0.1f});
  CHECK(torch::equal(StaticShiftSigmas(sg, 1.0), sg));
  CHECK(torch::allclose(StaticShiftSigmas(sg, 3.0), 3 * sg / (1 + 2 * sg)));
  FlowMatchConfig flux;
  flux.use_dynamic_shifting = true;
  flux.base_shift = 0.5;
  flux.max_shift = 1.15;
  double mu = CalculateShift(flux, 1024);
  CHECK(torch::allclose(ResolutionShiftSigmas(flux, sg, 1024),
                        std::exp(mu) / (std::exp(mu) + (1 / sg - 1))));
  CHECK(ResolutionShiftSigmas(flux, sg, 1024)[0].item<float>() == 1.0f);
}

TEST_CASE("schedule CLI: flow-match-euler writes the reference schedules",
          "[sampling][flowmatch][cli][fixture]") {
  FIXTURE_SETS(sets, "flowmatch", "scheduler.safetensors");
  TempDir tmp;
  for (const std::string& dir : sets) {
    std::map<std::string, std::string> meta;
    TensorMap ref = MustLoad(dir + "/scheduler.safetensors", &meta);
    for (const std::string& name : ConfigNames(dir)) {
      std::string config = dir + "/" + name + ".scheduler_config.json";
      bool dynamic = MustFlowConfig(MustJson(config)).use_dynamic_shifting;
      for (const InferCase& ic : InferCases(ref, name)) {
        std::string k = CaseKey(name, ic);
        INFO(k);
        text::testing::CliRun r =
            RunTrainCli({"schedule", "--scheduler", "flow-match-euler", "--config", config,
                         "--steps", std::to_string(ic.steps), "--image-seq-len",
                         std::to_string(ic.seq), "--out", tmp / "o.json"});
        INFO(r.err);
        REQUIRE(r.code == 0);
        Json got = MustJson(tmp / "o.json");
        CHECK(got["scheduler"] == "flow-match-euler");
        CHECK(got["steps"] == ic.steps);
        CheckMax("timesteps", AsTensor(got["timesteps"].get<std::vector<double>>()),
                 ref.at(k + ".timesteps"));
        CheckMax("sigmas", AsTensor(got["sigmas"].get<std::vector<double>>()),
                 ref.at(k + ".sigmas"));
        std::string mu_key =
            name + "." + std::to_string(ic.steps) + "." + std::to_string(ic.seq) + ".mu";
        if (dynamic) {
          REQUIRE(got["mu"].is_number());
          CHECK(got["mu"].get<double>() == Approx(std::stod(meta.at(mu_key))).epsilon(1e-12));
        } else {
          CHECK(got["mu"].is_null());
        }
      }
    }
  }
  // Printed to stdout without --out; the config's _class_name picks the scheduler.
  const std::string dir = sets.front();
  Json cfg = MustJson(dir + "/" + ConfigNames(dir).front() + ".scheduler_config.json");
  cfg["_class_name"] = "FlowMatchEulerDiscreteScheduler";
  cfg["use_dynamic_shifting"] = true;
  REQUIRE(WriteFileDurable(tmp / "flux.json", DumpJson(cfg)).ok());
  namespace h = gleaner::testing;
  h::ProcessSpec spec;
  spec.binary = "gleaner-train";
  spec.args = {"schedule",        "--config", tmp / "flux.json", "--steps", "28",
               "--image-seq-len", "4096"};
  spec.stdout_path = tmp / "stdout.txt";
  spec.stderr_path = tmp / "stderr.txt";
  h::Process p(spec);
  std::string error;
  REQUIRE(p.Start(&error));
  std::optional<h::ExitStatus> st = p.Wait(h::Millis(60000));
  REQUIRE(st);
  INFO(p.Stderr());
  CHECK(st->exited);
  CHECK(st->code == 0);
  Result<Json> printed = ParseJson(p.Stdout());
  REQUIRE(printed.ok());
  CHECK((*printed)["scheduler"] == "flow-match-euler");
  CHECK((*printed)["sigmas"].size() == 29);
  CHECK((*printed)["mu"].get<double>() == Approx(1.15));
  CHECK((*printed)["image_seq_len"] == 4096);
}

TEST_CASE("schedule CLI: flow-match bad configs and arguments give one clear error",
          "[sampling][flowmatch][cli]") {
  TempDir tmp;
  const std::pair<const char*, const char*> files[] = {
      {"dyn.json",
       R"({"_class_name": "FlowMatchEulerDiscreteScheduler", "use_dynamic_shifting": true})"},
      {"static.json", R"({"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 3.0})"},
      {"karras.json",
       R"({"_class_name": "FlowMatchEulerDiscreteScheduler", "use_karras_sigmas": true})"},
      {"wrong.json", R"({"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": "big"})"},
      {"euler.json", R"({"_class_name": "EulerDiscreteScheduler"})"}};
  for (const auto& [name, text] : files) REQUIRE(WriteFileDurable(tmp / name, text).ok());
  const std::pair<std::vector<std::string>, const char*> cases[] = {
      {{"--config", tmp / "dyn.json", "--steps", "4"}, "--image-seq-len"},
      {{"--config", tmp / "dyn.json", "--steps", "4", "--image-seq-len", "0"}, "--image-seq-len"},
      {{"--config", tmp / "dyn.json", "--steps", "4", "--image-seq-len", "x"}, "--image-seq-len"},
      {{"--config", tmp / "dyn.json", "--steps", "0", "--image-seq-len", "64"}, "[1, 10000]"},
      {{"--config", tmp / "karras.json", "--steps", "4"}, "use_karras_sigmas"},
      {{"--config", tmp / "wrong.json", "--steps", "4"}, "shift"},
      {{"--scheduler", "flow-match-euler", "--config", tmp / "euler.json", "--steps", "4"},
       "EulerDiscreteScheduler"},
      {{"--config", tmp / "euler.json", "--steps", "4", "--image-seq-len", "64"},
       "flow-match-euler"},
      {{"--scheduler", "heun", "--config", tmp / "static.json", "--steps", "4"},
       "flow-match-euler"}};
  for (const auto& [args, needle] : cases) {
    std::vector<std::string> a = {"schedule"};
    a.insert(a.end(), args.begin(), args.end());
    a.insert(a.end(), {"--out", tmp / "o.json"});
    text::testing::CliRun r = RunTrainCli(a);
    INFO(r.err);
    CHECK(r.code == kExitFailed);
    CHECK(r.err.find(needle) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  // A static-shift config needs no sequence length; mu is null.
  text::testing::CliRun r = RunTrainCli(
      {"schedule", "--config", tmp / "static.json", "--steps", "2", "--out", tmp / "s.json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  Json s = MustJson(tmp / "s.json");
  CHECK(s["mu"].is_null());
  CHECK(s["sigmas"].size() == 3);
  CHECK(s["sigmas"][1].get<double>() == Approx(1.5 / 2.0).epsilon(1e-6));
}
