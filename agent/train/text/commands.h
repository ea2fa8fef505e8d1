// gleaner-train subcommands of the text pipeline (argv after the subcommand's name); each
// returns a process exit code: 0, kExitFailed (one line on stderr) or kExitUsage.
//
//   tokenize --tokenizer DIR --prompts P.json [--max-length N] [--pad-token T] --out O.json
//   text-encode --config C --weights W --inputs I [--lora L] [--grad-weights R] --out O
//
// See docs/training.md for the file formats.
#pragma once

namespace gleaner::train::text {

int TokenizeMain(int argc, char** argv);
#ifdef GLEANER_WITH_TORCH
int TextEncodeMain(int argc, char** argv);
#endif

}  // namespace gleaner::train::text
