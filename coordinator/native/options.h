// Command-line, environment and config-file settings of `gleaner-coordinator serve`.
//
// Every setting has one name, used three ways: the flag `--name VALUE` (or `--name=VALUE`), the
// environment variable GLEANER_NAME (upper case, '-' → '_'), and the config-file line
// `name = VALUE` (file given by --config / GLEANER_CONFIG; '#' starts a comment). Precedence:
// flag > environment > config file > default. Durations are seconds and may be fractional.
// Boolean settings take true/false/1/0/yes/no; a boolean flag without a value means true.
// Parsing is pure (no I/O besides reading the config file through the injected reader), so it is
// unit-tested directly.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "coordinator/core/config.h"
#include "coordinator/core/settings.h"
#include "coordinator/native/pool/pool_options.h"
#include "shared/status.h"

namespace gleaner::native {

struct ServeOptions {
  std::string db;  // SQLite file (required)
  std::string listen_host = "127.0.0.1";
  int listen_port = 8080;       // 0 = any free port (see port_file)
  std::string data_dir;         // blobs/, signing.key (required)
  std::string port_file;        // written atomically with the bound port once listening
  bool public_url_set = false;  // false: derived from the bound address
  double maintenance_period_s = 60;
  int threads = 64;    // blob transfer threads (each running transfer holds one)
  int db_readers = 4;  // read-only database connections of the HTTP front end
  int max_connections = 10000;
  double header_timeout_s = 10;
  double keep_alive_timeout_s = 5;
  double io_timeout_s = 30;
  std::string log_level = "info";
  std::string tls_cert;        // PEM certificate chain: serve HTTPS (with tls_key)
  std::string tls_key;         // PEM private key
  bool insecure_http = false;  // plain HTTP on a non-loopback address (behind a TLS proxy)
  core::CoreConfig core;       // blob_signing_key is filled later (env or data dir)
  PoolOptions pool;            // the autoscaler's pool provider
  bool group_commit = true;    // concurrent write batches share one COMMIT (group_commit.h)
};

// Environment lookup, injected for tests (nullptr result = unset).
using EnvLookup = std::function<const char*(const std::string& name)>;
// Reads a config file's text, injected for tests.
using FileReader = std::function<Result<std::string>(const std::string& path)>;

// Parses the arguments after "serve". Errors are one readable line naming the setting.
// Plain HTTP is refused on a non-loopback listen address unless insecure_http is set.
Result<ServeOptions> ParseServeOptions(const std::vector<std::string>& args, const EnvLookup& env,
                                       const FileReader& read_file);

// True for 127.0.0.0/8, ::1 (also IPv4-mapped) and "localhost".
bool IsLoopbackHost(const std::string& host);

// Help text listing every setting with its default.
std::string ServeUsage();

}  // namespace gleaner::native
