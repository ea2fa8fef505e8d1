// FaultProxy: a loopback TCP proxy for network-fault tests. It listens on 127.0.0.1 (port 0)
// and forwards every connection to 127.0.0.1:<upstream>, byte for byte, until told otherwise:
//   kPass       forward (after SetDelay: each chunk waits that long before it is passed on);
//   kRefuse     new connections are accepted and reset at once (a server that is down);
//   kBlackhole  bytes in both directions are read and thrown away, nothing is answered and new
//               connections hang the same way (a partition: the client sees only timeouts).
// Cut() resets every open connection (RST); CutAfterUpstreamBytes ends one mid-response. Switching
// from kBlackhole back to kPass cuts the connections that lost bytes, so no stream is ever silently
// corrupted. Threads: one accept thread and one thread per connection (poll with a short tick, so
// mode changes apply within ~10 ms). All methods are thread-safe; the destructor closes everything.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gleaner::testing {

class FaultProxy {
 public:
  enum class Mode { kPass, kRefuse, kBlackhole };

  explicit FaultProxy(int upstream_port);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  void SetMode(Mode mode);
  void SetDelay(std::chrono::milliseconds delay) { delay_ms_ = delay.count(); }
  void Cut() { ++cut_generation_; }

  int64_t accepted() const { return accepted_; }
  // Bytes passed on from the upstream server to clients so far (what the server sent).
  int64_t upstream_bytes() const { return upstream_bytes_; }
  // Passes on n more bytes from upstream, then ends the client's side of the connection that
  // carried them (all n bytes delivered, then EOF: a response cut short), once.
  void CutAfterUpstreamBytes(int64_t n) { cut_at_ = upstream_bytes_ + n; }

 private:
  void AcceptLoop();
  void Pump(int client, int upstream);

  int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> mode_{int(Mode::kPass)};
  std::atomic<int64_t> delay_ms_{0};
  std::atomic<int64_t> cut_generation_{0};
  std::atomic<int64_t> accepted_{0};
  std::atomic<int64_t> upstream_bytes_{0};
  std::atomic<int64_t> cut_at_{-1};
  std::mutex mu_;  // guards threads_
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace gleaner::testing
