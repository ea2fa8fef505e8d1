// Who a bearer token belongs to, and callers remembered between requests.
//
// Every authenticated request needs its caller (role, id, a node's GPU and state), which costs
// a lookup batch of its own before the handler's batch: two database round trips per request.
// A shell that keeps a CallerCache lets the router skip the first one for a token it has seen:
// the handler runs with the remembered caller, and the router puts a check that the token still
// names exactly that caller (same id and role, key not revoked; a node's GPU, VRAM and state
// unchanged) in front of the handler's first batch, inside the same atomic batch. When anything
// changed, that check fails the whole batch (nothing is written) and the request starts over
// with the usual lookup. A stale entry thus costs a round trip, never a wrong answer
// (router.cc; tests/unit/core/caller_cache_test.cc).
//
// The edge shell keeps one CallerTable per wasm instance (per isolate); the native shell reads
// the caller from SQLite in-process and keeps none.
// Portable: no clock, no threads, no exceptions. CallerTable is not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace gleaner::core {

struct Caller {
  unsigned role = 0;       // one RoleBit (context.h), 0 for public routes
  std::string id;          // api key id (k_...) or node id (n_...)
  std::string gpu_name;    // nodes only
  int64_t vram_mb = 0;     // nodes only
  std::string node_state;  // nodes only: active | quarantined
};

class CallerCache {
 public:
  virtual ~CallerCache() = default;
  // The caller last seen for this token hash (lowercase hex SHA-256 of the token), if any.
  virtual bool Find(const std::string& token_hash, Caller* out) const = 0;
  virtual void Remember(const std::string& token_hash, const Caller& caller) = 0;
  virtual void Forget(const std::string& token_hash) = 0;
};

// Callers in a hash map of at most max_entries; when it is full, it starts over empty (the
// entries are valid tokens in use, so the bound is only a guard against a flood of keys).
class CallerTable : public CallerCache {
 public:
  explicit CallerTable(size_t max_entries = 50000) : max_entries_(max_entries) {}
  bool Find(const std::string& token_hash, Caller* out) const override;
  void Remember(const std::string& token_hash, const Caller& caller) override;
  void Forget(const std::string& token_hash) override;
  size_t size() const { return callers_.size(); }

 private:
  size_t max_entries_;
  std::unordered_map<std::string, Caller> callers_;
};

}  // namespace gleaner::core
