// gleaner-train: entry point. Dispatches subcommands and job kinds (see kinds.h).
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/train/kinds.h"
#include "shared/trainer_protocol.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("gleaner-train 0.1.0\n");
    return 0;
  }
#ifdef GLEANER_WITH_TORCH
  if (argc >= 2 && std::strcmp(argv[1], "forward") == 0) {
    return gleaner::train::ForwardMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "make-dataset") == 0) {
    return gleaner::train::MakeDatasetMain(argc - 2, argv + 2);
  }
#endif
  std::fprintf(stderr, "gleaner-train: usage: gleaner-train run --spec FILE --work-dir DIR "
                       "[--resume DIR]\n");
  return gleaner::kExitUsage;
}
