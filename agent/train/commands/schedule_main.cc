// `gleaner-train schedule`: the timesteps (and sigmas, or DDIM's ᾱ pairs) a scheduler config
// gives for a step count, so any reference implementation can be compared with this one.
//
//   gleaner-train schedule [--scheduler euler|ddim] --config C --steps N --out O.json
//
// Without --scheduler the config's _class_name picks it. O.json: {"scheduler", "steps",
// "timesteps", "init_noise_sigma"} plus "sigmas" (Euler) or "prev_timesteps", "alpha_prod_t",
// "alpha_prod_t_prev" (DDIM). fp32 values are written as the doubles they equal.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/common/command_flags.h"
#include "agent/train/nn/torch_io.h"
#include "agent/train/sampling/ddim.h"
#include "agent/train/sampling/euler_discrete.h"

namespace gleaner::train {
namespace {

using namespace sampling;

constexpr const char* kUsage =
    "usage: gleaner-train schedule [--scheduler euler|ddim] --config C --steps N --out O.json";

struct ScheduleArgs {
  std::string scheduler, config, steps, out;
};

Json FloatList(const torch::Tensor& t) {
  Json a = Json::array();
  torch::Tensor c = t.to(torch::kFloat64).contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) a.push_back(c.data_ptr<double>()[i]);
  return a;
}

Status RunSchedule(const ScheduleArgs& a) {
  char* end = nullptr;
  long long steps = std::strtoll(a.steps.c_str(), &end, 10);
  if (a.steps.empty() || *end != '\0') return Status::Invalid("--steps must be an integer");
  Result<std::string> text = ReadFile(a.config);
  if (!text.ok()) return text.status();
  Result<Json> j = ParseJson(*text);
  if (!j.ok()) return Status::Invalid(a.config + ": " + j.status().message());
  Result<SamplerKind> kind =
      a.scheduler.empty() ? SamplerKindOfConfig(*j) : ParseSamplerKind(a.scheduler);
  if (!kind.ok()) return Status::Invalid(a.config + ": " + kind.status().message());
  Result<SchedulerConfig> cfg = ParseSchedulerConfig(*j, *kind);
  if (!cfg.ok()) return Status::Invalid(a.config + ": " + cfg.status().message());
  return CatchTorch("schedule", [&]() -> Status {
    std::unique_ptr<Scheduler> s = MakeScheduler(*cfg);
    GLEANER_RETURN_IF_ERROR(s->SetTimesteps(steps));
    Json out = {{"scheduler", *kind == SamplerKind::kEuler ? "euler" : "ddim"},
                {"steps", steps},
                {"init_noise_sigma", s->init_noise_sigma()}};
    if (auto* e = dynamic_cast<EulerDiscreteScheduler*>(s.get())) {
      out["timesteps"] = FloatList(e->timesteps());
      out["sigmas"] = FloatList(e->sigmas());
    } else {
      auto* d = static_cast<DdimScheduler*>(s.get());
      Json ts = Json::array(), prev = Json::array(), at = Json::array(), ap = Json::array();
      for (int64_t i = 0; i < steps; ++i) {
        ts.push_back(d->timesteps()[i].item<int64_t>());
        prev.push_back(d->prev_timestep(i));
        at.push_back(d->alpha_prod_t(i).item<double>());
        ap.push_back(d->alpha_prod_t_prev(i).item<double>());
      }
      out["timesteps"] = ts;
      out["prev_timesteps"] = prev;
      out["alpha_prod_t"] = at;
      out["alpha_prod_t_prev"] = ap;
    }
    return WriteFileDurable(a.out, DumpJson(out) + "\n");
  });
}

}  // namespace

int ScheduleMain(int argc, char** argv) {
  Result<CommandFlags> flags =
      ParseCommandFlags(argc, argv, {"--config", "--steps", "--out"}, {"--scheduler"});
  if (!flags.ok()) {
    std::fprintf(stderr, "gleaner-train schedule: %s\n%s\n", flags.status().message().c_str(),
                 kUsage);
    return kExitUsage;
  }
  ScheduleArgs a{FlagOr(*flags, "--scheduler"), flags->at("--config"), flags->at("--steps"),
                 flags->at("--out")};
  Status s = RunSchedule(a);
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train schedule: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
