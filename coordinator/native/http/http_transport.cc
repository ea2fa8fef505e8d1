#include "coordinator/native/http/http_transport.h"

#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace gleaner::native {

Transport::Transport(int fd, SSL_CTX* ssl_ctx) : fd_(fd), ctx_(ssl_ctx) {
  if (ctx_ != nullptr) {
    ssl_ = SSL_new(ctx_);
    if (ssl_ != nullptr && SSL_set_fd(ssl_, fd_) != 1) {
      SSL_free(ssl_);
      ssl_ = nullptr;
    }
    if (ssl_ != nullptr) {
      SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
      SSL_set_accept_state(ssl_);
    }
    ERR_clear_error();
  }
}

Transport::~Transport() {
  Close();
}

void Transport::Close() {
  if (ssl_ != nullptr) {
    SSL_free(ssl_);
    ssl_ = nullptr;
    ERR_clear_error();
  }
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

Transport::Io Transport::SslFailure(int ret) {
  int err = SSL_get_error(ssl_, ret);
  ERR_clear_error();
  switch (err) {
    case SSL_ERROR_WANT_READ:
      ssl_wants_write_ = false;
      return Io::kAgain;
    case SSL_ERROR_WANT_WRITE:
      ssl_wants_write_ = true;
      return Io::kAgain;
    case SSL_ERROR_ZERO_RETURN:
      return Io::kEof;
    case SSL_ERROR_SYSCALL:
      return errno == 0 ? Io::kEof : Io::kError;  // a peer that closed without close_notify
    default:
      return Io::kError;
  }
}

Transport::Io Transport::Read(char* buf, size_t cap, size_t* n) {
  *n = 0;
  if (ssl_ != nullptr) {
    errno = 0;
    int ret = SSL_read(ssl_, buf, int(cap > (1u << 30) ? (1u << 30) : cap));
    if (ret > 0) {
      *n = size_t(ret);
      return Io::kOk;
    }
    return SslFailure(ret);
  }
  for (;;) {
    ssize_t r = ::recv(fd_, buf, cap, 0);
    if (r > 0) {
      *n = size_t(r);
      return Io::kOk;
    }
    if (r == 0) return Io::kEof;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? Io::kAgain : Io::kError;
  }
}

Transport::Io Transport::Write(const char* data, size_t len, size_t* n) {
  *n = 0;
  if (len == 0) return Io::kOk;
  if (ssl_ != nullptr) {
    errno = 0;
    int ret = SSL_write(ssl_, data, int(len > (1u << 30) ? (1u << 30) : len));
    if (ret > 0) {
      *n = size_t(ret);
      return Io::kOk;
    }
    return SslFailure(ret);
  }
  for (;;) {
    ssize_t w = ::send(fd_, data, len, MSG_NOSIGNAL);
    if (w >= 0) {
      *n = size_t(w);
      return w > 0 ? Io::kOk : Io::kAgain;
    }
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? Io::kAgain : Io::kError;
  }
}

bool Transport::Pending() const {
  return ssl_ != nullptr && SSL_pending(ssl_) > 0;
}

bool Transport::WaitFor(bool want_write, int timeout_ms) {
  pollfd p{fd_, short(want_write ? POLLOUT : POLLIN), 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return true;  // ready, or an error the next call reports
    if (r == 0) return false;
    if (errno != EINTR) return true;
  }
}

Transport::Io Transport::ReadWait(char* buf, size_t cap, size_t* n, int timeout_ms) {
  for (;;) {
    Io io = Read(buf, cap, n);
    if (io != Io::kAgain) return io;
    bool want_write = ssl_ != nullptr && ssl_wants_write_;
    if (!WaitFor(want_write, timeout_ms)) return Io::kAgain;
  }
}

bool Transport::WriteAll(const char* data, size_t len, int timeout_ms) {
  while (len > 0) {
    size_t n = 0;
    Io io = Write(data, len, &n);
    if (io == Io::kOk) {
      data += n;
      len -= n;
      continue;
    }
    if (io != Io::kAgain) return false;
    bool want_write = ssl_ == nullptr || ssl_wants_write_;
    if (!WaitFor(want_write, timeout_ms)) return false;
  }
  return true;
}

void Transport::ShutdownWrite() {
  if (ssl_ != nullptr) {
    SSL_shutdown(ssl_);  // sends close_notify if it can; never waits
    ERR_clear_error();
  }
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

}  // namespace gleaner::native
