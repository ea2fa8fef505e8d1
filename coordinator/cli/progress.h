// Progress for long operations, on stderr: a redrawn bar on a terminal, a few plain lines
// otherwise (logs and CI stay readable).
// Threading: a Progress is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "coordinator/cli/cli.h"

namespace gleaner::cli {

class Progress {
 public:
  // unit "bytes" formats sizes (KB, MB, ...); anything else prints plain counts ("steps").
  Progress(std::string label, int64_t total, std::string unit);
  // Reports `done` of total, with an optional status word ("running"). Throttled on a
  // terminal; on a pipe one line per quarter of the way and per status change.
  void Update(int64_t done, const std::string& status = "");
  // Ends the bar (newline on a terminal) and prints `line` when non-empty.
  void Finish(const std::string& line);

 private:
  std::string label_, unit_, last_status_;
  int64_t total_;
  bool tty_;
  int last_quarter_ = -1;
  int64_t last_draw_ms_ = 0;
  bool drawn_ = false;
};

// Runs `transfer` while a watcher thread reports the bytes moved so far: for a download, the
// size of `path` as it grows; for an upload, the read position of the client's open descriptor
// on `path` (from /proc/self/fdinfo; no progress where that is unavailable).
Failure WithTransferProgress(const std::string& label, const std::string& path, int64_t total,
                             bool upload, const std::function<Failure()>& transfer);

}  // namespace gleaner::cli
