#include "coordinator/core/rate_limit.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace gleaner::core {
namespace {

bool ParseNumber(const std::string& s, double* out) {
  if (s.empty() || s.size() > 32) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || c == '.')) return false;
  }
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*out);
}

std::string Number(double v) {
  if (v == std::floor(v) && v < 1e15) return std::to_string(int64_t(v));
  std::string s = std::to_string(v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

}  // namespace

Result<RateLimit> ParseRateLimit(const std::string& text) {
  RateLimit limit;
  if (text == "off" || text == "0") return limit;
  size_t colon = text.find(':');
  double rate = 0, burst = 0;
  if (colon == std::string::npos || !ParseNumber(text.substr(0, colon), &rate) ||
      !ParseNumber(text.substr(colon + 1), &burst)) {
    return Status::Invalid(
        "rate limit must be RATE:BURST (requests per second : bucket size) "
        "or off, got '" +
        text + "'");
  }
  if (!(rate > 0 && rate <= 1e6) || !(burst >= 1 && burst <= 1e6)) {
    return Status::Invalid("rate limit '" + text +
                           "': rate must be in (0, 1e6] and burst in [1, 1e6]");
  }
  limit.per_second = rate;
  limit.burst = burst;
  return limit;
}

std::string FormatRateLimit(const RateLimit& limit) {
  if (!limit.limited()) return "off";
  return Number(limit.per_second) + ":" + Number(limit.burst);
}

std::string AddressBucket(const std::string& addr) {
  if (addr.find(':') == std::string::npos) return addr;
  if (addr.find('.') != std::string::npos) return addr.substr(addr.rfind(':') + 1);
  // Expand "::" and keep the first four groups.
  auto split = [](const std::string& part, std::vector<std::string>* out) {
    if (part.empty()) return true;
    for (size_t i = 0;;) {
      size_t colon = part.find(':', i);
      std::string group = part.substr(i, colon == std::string::npos ? colon : colon - i);
      if (group.empty() || group.size() > 4) return false;
      for (char c : group) {
        if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
      }
      out->push_back(group);
      if (colon == std::string::npos) return true;
      i = colon + 1;
    }
  };
  const size_t dc = addr.find("::");
  const bool gap = dc != std::string::npos;
  std::vector<std::string> head, tail;
  if (!split(gap ? addr.substr(0, dc) : addr, &head)) return addr;
  if (gap && (addr.find("::", dc + 1) != std::string::npos || !split(addr.substr(dc + 2), &tail))) {
    return addr;
  }
  if (head.size() + tail.size() > 8 || (!gap && head.size() != 8)) return addr;
  std::vector<std::string> groups = head;
  groups.resize(8 - tail.size(), "0");
  groups.insert(groups.end(), tail.begin(), tail.end());
  std::string out;
  for (int g = 0; g < 4; ++g) {
    unsigned long v = std::strtoul(groups[size_t(g)].c_str(), nullptr, 16);
    char buf[8];
    std::snprintf(buf, sizeof buf, "%lx", v);
    out += std::string(g ? ":" : "") + buf;
  }
  return out + "::/64";
}

RateDecision TakeToken(TokenBucket* b, const RateLimit& limit, int64_t now_ms) {
  RateDecision d;
  if (!limit.limited()) return d;
  if (b->fresh) {
    b->fresh = false;
    b->tokens = limit.burst;
    b->updated_ms = now_ms;
  }
  if (now_ms > b->updated_ms) {
    b->tokens = std::min(limit.burst,
                         b->tokens + double(now_ms - b->updated_ms) / 1000.0 * limit.per_second);
    b->updated_ms = now_ms;
  }
  // A configuration change may have lowered the burst below what the bucket holds.
  b->tokens = std::min(b->tokens, limit.burst);
  if (b->tokens >= 1.0) {
    b->tokens -= 1.0;
  } else {
    d.allowed = false;
    d.retry_after_s = (1.0 - b->tokens) / limit.per_second;
  }
  b->full_at_ms =
      b->updated_ms + int64_t(std::ceil((limit.burst - b->tokens) / limit.per_second * 1000.0));
  return d;
}

RateDecision BucketTable::Take(const std::string& key, const RateLimit& limit, int64_t now_ms) {
  if (!limit.limited()) return RateDecision{};
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_keys_) Prune(now_ms);
    it = buckets_.emplace(key, TokenBucket{}).first;
  }
  return TakeToken(&it->second, limit, now_ms);
}

void BucketTable::Prune(int64_t now_ms) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    it = it->second.full_at_ms <= now_ms ? buckets_.erase(it) : std::next(it);
  }
  if (buckets_.size() < max_keys_) return;
  std::vector<int64_t> times;
  times.reserve(buckets_.size());
  for (const auto& kv : buckets_) times.push_back(kv.second.updated_ms);
  auto mid = times.begin() + std::ptrdiff_t(times.size() / 2);
  std::nth_element(times.begin(), mid, times.end());
  const int64_t cut = *mid;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    it = it->second.updated_ms <= cut ? buckets_.erase(it) : std::next(it);
  }
}

}  // namespace gleaner::core
