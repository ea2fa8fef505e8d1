// gleaner-coordinator: the native shell. See docs/operations.md.
//   gleaner-coordinator serve --db FILE --data-dir DIR [--listen HOST:PORT] [options]
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/core/coordinator.h"
#include "coordinator/native/blob/blob_store.h"
#include "coordinator/native/blob/fs.h"
#include "coordinator/native/blob/signing_key.h"
#include "coordinator/native/clock.h"
#include "coordinator/native/db/plan_runner.h"
#include "coordinator/native/http/tls.h"
#include "coordinator/native/http_server.h"
#include "coordinator/native/log.h"
#include "coordinator/native/maintenance.h"
#include "coordinator/native/options.h"
#include "coordinator/native/rate_limiter.h"
#include "shared/native/files.h"
#include "shared/sha256.h"

using namespace gleaner;
using namespace gleaner::native;

namespace {

int Fail(const std::string& line) {
  std::fprintf(stderr, "gleaner-coordinator: %s\n", line.c_str());
  return 2;
}

// Runs a startup plan; a 409 (constraint conflict from a concurrent starter) is retried once.
Status RunStartupPlan(PlanRunner& runner, const std::function<core::Plan()>& make,
                      const char* what) {
  for (int attempt = 0;; ++attempt) {
    core::Plan plan = runner.Run(make());
    int status = plan.response().status;
    if (status < 300) return Status::Ok();
    if (status == 409 && attempt == 0) continue;
    return Status::Internal(std::string(what) + " failed: " + plan.response().body);
  }
}

LogLevel ParseLevel(const std::string& s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "warn") return LogLevel::kWarn;
  if (s == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

Json TlsFields(const TlsCertInfo& info) {
  return {{"subject", info.subject},
          {"serial", info.serial},
          {"not_after", info.not_after},
          {"time_valid", info.time_valid}};
}

// SIGHUP: new TLS connections get the re-read certificate and key; on a bad file the current
// ones stay in use. Established connections are never touched.
void ReloadTls(TlsCredentials* tls) {
  if (tls == nullptr) {
    LogInfo("SIGHUP ignored: no --tls-cert to reload");
    return;
  }
  Status st = tls->Load();
  if (!st.ok()) {
    LogError("tls reload failed; still serving the previous certificate",
             {{"error", st.message()}, {"tls", TlsFields(tls->Info())}});
    return;
  }
  TlsCertInfo info = tls->Info();
  Log(info.time_valid ? LogLevel::kInfo : LogLevel::kWarn, "tls reloaded",
      {{"tls", TlsFields(info)}});
}

int Serve(const std::vector<std::string>& args) {
  auto start = std::chrono::steady_clock::now();
  auto parsed = ParseServeOptions(
      args, [](const std::string& name) { return std::getenv(name.c_str()); },
      [](const std::string& path) { return ReadWholeFile(DefaultFs(), path); });
  if (!parsed.ok()) return Fail(parsed.status().message());
  ServeOptions opts = std::move(parsed).value();
  SetLogLevel(ParseLevel(opts.log_level));
  Fs* fs = DefaultFs();

  Status st = fs->CreateDirs(opts.data_dir);
  if (!st.ok()) return Fail("cannot create data dir: " + st.message());
  auto key = LoadOrCreateSigningKey(fs, opts.data_dir, std::getenv("GLEANER_SIGNING_KEY"));
  if (!key.ok()) return Fail(key.status().message());
  opts.core.blob_signing_key = *key;
  st = opts.core.Validate();
  if (!st.ok()) return Fail("invalid configuration: " + st.message());

  BlobStore blobs(fs, opts.data_dir + "/blobs");
  st = blobs.Init();
  if (!st.ok()) return Fail("cannot prepare blob store: " + st.message());

  // HTTPS credentials are checked before anything listens; SIGHUP re-reads them.
  std::unique_ptr<TlsCredentials> tls;
  if (!opts.tls_cert.empty()) {
    tls = std::make_unique<TlsCredentials>(opts.tls_cert, opts.tls_key);
    st = tls->Load();
    if (!st.ok()) return Fail(st.message());
    if (!tls->Info().time_valid) {
      LogWarn("the TLS certificate is expired or not yet valid; clients will refuse it",
              {{"tls", TlsFields(tls->Info())}});
    }
  }

  // Signals are handled by one thread with sigwait: block them before any thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  SqliteOptions db;
  db.path = opts.db;
  db.group_commit = opts.group_commit;
  PlanRunner runner(db);
  {
    core::Coordinator boot(opts.core);
    st = RunStartupPlan(
        runner, [&] { return boot.MigrationPlan(); }, "migration");
    if (!st.ok()) return Fail(st.message());
    const char* token = std::getenv("GLEANER_OPERATOR_TOKEN");
    if (token != nullptr && *token != '\0') {
      std::string t = token;
      if (t.size() < 16) return Fail("GLEANER_OPERATOR_TOKEN must be at least 16 characters");
      st = RunStartupPlan(
          runner, [&] { return boot.BootstrapOperatorPlan(t, DefaultClock().NowMs()); },
          "operator bootstrap");
      if (!st.ok()) return Fail(st.message());
    }
  }

  HttpServerOptions http;
  http.loop.host = opts.listen_host;
  http.loop.port = opts.listen_port;
  http.loop.workers = opts.threads;
  http.loop.max_connections = opts.max_connections;
  http.loop.header_timeout_s = opts.header_timeout_s;
  http.loop.keep_alive_timeout_s = opts.keep_alive_timeout_s;
  http.loop.io_timeout_s = opts.io_timeout_s;
  http.loop.tls = tls.get();
  http.db_readers = opts.db_readers;
  HttpServer server(http);
  auto port = server.Bind();
  if (!port.ok()) return Fail(port.status().message());
  if (!opts.public_url_set) {
    std::string host = opts.listen_host;
    if (host == "0.0.0.0" || host == "::") host = "127.0.0.1";
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    opts.core.public_url =
        std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(*port);
  }
  LockedRateLimiter limiter;
  core::Coordinator coordinator(opts.core, &limiter);

  if (!opts.port_file.empty()) {
    // Connections made from now on wait in the listen backlog until Serve() accepts them.
    st = files::WriteDurable(opts.port_file, std::to_string(*port) + "\n");
    if (!st.ok()) return Fail("cannot write port file: " + st.message());
  }

  double startup_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  Json tls_fields = nullptr;
  if (tls) tls_fields = TlsFields(tls->Info());
  LogInfo("listening", {{"host", opts.listen_host},
                        {"port", *port},
                        {"public_url", opts.core.public_url},
                        {"db", opts.db},
                        {"data_dir", opts.data_dir},
                        {"threads", opts.threads},
                        {"heartbeat_interval_s", opts.core.heartbeat_interval_s},
                        {"stall_after_s", opts.core.stall_after_s},
                        {"maintenance_period_s", opts.maintenance_period_s},
                        {"s3", opts.core.s3.enabled()},
                        {"tls", tls_fields},
                        {"pool_provider", opts.pool.provider},
                        {"startup_ms", startup_ms}});
  // Where local pool agents reach this process (the public URL may name a proxy).
  std::string self_host = opts.listen_host;
  if (self_host == "0.0.0.0" || self_host == "::") self_host = "127.0.0.1";
  if (self_host.find(':') != std::string::npos) self_host = "[" + self_host + "]";
  std::string self_url =
      std::string(tls ? "https://" : "http://") + self_host + ":" + std::to_string(*port);
  if (opts.pool.provider == "local" && opts.pool.local.enroll_token.empty()) {
    // The local pool's agents enroll with a key of their own: derived from the signing key so
    // that agents adopted after a restart can still register, and only an enroll key.
    opts.pool.local.enroll_token =
        "glt_" + HexEncode(HmacSha256(opts.core.blob_signing_key, "gleaner local pool enroll"));
    core::Coordinator boot(opts.core);
    st = RunStartupPlan(
        runner,
        [&] {
          return boot.PoolEnrollKeyPlan(opts.pool.local.enroll_token, DefaultClock().NowMs());
        },
        "local pool enroll key");
    if (!st.ok()) return Fail(st.message());
  }
  auto pool = MakePoolProvider(opts.pool, self_url, opts.data_dir);
  if (!pool.ok()) return Fail(pool.status().message());
  MaintenanceLoop maintenance(&coordinator, &runner, &DefaultClock(), opts.maintenance_period_s,
                              pool->get(), &blobs);
  maintenance.Start();

  std::thread signal_thread([&] {
    for (;;) {
      int sig = 0;
      if (sigwait(&sigs, &sig) != 0) continue;
      if (sig == SIGHUP) {
        ReloadTls(tls.get());
        continue;
      }
      LogInfo("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
      server.Stop();
      return;
    }
  });

  Status served = server.Serve(&coordinator, &runner, &blobs, &DefaultClock());
  maintenance.Stop();
  // Wake the signal thread if Serve ended for another reason.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  if (!served.ok()) {
    LogError("server failed", {{"error", served.ToString()}});
    return 1;
  }
  LogInfo("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(ServeUsage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "serve") {
    return Fail("unknown command '" + args[0] + "' (expected: serve; see --help)");
  }
  args.erase(args.begin());
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(ServeUsage().c_str(), stdout);
      return 0;
    }
  }
  return Serve(args);
}
