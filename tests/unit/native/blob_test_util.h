// Helpers shared by the native blob-store tests: a temporary directory, counting a directory's
// entries, and reading a whole blob back.
#pragma once

#include <dirent.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "coordinator/native/blob/blob_store.h"

namespace gleaner::native::testing {

// A fresh directory under /tmp, removed with everything in it on destruction.
struct TempDir {
  TempDir() {
    char t[] = "/tmp/gleaner-blob-XXXXXX";
    char* made = ::mkdtemp(t);
    REQUIRE(made != nullptr);
    path = made;
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path + "'";
    int rc = std::system(cmd.c_str());
    (void)rc;
  }
  std::string path;
};

// Entries of dir other than "." and ".." (0 when it does not exist).
inline int CountEntries(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") ++n;
    }
    ::closedir(d);
  }
  return n;
}

// The whole content of a stored blob (the test fails if it cannot be read).
inline std::string ReadBlob(BlobStore& store, const std::string& key) {
  auto f = store.Open(key);
  REQUIRE(f.ok());
  std::string out(size_t((*f)->size()), '\0');
  auto n = (*f)->ReadAt(0, out.size(), out.empty() ? nullptr : &out[0]);
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

}  // namespace gleaner::native::testing
