// The operator dashboard's files, compiled into gleaner-coordinator (no CDN, no files at run
// time). Generated at build time by embed_assets.cmake from coordinator/dashboard/src/ and the
// pinned uPlot in node_modules/ (npm ci); without node_modules the build embeds a placeholder
// page that says how to get the real one.
// Threading: immutable data; safe from any thread.
#pragma once

#include <cstddef>
#include <string>

namespace gleaner::dashboard {

struct Asset {
  const char* path;          // URL path: "/" (the page) or "/dashboard/<file>"
  const char* content_type;  // e.g. "text/javascript; charset=utf-8"
  const unsigned char* data;
  size_t size;
};

// The asset served at this URL path, or nullptr.
const Asset* FindAsset(const std::string& path);

// False when the build found no uPlot and embedded the placeholder page.
bool Complete();

}  // namespace gleaner::dashboard
