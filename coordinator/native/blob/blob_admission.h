// Which blob transfers may start: the bounds that keep one client from holding the workers.
//   - at most one PUT per key at a time (two bodies racing for one object; and a client cannot
//     hold several workers with one upload URL). A second one is 503, not 409: an agent that
//     retries an upload while its first attempt still holds the key must retry, not conclude
//     that its lease is lost;
//   - at most max_per_key GETs/HEADs of one key at a time;
//   - at most max_total transfers at all, fewer than the event loop's workers, so that some
//     are always left for other transfers' neighbours and background tasks.
// A refused transfer is answered on the loop, before a worker is taken (503 with Retry-After).
// Slow transfers are bounded separately (blob_transfer.h: minimum rate). Threading: all
// methods are thread-safe; a Ticket releases its slot when destroyed, on any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "shared/status.h"

namespace gleaner::native {

struct BlobAdmissionLimits {
  int max_total = 48;
  int max_per_key = 8;
};

class BlobAdmission {
 public:
  explicit BlobAdmission(BlobAdmissionLimits limits) : limits_(limits) {}

  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    friend class BlobAdmission;
    Ticket(BlobAdmission* owner, std::string key, bool put)
        : owner_(owner), key_(std::move(key)), put_(put) {}
    BlobAdmission* owner_;
    std::string key_;
    bool put_;
  };

  // A slot for a transfer of key (put: an upload), or Unavailable (an upload of key is in
  // progress, too many transfers of key, or in all).
  Result<std::shared_ptr<Ticket>> Admit(const std::string& key, bool put);

  int active() const;

 private:
  struct PerKey {
    int gets = 0;
    bool put = false;
  };
  void Release(const std::string& key, bool put);

  const BlobAdmissionLimits limits_;
  mutable std::mutex mu_;
  int total_ = 0;
  std::map<std::string, PerKey> keys_;
};

}  // namespace gleaner::native
