#include "coordinator/native/blob/blob_admission.h"

namespace gleaner::native {

BlobAdmission::Ticket::~Ticket() {
  std::lock_guard<std::mutex> lock(owner_->mu_);
  owner_->table_.Release(key_, put_);
}

std::shared_ptr<BlobAdmission::Ticket> BlobAdmission::Admit(const std::string& key, bool put,
                                                            core::HttpResponse* refused) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto answer = table_.Admit(key, put)) {
    *refused = std::move(*answer);
    return nullptr;
  }
  return std::shared_ptr<Ticket>(new Ticket(this, key, put));
}

int BlobAdmission::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.active();
}

}  // namespace gleaner::native
