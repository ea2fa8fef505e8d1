// The generic HTTP event loop with a handler that knows nothing of the coordinator: answers now,
// answers later from another thread (Post), the handler's body limit, an answer before an
// announced body, a taken-over connection, and a drain with a request in progress.
#include "coordinator/native/http/event_loop.h"

#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using namespace gleaner;
using namespace gleaner::native;

namespace {

core::HttpResponse Text(int status, const std::string& body) {
  core::HttpResponse r;
  r.status = status;
  r.content_type = "text/plain";
  r.body = body;
  return r;
}

// /now: answered in OnRequest. /later: answered from another thread through Post (the body
// reversed). /refuse: answered from the head. /raw: taken over by a worker. Limit: 16 bytes.
class TestHandler : public HttpHandler {
 public:
  explicit TestHandler(EventLoop* loop) : loop_(loop) {}
  ~TestHandler() override {
    for (auto& t : threads_) t.join();
  }

  HeadAction OnHead(HttpConn* c) override {
    if (c->meta.path == "/refuse") return HeadAction::Answer(Text(403, "refused"));
    if (c->meta.path == "/raw") {
      return HeadAction::TakeOver([](HttpConn& conn) {
        static const char kReply[] =
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nworkr";
        return conn.transport.WriteAll(kReply, sizeof kReply - 1, 1000);
      });
    }
    return HeadAction::ReadBody(16);
  }

  void OnRequest(HttpConn* c) override {
    if (c->meta.path == "/now") return loop_->Respond(c, Text(200, "now:" + c->body));
    std::string body = c->body;
    const bool slow = c->meta.path == "/slow";
    ++waiting_;
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([this, c, body, slow] {
      if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      loop_->Post(c, [this, body](HttpConn* conn) {
        ++posted_;
        loop_->Respond(conn, Text(200, std::string(body.rbegin(), body.rend())));
      });
    });
  }

  void EndTurn() override { ++turns_; }
  void Answered(const RequestMeta&, int status) override {
    std::lock_guard<std::mutex> lock(mu_);
    statuses_.push_back(status);
  }

  std::atomic<int> waiting_{0};  // requests handed to another thread
  std::atomic<int> posted_{0};
  std::atomic<int> turns_{0};
  std::mutex mu_;
  std::vector<int> statuses_;

 private:
  EventLoop* loop_;
  std::vector<std::thread> threads_;
};

struct Served {
  Served() : loop(Options()), handler(&loop) {
    auto p = loop.Bind();
    REQUIRE(p.ok());
    port = *p;
    thread = std::thread([this] { served = loop.Serve(&handler); });
  }
  ~Served() { Join(); }
  void Join() {
    loop.Stop();
    if (thread.joinable()) thread.join();
  }
  static EventLoopOptions Options() {
    EventLoopOptions o;
    o.port = 0;
    o.workers = 2;
    return o;
  }
  EventLoop loop;
  TestHandler handler;
  int port = 0;
  Status served;
  std::thread thread;
};

}  // namespace

TEST_CASE("event loop: answers now, later from another thread, and per the handler's limits",
          "[event_loop]") {
  Served s;
  httplib::Client cli("127.0.0.1", s.port);
  auto now = cli.Post("/now", "abc", "text/plain");
  REQUIRE(now);
  CHECK(now->status == 200);
  CHECK(now->body == "now:abc");
  auto later = cli.Post("/later", "abc", "text/plain");  // same keep-alive connection
  REQUIRE(later);
  CHECK(later->status == 200);
  CHECK(later->body == "cba");
  CHECK(s.handler.posted_ == 1);
  auto big = cli.Post("/now", std::string(17, 'x'), "text/plain");
  REQUIRE(big);
  CHECK(big->status == 413);
  CHECK(big->body.find("\"too_large\"") != std::string::npos);
  auto refused = cli.Post("/refuse", "body that is never read", "text/plain");
  REQUIRE(refused);
  CHECK(refused->status == 403);
  CHECK(refused->get_header_value("Connection") == "close");
  auto raw = cli.Get("/raw");
  REQUIRE(raw);
  CHECK(raw->status == 200);
  CHECK(raw->body == "workr");
  // After a take-over the connection serves the loop's requests again.
  auto again = cli.Get("/now");
  REQUIRE(again);
  CHECK(again->body == "now:");
  CHECK(s.handler.turns_ > 0);
  std::lock_guard<std::mutex> lock(s.handler.mu_);
  CHECK(s.handler.statuses_ == std::vector<int>{200, 200, 413, 403, 200});  // raw: not the loop's
}

TEST_CASE("event loop: Stop answers the request in progress (Connection: close), then returns",
          "[event_loop]") {
  Served s;
  bool answered = false;
  int status = 0;
  std::string body, connection;
  std::thread client([&] {
    httplib::Client cli("127.0.0.1", s.port);
    auto r = cli.Post("/slow", "abc", "text/plain");
    if (!r) return;
    answered = true;
    status = r->status;
    body = r->body;
    connection = r->get_header_value("Connection");
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s.handler.waiting_ == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(s.handler.waiting_ == 1);
  s.Join();  // Stop while the answer is still 300 ms away; Serve returns once it is out
  client.join();
  CHECK(s.served.ok());
  REQUIRE(answered);
  CHECK(status == 200);
  CHECK(body == "cba");
  CHECK(connection == "close");
}
