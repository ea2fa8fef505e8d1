#include "coordinator/dashboard/assets.h"

namespace gleaner::dashboard {

// Defined in the generated dashboard_embedded.cc.
extern const Asset kAssets[];
extern const size_t kAssetCount;
extern const bool kComplete;

const Asset* FindAsset(const std::string& path) {
  const std::string& p = path == "/index.html" ? std::string("/") : path;
  for (size_t i = 0; i < kAssetCount; ++i) {
    if (p == kAssets[i].path) return &kAssets[i];
  }
  return nullptr;
}

bool Complete() {
  return kComplete;
}

}  // namespace gleaner::dashboard
