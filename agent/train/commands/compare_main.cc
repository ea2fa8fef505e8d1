// `gleaner-train compare-checkpoints A B [--tolerance T]`: the replay comparison of verified
// training, run from outside (an operator or a verifier checking a non-exact device pair).
//
// A, B: checkpoint directories or LoRA .safetensors files (replay_distance.h). Prints one JSON
// line {"tensor", "distance" (null when infinite), "reason", "median", "tensors", "tolerance",
// "within"} and exits 0 when the worst tensor is within T (default 0: every value equal), 1 when
// it is not, kExitFailed (2) when A or B cannot be read or compared, kExitUsage on a bad command
// line.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/common/command_flags.h"
#include "agent/train/training/replay_distance.h"
#include "shared/json.h"

namespace gleaner::train {

int CompareCheckpointsMain(int argc, char** argv) {
  const char* usage = "usage: gleaner-train compare-checkpoints A B [--tolerance T]";
  if (argc < 2 || argv[0][0] == '-' || argv[1][0] == '-') {
    std::fprintf(stderr, "gleaner-train: %s\n", usage);
    return kExitUsage;
  }
  Result<CommandFlags> flags = ParseCommandFlags(argc - 2, argv + 2, {}, {"--tolerance"});
  double tolerance = 0;
  if (flags.ok() && !FlagOr(*flags, "--tolerance").empty()) {
    std::string t = FlagOr(*flags, "--tolerance");
    char* end = nullptr;
    tolerance = std::strtod(t.c_str(), &end);
    if (*end != '\0' || !std::isfinite(tolerance) || tolerance < 0) {
      std::fprintf(stderr, "gleaner-train: --tolerance must be a finite number >= 0\n");
      return kExitUsage;
    }
  }
  if (!flags.ok()) {
    std::fprintf(stderr, "gleaner-train: %s; %s\n", flags.status().message().c_str(), usage);
    return kExitUsage;
  }
  Result<TensorMap> a = training::LoadLoraForComparison(argv[0]);
  Result<TensorMap> b = a.ok() ? training::LoadLoraForComparison(argv[1]) : a;
  if (!a.ok() || !b.ok()) {
    const Status& s = a.ok() ? b.status() : a.status();
    std::fprintf(stderr, "gleaner-train: compare-checkpoints: %s\n", s.message().c_str());
    return kExitFailed;
  }
  Result<training::ReplayDistance> d = training::CompareLora(*a, *b, tolerance);
  if (!d.ok()) {
    std::fprintf(stderr, "gleaner-train: compare-checkpoints: %s\n", d.status().message().c_str());
    return kExitFailed;
  }
  Json line = {{"tensor", d->worst_tensor},
               {"distance", std::isinf(d->worst) ? Json(nullptr) : Json(d->worst)},
               {"reason", d->reason},
               {"median", std::isinf(d->median) ? Json(nullptr) : Json(d->median)},
               {"tensors", d->tensors},
               {"tolerance", tolerance},
               {"within", d->within}};
  std::printf("%s\n", DumpJson(line).c_str());
  return d->within ? 0 : 1;
}

}  // namespace gleaner::train
