#include "tests/bench/coordinator/loadgen.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace gleaner::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  int fd = -1;
  int64_t seq = 0;
  std::string out;
  size_t sent = 0;
  std::string in;
  Clock::time_point started;
};

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (rc != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Parses one complete response at the front of `in`; returns its length (0 = incomplete).
size_t ParseResponse(const std::string& in, int* status, std::string* body, bool* close) {
  size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return 0;
  *status = std::atoi(in.c_str() + 9);
  size_t length = 0;
  size_t line = in.find("\r\n");
  while (line < end) {
    size_t next = in.find("\r\n", line + 2);
    if (next - line > 17 && strncasecmp(in.c_str() + line + 2, "content-length:", 15) == 0) {
      length = size_t(std::atoll(in.c_str() + line + 17));
    }
    if (next - line >= 19 && strncasecmp(in.c_str() + line + 2, "connection: close", 17) == 0) {
      *close = true;
    }
    line = next;
  }
  if (in.size() < end + 4 + length) return 0;
  *body = in.substr(end + 4, length);
  return end + 4 + length;
}

}  // namespace

double LoadResult::Percentile(double p) const {
  if (latencies_ms.empty()) return 0;
  std::vector<double> v = latencies_ms;
  size_t k = std::min(v.size() - 1, size_t(p / 100.0 * double(v.size())));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return v[k];
}

LoadResult RunLoad(const LoadOptions& o) {
  LoadResult result;
  int ep = ::epoll_create1(0);
  std::vector<Conn> conns(size_t(o.connections));
  auto start_request = [&](int c) {
    Conn& k = conns[size_t(c)];
    k.out = o.request(c, k.seq++);
    k.sent = 0;
    k.started = Clock::now();
  };
  auto open = [&](int c) {
    Conn& k = conns[size_t(c)];
    if (k.fd >= 0) {
      ::epoll_ctl(ep, EPOLL_CTL_DEL, k.fd, nullptr);
      ::close(k.fd);
    }
    k.fd = Connect(o.port);
    k.in.clear();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u32 = uint32_t(c);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, k.fd, &ev);
    start_request(c);
  };
  for (int c = 0; c < o.connections; ++c) open(c);
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point measure_from =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup_s));
  const Clock::time_point until = measure_from + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(o.duration_s));
  std::vector<epoll_event> events(size_t(o.connections));
  char buf[65536];
  while (Clock::now() < until) {
    int n = ::epoll_wait(ep, events.data(), int(events.size()), 50);
    for (int e = 0; e < n; ++e) {
      int c = int(events[size_t(e)].data.u32);
      Conn& k = conns[size_t(c)];
      if (events[size_t(e)].events & (EPOLLERR | EPOLLHUP)) {
        if (Clock::now() >= measure_from) ++result.errors;
        open(c);
        continue;
      }
      if ((events[size_t(e)].events & EPOLLOUT) && k.sent < k.out.size()) {
        ssize_t w = ::send(k.fd, k.out.data() + k.sent, k.out.size() - k.sent, MSG_NOSIGNAL);
        if (w > 0) k.sent += size_t(w);
        if (k.sent == k.out.size()) {
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u32 = uint32_t(c);
          ::epoll_ctl(ep, EPOLL_CTL_MOD, k.fd, &ev);
        }
      }
      if (events[size_t(e)].events & EPOLLIN) {
        ssize_t r = ::recv(k.fd, buf, sizeof buf, 0);
        if (r <= 0) {
          if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            if (Clock::now() >= measure_from) ++result.errors;
            open(c);
          }
          continue;
        }
        k.in.append(buf, size_t(r));
        int status = 0;
        std::string body;
        bool close = false;
        size_t used = ParseResponse(k.in, &status, &body, &close);
        if (used == 0) continue;
        k.in.erase(0, used);
        Clock::time_point now = Clock::now();
        if (now >= measure_from && now < until) {
          ++result.requests;
          result.latencies_ms.push_back(
              std::chrono::duration<double, std::milli>(now - k.started).count());
          if (o.check && !o.check(status, body)) ++result.errors;
        }
        if (close) {  // the server ends this connection: a new one, no error
          ++result.reconnects;
          open(c);
          continue;
        }
        start_request(c);
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT;
        ev.data.u32 = uint32_t(c);
        ::epoll_ctl(ep, EPOLL_CTL_MOD, k.fd, &ev);
      }
    }
  }
  result.seconds = o.duration_s;
  for (Conn& k : conns) {
    if (k.fd >= 0) ::close(k.fd);
  }
  ::close(ep);
  return result;
}

}  // namespace gleaner::bench
