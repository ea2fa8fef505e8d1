#include "tests/integration/raw_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>

namespace gleaner::testing {

namespace {

using SteadyTime = std::chrono::steady_clock;

int MillisLeft(SteadyTime::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - SteadyTime::now()).count();
  return int(std::max<int64_t>(0, left));
}

std::string Lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

SSL_CTX* NewTlsClientContext(const std::string& ca_file) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return nullptr;
  if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
    SSL_CTX_free(ctx);
    return nullptr;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  return ctx;
}

RawConn::RawConn(int port, SSL_CTX* tls) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Close();
    return;
  }
  int on = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  if (tls != nullptr) {
    // The handshake blocks, bounded by socket timeouts.
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ssl_ = SSL_new(tls);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1 || SSL_set1_host(ssl_, "127.0.0.1") != 1 ||
        SSL_connect(ssl_) != 1) {
      Close();
      return;
    }
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

RawConn::~RawConn() {
  Close();
}

void RawConn::Close() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ssl_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawConn::Send(const std::string& bytes, Millis timeout) {
  const auto deadline = SteadyTime::now() + timeout;
  size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    short wait_for = POLLOUT;
    if (ssl_ != nullptr) {
      size_t n = 0;
      if (SSL_write_ex(ssl_, bytes.data() + sent, bytes.size() - sent, &n) == 1) {
        sent += n;
        continue;
      }
      int err = SSL_get_error(ssl_, 0);
      if (err == SSL_ERROR_WANT_READ) {
        wait_for = POLLIN;
      } else if (err != SSL_ERROR_WANT_WRITE) {
        return false;
      }
    } else {
      ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += size_t(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
    }
    pollfd p{fd_, wait_for, 0};
    if (::poll(&p, 1, MillisLeft(deadline)) <= 0) return false;
  }
  return fd_ >= 0;
}

void RawConn::Pump() {
  char buf[16 * 1024];
  while (fd_ >= 0 && !eof_) {
    if (ssl_ != nullptr) {
      size_t n = 0;
      if (SSL_read_ex(ssl_, buf, sizeof buf, &n) == 1) {
        in_.append(buf, n);
        continue;
      }
      int err = SSL_get_error(ssl_, 0);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return;
      eof_ = true;  // close_notify, EOF or a reset: what came before it is kept
      return;
    }
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      in_.append(buf, size_t(n));
    } else if (n == 0) {
      eof_ = true;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;
    } else {
      eof_ = true;  // reset: what came before it is kept
    }
  }
}

std::optional<HttpResult> RawConn::ReadResponse(Millis timeout, bool head_only) {
  const auto deadline = SteadyTime::now() + timeout;
  for (;;) {
    Pump();
    if (auto r = TakeResponse(head_only)) return r;
    if (eof_ || fd_ < 0 || MillisLeft(deadline) == 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, MillisLeft(deadline));
  }
}

bool RawConn::WaitEof(Millis timeout) {
  const auto deadline = SteadyTime::now() + timeout;
  for (;;) {
    Pump();
    if (eof_) return true;
    if (fd_ < 0 || MillisLeft(deadline) == 0) return false;
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, MillisLeft(deadline));
  }
}

std::optional<HttpResult> RawConn::TakeResponse(bool head_only) {
  size_t end = in_.find("\r\n\r\n");
  if (end == std::string::npos) return std::nullopt;
  HttpResult r;
  const std::string head = in_.substr(0, end);
  size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) {
    r.status = -1;  // not HTTP: shows in assertions
    r.body = in_;
    in_.clear();
    return r;
  }
  r.status = std::atoi(status_line.substr(9, 3).c_str());
  size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t next = head.find("\r\n", pos);
    if (next == std::string::npos) next = head.size();
    const std::string field = head.substr(pos, next - pos);
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      size_t v = field.find_first_not_of(' ', colon + 1);
      r.headers.emplace(Lower(field.substr(0, colon)),
                        v == std::string::npos ? "" : field.substr(v));
    }
    pos = next + 2;
  }
  size_t body_len = 0;
  const bool no_body = head_only || r.status < 200 || r.status == 204 || r.status == 304;
  if (!no_body) {
    const std::string cl = r.Header("Content-Length");
    if (cl.empty()) {
      if (!eof_) return std::nullopt;  // the body runs to EOF
      body_len = in_.size() - end - 4;
    } else {
      body_len = size_t(std::strtoull(cl.c_str(), nullptr, 10));
    }
  }
  if (in_.size() < end + 4 + body_len) return std::nullopt;
  r.body = in_.substr(end + 4, body_len);
  in_.erase(0, end + 4 + body_len);
  return r;
}

}  // namespace gleaner::testing
