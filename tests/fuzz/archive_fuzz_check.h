// Shared by the zip and tar fuzz targets: open with small limits, then read every file whole
// and in part; whatever opens must read back within its declared sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/train/images/archive.h"

inline void CheckArchive(const uint8_t* data, size_t size) {
  using namespace gleaner::images;
  ArchiveLimits limits;
  limits.max_entries = 64;
  limits.max_entry_bytes = 1 << 20;
  limits.max_total_bytes = 4 << 20;
  auto r = OpenArchive(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!r.ok()) return;
  const FileSet& f = **r;
  uint64_t total = 0;
  for (size_t i = 0; i < f.files().size(); ++i) {
    const ArchiveFile& a = f.files()[i];
    if (a.path.empty() || a.path[0] == '/' || IsHiddenPath(a.path)) abort();
    if (i > 0 && !(f.files()[i - 1].path < a.path)) abort();
    total += a.size;
    auto head = f.Read(i, 4);
    if (head.ok() && head->size() != (a.size < 4 ? a.size : 4)) abort();
    auto whole = f.Read(i);
    if (whole.ok() && whole->size() != a.size) abort();
  }
  if (total > limits.max_total_bytes || f.files().size() > 64) abort();
}
