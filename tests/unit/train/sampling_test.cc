// Samplers: noise schedules, Euler/DDIM timesteps and sigmas, and guided trajectories against
// diffusers' reference sets (scheduler-ref-*), plus what the sets do not cover (other spacings
// and prediction types, config refusals) and `gleaner-train schedule`.
#include <cmath>

#include "agent/train/sampling/ddim.h"
#include "agent/train/sampling/euler_discrete.h"
#include "agent/train/sampling/sampling_loop.h"
#include "ref_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner;
using namespace gleaner::train::testing;
using namespace gleaner::train::sampling;

namespace {

std::unique_ptr<Scheduler> MustScheduler(const Json& config, SamplerKind kind, int64_t steps) {
  Result<SchedulerConfig> c = ParseSchedulerConfig(config, kind);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  std::unique_ptr<Scheduler> s = MakeScheduler(*c);
  REQUIRE(s->SetTimesteps(steps).ok());
  return s;
}

// |got - ref| <= 1e-6 |ref| for every value (the reference sets' bound for schedule values).
void CheckValues(const std::string& what, const std::vector<double>& got, const Json& ref) {
  INFO(what);
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i);
    CHECK(std::abs(got[i] - ref[i].get<double>()) <= 1e-6 * std::abs(ref[i].get<double>()));
  }
}

std::vector<double> Values(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

std::string Message(const Result<SchedulerConfig>& r) {
  return r.status().message();
}

}  // namespace

TEST_CASE("noise schedules equal diffusers' fp32 alphas_cumprod", "[sampling][fixture]") {
  FIXTURE_SETS(sets, "scheduler", "schedules.json");
  for (const std::string& dir : sets) {
    Json ref = MustJson(dir + "/schedules.json")["alphas_cumprod_fp32"];
    for (const char* file : {"/euler_config.json", "/ddim_config.json"}) {
      Result<SchedulerConfig> c = LoadSchedulerConfig(dir + file, SamplerKind::kDdim);
      REQUIRE(c.ok());
      CheckValues(dir + file, Values(AlphasCumprod(c->noise)), ref);
    }
  }
}

TEST_CASE("Euler timesteps, sigmas and init_noise_sigma match diffusers", "[sampling][fixture]") {
  FIXTURE_SETS(sets, "scheduler", "schedules.json");
  for (const std::string& dir : sets) {
    Json config = MustJson(dir + "/euler_config.json");
    Json ref = MustJson(dir + "/schedules.json")["euler"];
    REQUIRE(ref.size() >= 4);
    for (const auto& [n, want] : ref.items()) {
      INFO(dir << ": " << n << " steps");
      auto s = MustScheduler(config, SamplerKind::kEuler, std::stoll(n));
      auto* e = dynamic_cast<EulerDiscreteScheduler*>(s.get());
      REQUIRE(e != nullptr);
      CHECK(e->timesteps().scalar_type() == torch::kFloat32);
      std::vector<double> ts = Values(e->timesteps());
      REQUIRE(ts.size() == want["timesteps"].size());
      for (size_t i = 0; i < ts.size(); ++i) CHECK(ts[i] == want["timesteps"][i].get<double>());
      CheckValues("sigmas", Values(e->sigmas()), want["sigmas"]);
      CheckValues("init_noise_sigma", {e->init_noise_sigma()},
                  Json::array({want["init_noise_sigma"]}));
    }
  }
}

TEST_CASE("DDIM timesteps and alpha products match diffusers", "[sampling][fixture]") {
  FIXTURE_SETS(sets, "scheduler", "schedules.json");
  for (const std::string& dir : sets) {
    Json config = MustJson(dir + "/ddim_config.json");
    Json ref = MustJson(dir + "/schedules.json")["ddim"];
    REQUIRE(ref.size() >= 4);
    for (const auto& [n, want] : ref.items()) {
      INFO(dir << ": " << n << " steps");
      auto s = MustScheduler(config, SamplerKind::kDdim, std::stoll(n));
      auto* d = dynamic_cast<DdimScheduler*>(s.get());
      REQUIRE(d != nullptr);
      CHECK(d->timesteps().scalar_type() == torch::kInt64);
      REQUIRE(d->num_inference_steps() == int64_t(want["timesteps"].size()));
      std::vector<double> at, ap;
      for (int64_t i = 0; i < d->num_inference_steps(); ++i) {
        CHECK(d->timesteps()[i].item<int64_t>() == want["timesteps"][i].get<int64_t>());
        CHECK(d->prev_timestep(i) == want["prev_timesteps"][i].get<int64_t>());
        at.push_back(d->alpha_prod_t(i).item<double>());
        ap.push_back(d->alpha_prod_t_prev(i).item<double>());
      }
      CheckValues("alpha_prod_t", at, want["alpha_prod_t"]);
      CheckValues("alpha_prod_t_prev", ap, want["alpha_prod_t_prev"]);
      CHECK(d->init_noise_sigma() == want["init_noise_sigma"].get<double>());
    }
  }
}

TEST_CASE("guided Euler and DDIM trajectories match diffusers", "[sampling][fixture]") {
  FIXTURE_SETS(sets, "scheduler", "trajectory.safetensors");
  for (const std::string& dir : sets) {
    std::map<std::string, std::string> meta;
    Result<TensorMap> in = LoadSafetensors(dir + "/inputs.safetensors", &meta);
    REQUIRE(in.ok());
    double g = std::stod(meta.at("guidance_scale"));
    int64_t steps = std::stoll(meta.at("num_inference_steps"));
    TensorMap ref = MustLoad(dir + "/trajectory.safetensors");
    // The reference's fake model: conditional and unconditional outputs from one paired batch.
    PairedDenoiseFn fake = [](const torch::Tensor& x2, const torch::Tensor& t) {
      double tf = t.item<double>();
      std::vector<torch::Tensor> x = x2.chunk(2);
      torch::Tensor u = 0.2 * torch::tanh(x[0]) - 0.0005 * tf;
      torch::Tensor c = 0.3 * torch::tanh(x[1]) + 0.001 * tf;
      return Result<torch::Tensor>(torch::cat({u, c}));
    };
    for (const char* name : {"euler", "ddim"}) {
      std::string p = name;
      INFO(dir << ": " << p);
      auto s = MustScheduler(MustJson(dir + "/" + p + "_config.json"),
                             p == "euler" ? SamplerKind::kEuler : SamplerKind::kDdim, steps);
      std::vector<torch::Tensor> xs = {in->at("noise") * s->init_noise_sigma()}, ins, outs, x0s, ts;
      Result<torch::Tensor> x =
          Sample(*s, in->at("noise"), WithGuidance(fake, g), [&](const StepRecord& r) {
            xs.push_back(r.sample);
            ins.push_back(r.model_input);
            outs.push_back(r.model_output);
            x0s.push_back(r.pred_original_sample);
            ts.push_back(r.timestep);
          });
      REQUIRE(x.ok());
      CHECK(torch::equal(*x, xs.back()));
      CHECK(torch::equal(torch::stack(ts), ref.at(p + "_timesteps")));
      const std::pair<const char*, std::vector<torch::Tensor>*> parts[] = {
          {"_x", &xs}, {"_model_in", &ins}, {"_model_out", &outs}, {"_pred_x0", &x0s}};
      for (const auto& [suffix, got] : parts) {
        const torch::Tensor& want = ref.at(p + suffix);
        double peak = want.abs().max().item<double>();
        CheckClose(p + suffix, torch::stack(*got), want, 1e-5 * peak, 1e-5);
      }
    }
  }
}

TEST_CASE("trailing and linspace spacings follow numpy's rounding", "[sampling]") {
  Json base = {{"_class_name", "DDIMScheduler"},
               {"beta_schedule", "scaled_linear"},
               {"beta_start", 0.00085},
               {"beta_end", 0.012},
               {"clip_sample", false}};
  auto ddim_steps = [&](const char* spacing, int64_t n) {
    Json c = base;
    c["timestep_spacing"] = spacing;
    std::vector<int64_t> out;
    auto s = MustScheduler(c, SamplerKind::kDdim, n);
    for (int64_t i = 0; i < n; ++i) out.push_back(s->timesteps()[i].item<int64_t>());
    return out;
  };
  // arange(1000, 0, -62.5) holds 937.5, 812.5, 687.5, ...: numpy rounds them half to even
  // (938, 812, 688, ...), not half away from zero (812.5 would give 813).
  CHECK(ddim_steps("trailing", 16) == std::vector<int64_t>{999, 937, 874, 811, 749, 687, 624, 561,
                                                           499, 437, 374, 311, 249, 187, 124, 61});
  CHECK(ddim_steps("trailing", 4) == std::vector<int64_t>{999, 749, 499, 249});
  CHECK(ddim_steps("linspace", 4) == std::vector<int64_t>{999, 666, 333, 0});
  CHECK(ddim_steps("leading", 3) == std::vector<int64_t>{666, 333, 0});
  // Euler keeps linspace values unrounded (fp32): 999 · i / 6.
  Json e = base;
  e["_class_name"] = "EulerDiscreteScheduler";
  auto s = MustScheduler(e, SamplerKind::kEuler, 7);  // Euler's default spacing is linspace
  std::vector<double> ts = Values(s->timesteps());
  REQUIRE(ts.size() == 7);
  CHECK(ts[0] == 999.0);
  CHECK(ts[1] == double(float(999.0 / 6 * 5)));
  CHECK(ts[6] == 0.0);
  CHECK(s->init_noise_sigma() == Values(dynamic_cast<EulerDiscreteScheduler&>(*s).sigmas())[0]);
}

TEST_CASE("every prediction type recovers x0 from an exact model output", "[sampling]") {
  torch::Generator gen = at::detail::createCPUGenerator(5);
  torch::Tensor x0 = torch::randn({2, 4, 8, 8}, gen), eps = torch::randn({2, 4, 8, 8}, gen);
  for (SamplerKind kind : {SamplerKind::kEuler, SamplerKind::kDdim}) {
    for (const char* pred : {"epsilon", "v_prediction", "sample"}) {
      INFO((kind == SamplerKind::kEuler ? "euler " : "ddim ") << pred);
      Json c = {{"beta_schedule", "scaled_linear"},
                {"beta_start", 0.00085},
                {"beta_end", 0.012},
                {"prediction_type", pred},
                {"clip_sample", false},
                {"timestep_spacing", "leading"},
                {"steps_offset", 1}};
      auto s = MustScheduler(c, kind, 10);
      const int64_t i = 3;
      torch::Tensor a = s->alphas_cumprod()[int64_t(s->timestep(i))];
      // The noisy sample as the model sees it, and the sampler's own x.
      torch::Tensor x_in = a.sqrt() * x0 + (1 - a).sqrt() * eps;
      torch::Tensor x = kind == SamplerKind::kEuler ? x_in * (1 / a.sqrt()) : x_in;
      CHECK(torch::allclose(s->ScaleModelInput(x, i), x_in, 1e-5, 1e-5));
      std::string p = pred;
      torch::Tensor out = p == "epsilon"  ? eps
                          : p == "sample" ? x0
                                          : a.sqrt() * eps - (1 - a).sqrt() * x0;
      StepOutput o = s->Step(out, i, x);
      CHECK(torch::allclose(o.pred_original_sample, x0, 1e-4, 1e-4));
    }
  }
}

TEST_CASE("beta schedules: linear, squaredcos_cap_v2, trained, zero terminal SNR", "[sampling]") {
  NoiseSchedule lin;
  torch::Tensor b = Betas(lin);
  CHECK(b[0].item<float>() == float(0.0001));
  CHECK(b[-1].item<float>() == float(0.02));
  NoiseSchedule cos;
  cos.beta_schedule = "squaredcos_cap_v2";
  b = Betas(cos);
  auto ab = [](double t) { return std::pow(std::cos((t + 0.008) / 1.008 * M_PI / 2), 2); };
  CHECK(b[0].item<float>() == float(1 - ab(0.001) / ab(0.0)));
  CHECK(b[-1].item<float>() == float(0.999));  // capped at max_beta
  NoiseSchedule trained;
  trained.num_train_timesteps = 3;
  trained.trained_betas = {0.1, 0.2, 0.3};
  CHECK(AlphasCumprod(trained)[2].item<float>() == Approx(0.9 * 0.8 * 0.7).epsilon(1e-6));
  NoiseSchedule zsnr;
  zsnr.beta_schedule = "scaled_linear";
  zsnr.beta_start = 0.00085;
  zsnr.beta_end = 0.012;
  zsnr.rescale_betas_zero_snr = true;
  torch::Tensor ac = AlphasCumprod(zsnr);
  CHECK(ac[-1].item<float>() == Approx(0.0).margin(1e-12));
  CHECK(ac[0].item<float>() == Approx(ScaledLinearAlphasCumprod()[0].item<float>()).epsilon(1e-6));
  // Euler keeps σ_T finite: ᾱ_T = 2^-24.
  Result<SchedulerConfig> c = ParseSchedulerConfig(
      Json{{"beta_schedule", "scaled_linear"}, {"rescale_betas_zero_snr", true}},
      SamplerKind::kEuler);
  REQUIRE(c.ok());
  CHECK(MakeScheduler(*c)->alphas_cumprod()[-1].item<float>() == std::ldexp(1.0f, -24));
}

TEST_CASE("scheduler configs: diffusers defaults, compatible classes, refusals by name",
          "[sampling]") {
  // A PNDM config (SD 1.5's) read as DDIM, as DDIMScheduler.from_config does.
  Json pndm = {{"_class_name", "PNDMScheduler"},
               {"beta_schedule", "scaled_linear"},
               {"beta_start", 0.00085},
               {"beta_end", 0.012},
               {"set_alpha_to_one", false},
               {"skip_prk_steps", true},
               {"steps_offset", 1}};
  Result<SchedulerConfig> c = ParseSchedulerConfig(pndm, SamplerKind::kDdim);
  REQUIRE(c.ok());
  CHECK(c->timestep_spacing == Spacing::kLeading);
  CHECK(c->clip_sample);  // DDIM's default, absent from the PNDM config
  CHECK_FALSE(c->set_alpha_to_one);
  c = ParseSchedulerConfig(Json::object(), SamplerKind::kEuler);
  REQUIRE(c.ok());
  CHECK(c->timestep_spacing == Spacing::kLinspace);
  CHECK(c->noise.beta_schedule == "linear");
  CHECK(SamplerKindOfConfig(Json{{"_class_name", "DDIMScheduler"}}).value() == SamplerKind::kDdim);
  CHECK_FALSE(SamplerKindOfConfig(pndm).ok());
  CHECK(ParseSamplerKind("euler").value() == SamplerKind::kEuler);
  CHECK(ParseSamplerKind("heun").status().message().find("heun") != std::string::npos);

  const std::pair<Json, const char*> bad[] = {
      {{{"_class_name", "FlowMatchEulerDiscreteScheduler"}}, "FlowMatchEulerDiscreteScheduler"},
      {{{"use_karras_sigmas", true}}, "use_karras_sigmas"},
      {{{"use_exponential_sigmas", true}}, "use_exponential_sigmas"},
      {{{"timestep_type", "continuous"}}, "timestep_type"},
      {{{"interpolation_type", "log_linear"}}, "interpolation_type"},
      {{{"beta_schedule", "sigmoid"}}, "beta_schedule"},
      {{{"timestep_spacing", "uniform"}}, "timestep_spacing"},
      {{{"prediction_type", "flow"}}, "prediction_type"},
      {{{"final_sigmas_type", "one"}}, "final_sigmas_type"},
      {{{"beta_start", 0.5}, {"beta_end", 0.1}}, "beta_start"},
      {{{"trained_betas", {0.1, 0.2}}}, "trained_betas"},
      {{{"num_train_timesteps", 0}}, "num_train_timesteps"},
      {{{"steps_offset", -1}}, "steps_offset"}};
  for (const auto& [config, name] : bad) {
    INFO(DumpJson(config));
    Result<SchedulerConfig> r = ParseSchedulerConfig(config, SamplerKind::kEuler);
    REQUIRE_FALSE(r.ok());
    CHECK(Message(r).find(name) != std::string::npos);
  }
  Result<SchedulerConfig> r =
      ParseSchedulerConfig(Json{{"thresholding", true}}, SamplerKind::kDdim);
  REQUIRE_FALSE(r.ok());
  CHECK(Message(r).find("thresholding") != std::string::npos);
  CHECK_FALSE(ParseSchedulerConfig(Json::array(), SamplerKind::kDdim).ok());

  // Step counts: 1..num_train_timesteps, and DDIM timesteps must stay inside the schedule.
  c = ParseSchedulerConfig(Json{{"steps_offset", 1}}, SamplerKind::kDdim);
  REQUIRE(c.ok());
  auto s = MakeScheduler(*c);
  CHECK(s->SetTimesteps(0).message().find("[1, 1000]") != std::string::npos);
  CHECK_FALSE(s->SetTimesteps(1001).ok());
  CHECK(s->SetTimesteps(1000).message().find("timestep 1000") != std::string::npos);
  CHECK(s->SetTimesteps(999).ok());
}

TEST_CASE("spoiled scheduler configs are answered, never crash", "[sampling]") {
  Json full = {{"_class_name", "DDIMScheduler"},
               {"num_train_timesteps", 1000},
               {"beta_start", 0.00085},
               {"beta_end", 0.012},
               {"beta_schedule", "scaled_linear"},
               {"trained_betas", nullptr},
               {"prediction_type", "epsilon"},
               {"timestep_spacing", "trailing"},
               {"steps_offset", 1},
               {"final_sigmas_type", "zero"},
               {"set_alpha_to_one", false},
               {"clip_sample", true},
               {"clip_sample_range", 1.0},
               {"rescale_betas_zero_snr", false},
               {"use_karras_sigmas", false},
               {"timestep_type", "discrete"},
               {"interpolation_type", "linear"},
               {"thresholding", false}};
  int ok = 0, refused = 0;
  for (const Json& c : SpoiledConfigs(full)) {
    for (SamplerKind kind : {SamplerKind::kEuler, SamplerKind::kDdim}) {
      Result<SchedulerConfig> r = ParseSchedulerConfig(c, kind);
      if (!r.ok()) {
        ++refused;
        CHECK_FALSE(r.status().message().empty());
        continue;
      }
      ++ok;
      auto s = MakeScheduler(*r);
      for (int64_t n : {1, 7, 1000}) {
        if (s->SetTimesteps(n).ok()) CHECK(s->num_inference_steps() == n);
      }
    }
  }
  CHECK(ok > 0);
  CHECK(refused > 0);
}

TEST_CASE("guidance and the sampling loop", "[sampling]") {
  torch::Tensor u = torch::full({1, 4, 2, 2}, 1.0), c = torch::full({1, 4, 2, 2}, 3.0);
  CHECK(torch::equal(Guide(u, c, 7.5), torch::full({1, 4, 2, 2}, 16.0)));
  Result<SchedulerConfig> cfg = ParseSchedulerConfig(Json::object(), SamplerKind::kDdim);
  REQUIRE(cfg.ok());
  auto s = MakeScheduler(*cfg);
  torch::Tensor noise = torch::ones({1, 4, 2, 2});
  CHECK_FALSE(Sample(*s, noise, nullptr).ok());  // no timesteps yet
  REQUIRE(s->SetTimesteps(5).ok());
  // The paired model gets [x; x] and its halves are guided.
  int calls = 0;
  DenoiseFn guided = WithGuidance(
      [&](const torch::Tensor& x2, const torch::Tensor&) -> Result<torch::Tensor> {
        ++calls;
        REQUIRE(x2.size(0) == 2);
        CHECK(torch::equal(x2[0], x2[1]));
        return torch::cat(
            {torch::zeros_like(x2[0]).unsqueeze(0), torch::full_like(x2[0], 0.1).unsqueeze(0)});
      },
      2.0);
  int seen = 0;
  Result<torch::Tensor> x = Sample(*s, noise, guided, [&](const StepRecord& r) {
    CHECK(r.index == seen++);
    CHECK(torch::allclose(r.model_output, torch::full({1, 4, 2, 2}, 0.2)));
  });
  REQUIRE(x.ok());
  CHECK(calls == 5);
  CHECK(seen == 5);
  // A failing model stops the loop with its error.
  int steps = 0;
  Result<torch::Tensor> stopped = Sample(
      *s, noise, [&](const torch::Tensor& xin, const torch::Tensor&) -> Result<torch::Tensor> {
        if (steps++ == 2) return Status::Unavailable("stop requested");
        return torch::zeros_like(xin);
      });
  CHECK(stopped.status().message() == "stop requested");
  CHECK(steps == 3);
  // A model output of the wrong shape is an error, not a crash.
  Result<torch::Tensor> wrong = Sample(*s, noise, [](const torch::Tensor&, const torch::Tensor&) {
    return Result<torch::Tensor>(torch::zeros({1, 3, 2, 2}));
  });
  CHECK_FALSE(wrong.ok());
}

TEST_CASE("schedule CLI writes the reference schedules", "[sampling][cli][fixture]") {
  FIXTURE_SETS(sets, "scheduler", "schedules.json");
  TempDir tmp;
  for (const std::string& dir : sets) {
    Json ref = MustJson(dir + "/schedules.json");
    for (const char* name : {"euler", "ddim"}) {
      std::string p = name;
      // The library tests check every step count; here the longest one, through the binary.
      std::string n;
      for (const auto& [k, v] : ref[p].items()) {
        if (n.empty() || std::stoll(k) > std::stoll(n)) n = k;
      }
      {
        const Json& want = ref[p][n];
        INFO(dir << ": " << p << " " << n);
        text::testing::CliRun r =
            RunTrainCli({"schedule", "--scheduler", p, "--config", dir + "/" + p + "_config.json",
                         "--steps", n, "--out", tmp / "o.json"});
        INFO(r.err);
        REQUIRE(r.code == 0);
        Json got = MustJson(tmp / "o.json");
        CHECK(got["timesteps"] == want["timesteps"]);
        CheckValues("init_noise_sigma", {got["init_noise_sigma"].get<double>()},
                    Json::array({want["init_noise_sigma"]}));
        if (p == "euler") {
          std::vector<double> sig = got["sigmas"].get<std::vector<double>>();
          CheckValues("sigmas", sig, want["sigmas"]);
        } else {
          CHECK(got["prev_timesteps"] == want["prev_timesteps"]);
          CheckValues("alpha_prod_t", got["alpha_prod_t"].get<std::vector<double>>(),
                      want["alpha_prod_t"]);
          CheckValues("alpha_prod_t_prev", got["alpha_prod_t_prev"].get<std::vector<double>>(),
                      want["alpha_prod_t_prev"]);
        }
      }
    }
    // Without --scheduler the config's _class_name decides.
    REQUIRE(RunTrainCli({"schedule", "--config", dir + "/ddim_config.json", "--steps", "4", "--out",
                         tmp / "d.json"})
                .code == 0);
    CHECK(MustJson(tmp / "d.json")["scheduler"] == "ddim");
  }
}

TEST_CASE("schedule CLI: bad configs and arguments give one clear error", "[sampling][cli]") {
  TempDir tmp;
  REQUIRE(
      WriteFileDurable(tmp / "karras.json",
                       R"({"_class_name": "EulerDiscreteScheduler", "use_karras_sigmas": true})")
          .ok());
  REQUIRE(
      WriteFileDurable(tmp / "flow.json", R"({"_class_name": "FlowMatchEulerDiscreteScheduler"})")
          .ok());
  REQUIRE(WriteFileDurable(tmp / "ok.json", R"({"_class_name": "EulerDiscreteScheduler"})").ok());
  REQUIRE(WriteFileDurable(tmp / "broken.json", "{").ok());
  const std::pair<std::vector<std::string>, const char*> cases[] = {
      {{"--config", tmp / "karras.json", "--steps", "4"}, "use_karras_sigmas"},
      {{"--scheduler", "ddim", "--config", tmp / "flow.json", "--steps", "4"},
       "FlowMatchEulerDiscreteScheduler"},
      {{"--config", tmp / "broken.json", "--steps", "4"}, "broken.json"},
      {{"--config", tmp / "missing.json", "--steps", "4"}, "missing.json"},
      {{"--config", tmp / "ok.json", "--steps", "0"}, "[1, 1000]"},
      {{"--config", tmp / "ok.json", "--steps", "four"}, "--steps"},
      {{"--scheduler", "lms", "--config", tmp / "ok.json", "--steps", "4"}, "lms"}};
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
  CHECK(RunTrainCli({"schedule", "--config", tmp / "ok.json"}).code == kExitUsage);
  CHECK(RunTrainCli({"schedule", "--bogus", "x"}).code == kExitUsage);
}
