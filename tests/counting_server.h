// CountingServer: an HTTP server (cpp-httplib) on 127.0.0.1 in its own thread that counts every
// request reaching it, so a test can assert that nothing was fetched from it. Register handlers
// on `server` before Start(); the destructor stops and joins. For tests only; Catch2 REQUIREs a
// bound port.
#pragma once

#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>

namespace gleaner::testing {

struct CountingServer {
  httplib::Server server;
  std::thread thread;
  std::atomic<int> requests{0};
  int port = 0;

  CountingServer() {
    server.set_pre_routing_handler([this](const httplib::Request&, httplib::Response&) {
      ++requests;
      return httplib::Server::HandlerResponse::Unhandled;
    });
  }
  void Start() {
    port = server.bind_to_any_port("127.0.0.1");
    REQUIRE(port > 0);
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~CountingServer() {
    server.stop();
    if (thread.joinable()) thread.join();
  }
  std::string Url(const std::string& path, const std::string& host = "127.0.0.1") const {
    return "http://" + host + ":" + std::to_string(port) + path;
  }
};

}  // namespace gleaner::testing
