// Transport: one accepted TCP connection, plain or TLS (OpenSSL), as the HTTP front end uses it.
//
// The event loop uses the non-blocking Read/Write (the socket is O_NONBLOCK); a worker thread
// that took the connection over for a blob transfer uses ReadWait/WriteAll, which wait with
// poll() up to a timeout. With TLS the handshake happens inside the first Read (SSL_accept
// state). Errors never throw; SIGPIPE must be ignored by the process (send uses MSG_NOSIGNAL for
// plain sockets; OpenSSL writes with write()).
// Ownership: owns the fd and the SSL object; Close() (or the destructor) releases both.
// Threading: one thread at a time.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <string>

namespace gleaner::native {

class Transport {
 public:
  // ssl_ctx null: plain TCP. Otherwise a server-side TLS session on fd is created.
  Transport(int fd, SSL_CTX* ssl_ctx);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  bool ok() const { return fd_ >= 0 && (ctx_ == nullptr || ssl_ != nullptr); }
  int fd() const { return fd_; }

  enum class Io { kOk, kAgain, kEof, kError };
  // Non-blocking: kOk with *n > 0 bytes, kAgain (nothing now), kEof (peer closed), kError.
  Io Read(char* buf, size_t cap, size_t* n);
  // Non-blocking: kOk with *n > 0 bytes written (possibly fewer than len), kAgain, kError.
  Io Write(const char* data, size_t len, size_t* n);
  // True when the TLS layer holds decrypted bytes not read yet (no socket event will say so).
  bool Pending() const;

  // Blocking with a timeout: waits until some bytes arrive (kOk), the peer closes (kEof), no
  // progress for timeout_ms (kAgain) or an error.
  Io ReadWait(char* buf, size_t cap, size_t* n, int timeout_ms);
  // Writes everything; false on error or when no progress was possible for timeout_ms.
  bool WriteAll(const char* data, size_t len, int timeout_ms);

  // Stops sending (TCP FIN after what was written; TLS close_notify first), keeps reading.
  void ShutdownWrite();
  void Close();

 private:
  // Maps an SSL_read/SSL_write failure; records whether OpenSSL waits to read or to write.
  Io SslFailure(int ret);
  bool WaitFor(bool want_write, int timeout_ms);

  int fd_;
  SSL_CTX* ctx_;
  SSL* ssl_ = nullptr;
  bool ssl_wants_write_ = false;  // the last kAgain from OpenSSL waits for writability
};

}  // namespace gleaner::native
