// `gleaner-train schedule`: the timesteps (and sigmas, or DDIM's ᾱ pairs) a scheduler config
// gives for a step count, so any reference implementation can be compared with this one.
//
//   gleaner-train schedule [--scheduler euler|ddim|flow-match-euler] --config C --steps N
//                          [--image-seq-len S] [--out O.json]
//
// Without --scheduler the config's _class_name picks it (FlowMatchEulerDiscreteScheduler picks
// flow-match-euler). The JSON (to O.json, or to stdout without --out): {"scheduler", "steps",
// "timesteps", "init_noise_sigma"} plus "sigmas" (Euler) or "prev_timesteps", "alpha_prod_t",
// "alpha_prod_t_prev" (DDIM); flow-match-euler: FluxPipeline's schedule for an image of S
// packed latent tokens, "sigmas" (N + 1 values, the last 0), "image_seq_len" and "mu" (null
// without use_dynamic_shifting, where S may be left out). fp32 values are written as the
// doubles they equal.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/common/command_flags.h"
#include "agent/train/nn/torch_io.h"
#include "agent/train/sampling/ddim.h"
#include "agent/train/sampling/euler_discrete.h"
#include "agent/train/sampling/flow_match.h"

namespace gleaner::train {
namespace {

using namespace sampling;

constexpr const char* kUsage =
    "usage: gleaner-train schedule [--scheduler euler|ddim|flow-match-euler] --config C --steps N "
    "[--image-seq-len S] [--out O.json]";

struct ScheduleArgs {
  std::string scheduler, config, steps, out, image_seq_len;
};

Status WriteOut(const std::string& path, const Json& out) {
  if (!path.empty()) return WriteFileDurable(path, DumpJson(out) + "\n");
  std::string text = DumpJson(out) + "\n";
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return Status::Invalid("could not write to stdout");
  }
  return Status::Ok();
}

Json DoubleList(const std::vector<double>& v) {
  Json a = Json::array();
  for (double x : v) a.push_back(x);
  return a;
}

Status RunFlowMatch(const ScheduleArgs& a, const Json& j, long long steps) {
  Result<FlowMatchConfig> cfg = ParseFlowMatchConfig(j);
  if (!cfg.ok()) return Status::Invalid(a.config + ": " + cfg.status().message());
  long long seq = 0;
  if (!a.image_seq_len.empty()) {
    char* end = nullptr;
    seq = std::strtoll(a.image_seq_len.c_str(), &end, 10);
    if (*end != '\0' || seq < 1) {
      return Status::Invalid("--image-seq-len must be a positive integer");
    }
  } else if (cfg->use_dynamic_shifting) {
    return Status::Invalid(a.config +
                           ": use_dynamic_shifting needs --image-seq-len (the packed latent "
                           "tokens of the image, (H/16)*(W/16) for FLUX)");
  }
  if (steps < 1 || steps > 10000) {
    return Status::Invalid("number of sampling steps must be in [1, 10000], got " +
                           std::to_string(steps));
  }
  Result<FlowMatchSchedule> s = InferenceSchedule(*cfg, int(steps), seq);
  if (!s.ok()) return s.status();
  Json out = {{"scheduler", "flow-match-euler"},
              {"steps", steps},
              {"init_noise_sigma", 1.0},
              {"timesteps", DoubleList(s->timesteps)},
              {"sigmas", DoubleList(s->sigmas)},
              {"image_seq_len", a.image_seq_len.empty() ? Json(nullptr) : Json(seq)},
              {"mu", cfg->use_dynamic_shifting ? Json(s->mu) : Json(nullptr)}};
  return WriteOut(a.out, out);
}

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
  if (a.scheduler == "flow-match-euler" || (a.scheduler.empty() && IsFlowMatchConfig(*j))) {
    return RunFlowMatch(a, *j, steps);
  }
  if (!a.image_seq_len.empty()) {
    return Status::Invalid("--image-seq-len is only for the flow-match-euler scheduler");
  }
  if (!a.scheduler.empty() && a.scheduler != "euler" && a.scheduler != "ddim") {
    return Status::Invalid("unknown scheduler \"" + a.scheduler +
                           "\" (euler, ddim, flow-match-euler)");
  }
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
    return WriteOut(a.out, out);
  });
}

}  // namespace

int ScheduleMain(int argc, char** argv) {
  Result<CommandFlags> flags = ParseCommandFlags(argc, argv, {"--config", "--steps"},
                                                 {"--scheduler", "--out", "--image-seq-len"});
  if (!flags.ok()) {
    std::fprintf(stderr, "gleaner-train schedule: %s\n%s\n", flags.status().message().c_str(),
                 kUsage);
    return kExitUsage;
  }
  ScheduleArgs a{FlagOr(*flags, "--scheduler"), flags->at("--config"), flags->at("--steps"),
                 FlagOr(*flags, "--out"), FlagOr(*flags, "--image-seq-len")};
  Status s = RunSchedule(a);
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train schedule: %s\n", s.ToString().c_str());
    return kExitFailed;
  }
  return 0;
}

}  // namespace gleaner::train
