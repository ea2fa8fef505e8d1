// gleaner-train subcommands of the image pipeline (torch-free; built into every trainer).
#pragma once

namespace gleaner::train {

// `gleaner-train prepare-images ...` (argv after the subcommand); returns the exit code.
int PrepareImagesMain(int argc, char** argv);

}  // namespace gleaner::train
