// Throwaway PKI for TLS tests (OpenSSL's C API, EC P-256 keys so it is fast): a CA, server
// certificates it issues with chosen names, serial and validity window, and a TLS handshake
// probe that reports what a server offers (certificate serial, protocol) or why it refused.
// Errors are reported in return values, like the rest of the harness.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gleaner::testing {

struct CertSpec {
  std::string common_name = "gleaner-test-server";
  std::vector<std::string> ip_addresses = {"127.0.0.1"};  // subjectAltName IP entries
  std::vector<std::string> dns_names;                     // subjectAltName DNS entries
  long serial = 2;
  int64_t not_before_s = -3600;  // relative to now
  int64_t not_after_s = 86400;   // relative to now (negative: already expired)
};

class TestCa {
 public:
  // A new self-signed CA with its own key.
  explicit TestCa(const std::string& name = "Gleaner Test CA");
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  // Empty when the CA was made; else why not.
  const std::string& error() const { return error_; }
  // Writes the CA certificate (PEM) to path.
  bool WriteCert(const std::string& path) const;
  // Issues a server certificate signed by this CA with a fresh key; writes both as PEM.
  // False + *error on failure.
  bool Issue(const CertSpec& spec, const std::string& cert_path, const std::string& key_path,
             std::string* error) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

struct TlsProbeOptions {
  int max_version = 0;        // e.g. TLS1_1_VERSION; 0 = library default
  std::string tls12_ciphers;  // "" = library default
  std::string ca_file;        // "": do not verify (inspect only); else verify chain and IP
};

struct TlsProbeResult {
  bool ok = false;
  std::string error;    // handshake failure reason when !ok
  std::string serial;   // peer certificate serial, upper-case hex (e.g. "0B")
  std::string version;  // e.g. "TLSv1.3"
};

// One TLS handshake with 127.0.0.1:port (5 s timeout), then close.
TlsProbeResult ProbeTls(int port, const TlsProbeOptions& options);

}  // namespace gleaner::testing
