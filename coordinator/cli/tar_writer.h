// A POSIX ustar archive written file by file: what `gleaner jobs submit` uploads as a dataset
// (docs/training.md, "Images and datasets"). Regular files only, mode 0644, mtime 0 and no
// owner names, so the same photos give the same bytes (and the same sha256) every time.
// Names up to 255 bytes (split into prefix/name at a '/'); files up to 8 GiB.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "coordinator/cli/cli.h"

namespace gleaner::cli {

class TarWriter {
 public:
  // Creates (truncates) path.
  explicit TarWriter(const std::string& path);
  ~TarWriter();
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  // Appends the file at `source` under `name` ('/'-separated, relative).
  Failure Add(const std::string& name, const std::string& source);
  // Writes the end-of-archive blocks and closes the file.
  Failure Finish();

 private:
  std::string path_;
  std::FILE* out_ = nullptr;
};

}  // namespace gleaner::cli
