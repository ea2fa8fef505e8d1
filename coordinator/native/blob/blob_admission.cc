#include "coordinator/native/blob/blob_admission.h"

namespace gleaner::native {

BlobAdmission::Ticket::~Ticket() {
  owner_->Release(key_, put_);
}

Result<std::shared_ptr<BlobAdmission::Ticket>> BlobAdmission::Admit(const std::string& key,
                                                                    bool put) {
  std::lock_guard<std::mutex> lock(mu_);
  PerKey& k = keys_[key];
  Status refused;
  if (put && k.put) {
    refused = Status::Unavailable("an upload to this key is in progress; retry when it has ended");
  } else if (!put && k.gets >= limits_.max_per_key) {
    refused = Status::Unavailable("too many transfers of this object at once; retry shortly");
  } else if (total_ >= limits_.max_total) {
    refused = Status::Unavailable("too many blob transfers at once; retry shortly");
  }
  if (!refused.ok()) {
    if (!k.put && k.gets == 0) keys_.erase(key);
    return refused;
  }
  if (put) {
    k.put = true;
  } else {
    ++k.gets;
  }
  ++total_;
  return std::shared_ptr<Ticket>(new Ticket(this, key, put));
}

void BlobAdmission::Release(const std::string& key, bool put) {
  std::lock_guard<std::mutex> lock(mu_);
  --total_;
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  if (put) {
    it->second.put = false;
  } else {
    --it->second.gets;
  }
  if (!it->second.put && it->second.gets == 0) keys_.erase(it);
}

int BlobAdmission::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

}  // namespace gleaner::native
