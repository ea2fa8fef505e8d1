// gleaner-train: entry point. Dispatches subcommands and job kinds (jobs/kinds.h,
// commands/commands.h).
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/common/run_args.h"
#include "agent/train/common/signals.h"
#include "agent/train/jobs/kinds.h"
#ifdef GLEANER_WITH_TORCH
#include "agent/train/nn/torch_env.h"
#endif

namespace {

int Usage() {
  std::fprintf(stderr,
               "gleaner-train: usage: gleaner-train run --spec FILE --work-dir DIR "
               "[--resume DIR] [--cache-dir DIR] [--stop-at-step N]\n"
               "       gleaner-train prepare-images --dataset PATH --resolution R --out FILE "
               "[...]\n");
  return gleaner::kExitUsage;
}

int RunMain(int argc, char** argv) {
  using namespace gleaner::train;
  gleaner::Result<RunArgs> args = ParseRunArgs(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "gleaner-train: %s\n", args.status().message().c_str());
    return gleaner::kExitUsage;
  }
  InstallStopHandlers();
  const std::string& kind = args->spec.kind;
  if (kind == "synthetic") return RunSynthetic(*args);
#ifdef GLEANER_WITH_TORCH
  if (kind == "lora-sd") return RunLoraSd(*args);
#endif
  std::fprintf(stderr, "gleaner-train: job kind '%s' is not built into this trainer\n",
               kind.c_str());
  return gleaner::kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("gleaner-train 0.1.0\n");
    return 0;
  }
#ifdef GLEANER_WITH_TORCH
  gleaner::train::ApplyTorchEnvironment();
#endif
  if (argc >= 2 && std::strcmp(argv[1], "run") == 0) return RunMain(argc - 2, argv + 2);
#ifdef GLEANER_WITH_IMAGES
  if (argc >= 2 && std::strcmp(argv[1], "prepare-images") == 0) {
    return gleaner::train::PrepareImagesMain(argc - 2, argv + 2);
  }
#else
  if (argc >= 2 && std::strcmp(argv[1], "prepare-images") == 0) {
    std::fprintf(stderr,
                 "gleaner-train: prepare-images is not built into this trainer "
                 "(built without the image codecs)\n");
    return gleaner::kExitFailed;
  }
#endif
  if (argc >= 2 && std::strcmp(argv[1], "tokenize") == 0) {
    return gleaner::train::TokenizeMain(argc - 2, argv + 2);
  }
#ifdef GLEANER_WITH_TORCH
  if (argc >= 2 && std::strcmp(argv[1], "forward") == 0) {
    return gleaner::train::ForwardMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "make-dataset") == 0) {
    return gleaner::train::MakeDatasetMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "make-model") == 0) {
    return gleaner::train::MakeModelMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "text-encode") == 0) {
    return gleaner::train::TextEncodeMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "vae") == 0) {
    return gleaner::train::VaeMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "schedule") == 0) {
    return gleaner::train::ScheduleMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "sample") == 0) {
    return gleaner::train::SampleMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "compare-checkpoints") == 0) {
    return gleaner::train::CompareCheckpointsMain(argc - 2, argv + 2);
  }
#endif
  return Usage();
}
