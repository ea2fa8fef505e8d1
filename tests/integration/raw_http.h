// RawConn: a byte-level HTTP/1.x client connection for black-box tests of the server's framing
// and connection handling (part of gleaner_test_harness).
//
// Bytes go out exactly as the test writes them (partial heads, pipelined requests, malformed
// framing); responses are parsed off the stream one at a time (Content-Length bodies, no body
// for 1xx/204/304 or a HEAD's answer). Plain TCP, or TLS when given a client SSL_CTX (the
// handshake runs in the constructor). The socket is non-blocking after connecting; every wait has
// a timeout. EOF and resets are both "the server closed"; bytes received before stay buffered.
// Not thread-safe: one thread per connection at a time.
#pragma once

#include <openssl/ssl.h>

#include <optional>
#include <string>

#include "tests/integration/harness.h"

namespace gleaner::testing {

class RawConn {
 public:
  // Connects to 127.0.0.1:port; with tls, also completes a TLS handshake (up to 5 s).
  explicit RawConn(int port, SSL_CTX* tls = nullptr);
  ~RawConn();
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // The server closed the connection (EOF, TLS close, or a reset).
  bool eof() const { return eof_; }
  // Bytes received and not taken as a response yet.
  const std::string& buffered() const { return in_; }

  // Sends all bytes, waiting for room up to timeout. False if the connection broke.
  bool Send(const std::string& bytes, Millis timeout = Millis(3000));
  // Reads whatever has arrived, without waiting; notes EOF or a reset.
  void Pump();
  // One whole response, taken off the stream; nullopt on timeout or when the server closed
  // first. head_only: the answer to a HEAD (no body whatever Content-Length says).
  std::optional<HttpResult> ReadResponse(Millis timeout = Millis(3000), bool head_only = false);
  // A whole response at the front of what is buffered (no reading), or nullopt.
  std::optional<HttpResult> TakeResponse(bool head_only = false);
  // Waits until the server closes the connection; bytes that come meanwhile stay buffered.
  bool WaitEof(Millis timeout);
  void Close();

 private:
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  bool eof_ = false;
  std::string in_;
};

// A TLS client context that trusts the CA certificates in ca_file (PEM) and verifies the
// server; nullptr on failure. Free with SSL_CTX_free.
SSL_CTX* NewTlsClientContext(const std::string& ca_file);

}  // namespace gleaner::testing
