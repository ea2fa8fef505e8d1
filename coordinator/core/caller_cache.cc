#include "coordinator/core/caller_cache.h"

namespace gleaner::core {

bool CallerTable::Find(const std::string& token_hash, Caller* out) const {
  auto it = callers_.find(token_hash);
  if (it == callers_.end()) return false;
  *out = it->second;
  return true;
}

void CallerTable::Remember(const std::string& token_hash, const Caller& caller) {
  if (callers_.size() >= max_entries_ && callers_.find(token_hash) == callers_.end()) {
    callers_.clear();
  }
  callers_[token_hash] = caller;
}

void CallerTable::Forget(const std::string& token_hash) {
  callers_.erase(token_hash);
}

}  // namespace gleaner::core
