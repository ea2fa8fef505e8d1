// Helpers shared by the HTTP front-end tests (http_frontend_test.cc, http_framing_test.cc): a
// coordinator with short deadlines, request builders and response checks on top of RawConn.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/raw_http.h"

namespace gleaner::testing {

using SteadyTime = std::chrono::steady_clock;

inline double SecondsSince(SteadyTime::time_point t) {
  return std::chrono::duration<double>(SteadyTime::now() - t).count();
}

inline int MillisLeft(SteadyTime::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - SteadyTime::now()).count();
  return int(std::max<int64_t>(0, left));
}

inline std::string Lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

inline constexpr char kHealthz[] = "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n";

// The flags every case starts from: short deadlines so that timeouts show within a second.
inline std::vector<std::string> FastArgs(std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--header-timeout",     "1", "--io-timeout", "1",
                                   "--keep-alive-timeout", "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

inline std::unique_ptr<CoordinatorProcess> StartCoordinator(const TempDir& dir,
                                                            std::vector<std::string> args) {
  CoordinatorOptions o;
  o.extra_args = std::move(args);
  auto coord = std::make_unique<CoordinatorProcess>(dir.path(), o);
  std::string error;
  const bool started = coord->Start(&error);
  INFO(error);
  REQUIRE(started);
  return coord;
}

// The error envelope {"error":{"code","message"}} with this code.
inline bool IsErrorEnvelope(const HttpResult& r, const std::string& code) {
  Json j = r.json();
  return j.is_object() && j.contains("error") && j["error"].is_object() &&
         j["error"].contains("code") && j["error"]["code"] == code &&
         j["error"].contains("message") && j["error"]["message"].is_string() &&
         !j["error"]["message"].get<std::string>().empty();
}

// GET /healthz on a fresh connection answers 200.
inline bool ServesHealthz(int port) {
  RawConn c(port);
  if (!c.connected() || !c.Send(kHealthz)) return false;
  auto r = c.ReadResponse(Millis(2000));
  return r && r->status == 200;
}

inline std::string PostHead(const std::string& path, const std::string& token,
                            const std::string& framing) {
  std::string head =
      "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n";
  if (!token.empty()) head += "Authorization: Bearer " + token + "\r\n";
  return head + framing + "\r\n";
}

inline std::string Chunked(const std::string& body, size_t piece) {
  std::string out;
  for (size_t at = 0; at < body.size(); at += piece) {
    std::string part = body.substr(at, piece);
    char size[32];
    std::snprintf(size, sizeof size, "%zx", part.size());
    out += std::string(size) + (at == 0 ? ";note=first" : "") + "\r\n" + part + "\r\n";
  }
  return out + "0\r\nX-Trailer: done\r\n\r\n";
}

}  // namespace gleaner::testing
