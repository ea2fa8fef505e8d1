#include "tests/integration/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace gleaner::testing {
namespace {

constexpr int kTickMs = 10;

// Closes with RST instead of FIN: the peer sees "connection reset", as after a network cut.
void Reset(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= size_t(w);
  }
  return true;
}

}  // namespace

FaultProxy::FaultProxy(int upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return;
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 128) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    return;
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FaultProxy::~FaultProxy() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void FaultProxy::SetMode(Mode mode) {
  Mode old = Mode(mode_.exchange(int(mode)));
  if (old == Mode::kBlackhole && mode != Mode::kBlackhole) Cut();
}

void FaultProxy::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kTickMs) <= 0) continue;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    ++accepted_;
    if (Mode(mode_.load()) == Mode::kRefuse) {
      Reset(client);
      continue;
    }
    int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // During a partition the upstream is not reached at all.
    int upstream = Mode(mode_.load()) == Mode::kBlackhole ? -1 : ConnectLoopback(upstream_port_);
    if (upstream < 0 && Mode(mode_.load()) != Mode::kBlackhole) {
      Reset(client);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([this, client, upstream] { Pump(client, upstream); });
  }
}

void FaultProxy::Pump(int client, int upstream) {
  const int64_t generation = cut_generation_;
  char buf[64 * 1024];
  bool lost_bytes = upstream < 0;  // born in a partition: can never carry a stream
  while (!stop_) {
    if (cut_generation_ != generation) break;
    const Mode mode = Mode(mode_.load());
    if (lost_bytes && mode != Mode::kBlackhole) break;
    pollfd p[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
    int n = ::poll(p, upstream < 0 ? 1 : 2, kTickMs);
    if (n <= 0) continue;
    bool closed = false;
    for (int i = 0; i < 2 && !closed; ++i) {
      if (p[i].fd < 0 || (p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t got = ::recv(p[i].fd, buf, sizeof buf, 0);
      if (got <= 0) {
        closed = true;
        break;
      }
      if (Mode(mode_.load()) == Mode::kBlackhole) {
        lost_bytes = true;  // thrown away
        continue;
      }
      const int64_t delay = delay_ms_;
      if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      bool cut_here = false;
      if (i == 1) {
        const int64_t at = cut_at_, before = upstream_bytes_.fetch_add(got);
        if (at >= 0 && before + got >= at) {
          cut_here = true;
          got = std::max<int64_t>(0, at - before);
          upstream_bytes_ = at;
          cut_at_ = -1;
        }
      }
      if (cut_generation_ != generation ||
          !WriteAll(i == 0 ? upstream : client, buf, size_t(got))) {
        closed = true;
      }
      if (cut_here) {
        // The client gets exactly those bytes, then the end of the stream: a response that
        // stops short of its Content-Length.
        ::shutdown(client, SHUT_WR);
        ::close(client);
        client = -1;
        closed = true;
      }
    }
    if (closed) break;
  }
  Reset(client);
  Reset(upstream);
}

}  // namespace gleaner::testing
