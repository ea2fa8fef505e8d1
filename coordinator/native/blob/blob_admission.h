// Which blob transfers may start, for the threads of the native shell: the core's
// BlobAdmissionTable (coordinator/core/blob_policy.h: one upload per key, bounded reads per key
// and transfers in all) behind a mutex, with a ticket that gives the slot back. The limits keep
// one client from holding the workers: max_total is fewer than the event loop's workers, so some
// are always left for other transfers and background tasks. A refused transfer is answered on
// the loop, before a worker is taken (503 with Retry-After). Threading: thread-safe; a Ticket
// releases its slot when destroyed, on any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "coordinator/core/blob_policy.h"

namespace gleaner::native {

class BlobAdmission {
 public:
  explicit BlobAdmission(core::BlobAdmissionLimits limits) : table_(limits) {}

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

  // A slot for a transfer of key (put: an upload), or null with *refused set to the core's
  // answer (503: an upload of key is in progress, too many transfers of key, or in all).
  std::shared_ptr<Ticket> Admit(const std::string& key, bool put, core::HttpResponse* refused);

  int active() const;

 private:
  mutable std::mutex mu_;
  core::BlobAdmissionTable table_;
};

}  // namespace gleaner::native
