// RequestParser and BodyDecoder: every refusal with its status, valid requests,
// identical results however the bytes are split, pipelining, chunked bodies, ranges.
#include "coordinator/native/http/http_parser.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace gleaner::native::http;

namespace {

// Everything a parse run can observe, for comparing one-shot and split feeding.
struct Outcome {
  RequestParser::State state = RequestParser::State::kNeedMore;
  size_t consumed = 0;  // in total over all calls
  int status = 0;
  std::string message;
  Request request;
  bool started = false;
};

bool operator==(const Request& a, const Request& b) {
  return a.method == b.method && a.target == b.target && a.version_minor == b.version_minor &&
         a.headers == b.headers && a.body == b.body && a.content_length == b.content_length &&
         a.keep_alive == b.keep_alive && a.expect_continue == b.expect_continue;
}

bool operator==(const Outcome& a, const Outcome& b) {
  return a.state == b.state && a.consumed == b.consumed && a.status == b.status &&
         a.message == b.message && a.started == b.started &&
         (a.state != RequestParser::State::kDone || a.request == b.request);
}

// Feeds `input` in pieces ending at the given offsets (then the rest), as a front end would:
// only the bytes not consumed yet, until kDone or kError.
Outcome ParsePieces(const std::string& input, const std::vector<size_t>& cuts,
                    Limits limits = Limits()) {
  RequestParser p(limits);
  Outcome o;
  size_t from = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(input.size());
  for (size_t end : ends) {
    if (end < from) continue;
    size_t used = 0;
    o.state = p.Parse(input.data() + from, end - from, &used);
    REQUIRE(used <= end - from);
    o.consumed += used;
    from += used;
    if (o.state != RequestParser::State::kNeedMore) break;
    REQUIRE(from == end);  // kNeedMore consumes everything it was given
  }
  o.status = p.error_status();
  o.message = p.error_message();
  o.started = p.started();
  if (o.state == RequestParser::State::kDone) o.request = p.request();
  return o;
}

Outcome ParseOnce(const std::string& input, Limits limits = Limits()) {
  return ParsePieces(input, {}, limits);
}

Outcome ParseBytewise(const std::string& input, Limits limits = Limits()) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < input.size(); ++i) cuts.push_back(i);
  return ParsePieces(input, cuts, limits);
}

// The same outcome for one buffer, one byte at a time, and every split into two pieces.
Outcome ParseEverySplit(const std::string& input, Limits limits = Limits()) {
  Outcome once = ParseOnce(input, limits);
  CHECK(ParseBytewise(input, limits) == once);
  for (size_t cut = 0; cut <= input.size(); ++cut) {
    INFO("split at " << cut);
    CHECK(ParsePieces(input, {cut}, limits) == once);
  }
  return once;
}

int StatusOf(const std::string& input, Limits limits = Limits()) {
  Outcome o = ParseEverySplit(input, limits);
  return o.state == RequestParser::State::kError ? o.status : 0;
}

struct Decoded {
  BodyDecoder::State state = BodyDecoder::State::kNeedMore;
  size_t consumed = 0;
  std::string body;
  int64_t decoded = 0;
  std::string message;
  bool operator==(const Decoded& o) const {
    return state == o.state && consumed == o.consumed && body == o.body && decoded == o.decoded &&
           message == o.message;
  }
};

Decoded DecodePieces(BodyKind kind, int64_t length, const std::string& input,
                     const std::vector<size_t>& cuts) {
  BodyDecoder d(kind, length);
  Decoded r;
  size_t from = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(input.size());
  for (size_t end : ends) {
    if (end < from) continue;
    size_t used = 0;
    r.state = d.Decode(input.data() + from, end - from, &used, &r.body);
    REQUIRE(used <= end - from);
    r.consumed += used;
    from += used;
    if (r.state != BodyDecoder::State::kNeedMore) break;
  }
  r.decoded = d.decoded();
  r.message = d.error_message();
  CHECK(d.done() == (r.state == BodyDecoder::State::kDone));
  CHECK(static_cast<int64_t>(r.body.size()) == r.decoded);
  return r;
}

Decoded DecodeEverySplit(BodyKind kind, int64_t length, const std::string& input) {
  Decoded once = DecodePieces(kind, length, input, {});
  std::vector<size_t> bytes;
  for (size_t i = 1; i < input.size(); ++i) bytes.push_back(i);
  CHECK(DecodePieces(kind, length, input, bytes) == once);
  for (size_t cut = 0; cut <= input.size(); ++cut) {
    INFO("split at " << cut);
    CHECK(DecodePieces(kind, length, input, {cut}) == once);
  }
  return once;
}

}  // namespace

TEST_CASE("http parser: a typical request, fields and defaults", "[http_parser]") {
  std::string head =
      "POST /v1/jobs/j_1/heartbeat?x=1 HTTP/1.1\r\n"
      "Host: localhost:8080\r\n"
      "Content-Type:application/json\r\n"
      "X-Spaces: \t padded value \t \r\n"
      "Content-Length: 12\r\n"
      "x-spaces: second\r\n"
      "\r\n";
  Outcome o = ParseEverySplit(head + "{\"step\":100}");
  REQUIRE(o.state == RequestParser::State::kDone);
  CHECK(o.consumed == head.size());
  CHECK(o.started);
  const Request& r = o.request;
  CHECK(r.method == "POST");
  CHECK(r.target == "/v1/jobs/j_1/heartbeat?x=1");
  CHECK(r.version_minor == 1);
  REQUIRE(r.headers.size() == 5);
  CHECK(r.headers[1] ==
        std::make_pair(std::string("content-type"), std::string("application/json")));
  CHECK(r.headers[2].second == "padded value");
  CHECK(*r.Header("x-spaces") == "padded value");  // the first of two
  CHECK(*r.Header("host") == "localhost:8080");
  CHECK(r.Header("content-encoding") == nullptr);
  CHECK(r.body == BodyKind::kLength);
  CHECK(r.content_length == 12);
  CHECK(r.keep_alive);
  CHECK_FALSE(r.expect_continue);
}

TEST_CASE("http parser: a table of valid requests", "[http_parser]") {
  struct Case {
    const char* input;
    const char* method;
    const char* target;
    int minor;
    BodyKind body;
    int64_t length;
    bool keep_alive;
    bool expect;
  };
  const Case cases[] = {
      {"GET / HTTP/1.1\r\n\r\n", "GET", "/", 1, BodyKind::kNone, 0, true, false},
      {"GET /healthz HTTP/1.0\r\n\r\n", "GET", "/healthz", 0, BodyKind::kNone, 0, false, false},
      {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", "GET", "/", 0, BodyKind::kNone, 0, true,
       false},
      {"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", "GET", "/", 0, BodyKind::kNone, 0,
       false, false},
      {"GET / HTTP/1.1\r\nConnection: Upgrade, CLOSE\r\n\r\n", "GET", "/", 1, BodyKind::kNone, 0,
       false, false},
      {"GET / HTTP/1.1\r\nConnection: closed\r\n\r\n", "GET", "/", 1, BodyKind::kNone, 0, true,
       false},
      {"GET / HTTP/1.1\r\nConnection: x\r\nConnection: close\r\n\r\n", "GET", "/", 1,
       BodyKind::kNone, 0, false, false},
      {"OPTIONS * HTTP/1.1\r\n\r\n", "OPTIONS", "*", 1, BodyKind::kNone, 0, true, false},
      {"\r\n\n\r\nGET / HTTP/1.1\r\n\r\n", "GET", "/", 1, BodyKind::kNone, 0, true, false},
      {"GET / HTTP/1.1\nHost: a\n\n", "GET", "/", 1, BodyKind::kNone, 0, true, false},
      {"PUT /b HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "PUT", "/b", 1, BodyKind::kLength, 0, true,
       false},
      {"PUT /b HTTP/1.1\r\nContent-Length: 5, 5\r\ncontent-length: 005\r\n\r\n", "PUT", "/b", 1,
       BodyKind::kLength, 5, true, false},
      {"PUT /b HTTP/1.1\r\nContent-Length: 9223372036854775807\r\n\r\n", "PUT", "/b", 1,
       BodyKind::kLength, INT64_MAX, true, false},
      {"POST /u HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", "POST", "/u", 1,
       BodyKind::kChunked, 0, true, false},
      {"POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-Continue\r\n\r\n", "POST",
       "/u", 1, BodyKind::kChunked, 0, true, true},
      {"POST /u HTTP/1.0\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n", "POST", "/u", 0,
       BodyKind::kLength, 1, false, false},
      {"M-SEARCH /%20?a=%ff&b=\xc3\xa9 HTTP/1.1\r\nX: \x80\xff\t!~\r\n\r\n", "M-SEARCH",
       "/%20?a=%ff&b=\xc3\xa9", 1, BodyKind::kNone, 0, true, false},
      {"GET / HTTP/1.1\r\nX-Empty:\r\nY:   \r\n\r\n", "GET", "/", 1, BodyKind::kNone, 0, true,
       false},
  };
  for (const Case& c : cases) {
    INFO(c.input);
    Outcome o = ParseEverySplit(c.input);
    REQUIRE(o.state == RequestParser::State::kDone);
    CHECK(o.consumed == std::string(c.input).size());
    CHECK(o.request.method == c.method);
    CHECK(o.request.target == c.target);
    CHECK(o.request.version_minor == c.minor);
    CHECK(o.request.body == c.body);
    CHECK(o.request.content_length == c.length);
    CHECK(o.request.keep_alive == c.keep_alive);
    CHECK(o.request.expect_continue == c.expect);
  }
}

TEST_CASE("http parser: every refusal has its status", "[http_parser]") {
  struct Case {
    std::string input;
    int status;
  };
  const std::string kGet = "GET / HTTP/1.1\r\n";
  const Case cases[] = {
      // Framing that could be read two ways.
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 5,\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 9223372036854775808\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n", 400},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      // Field syntax.
      {kGet + "Host : x\r\n\r\n", 400},
      {kGet + "Host\t: x\r\n\r\n", 400},
      {kGet + "Host: x\r\n folded\r\n\r\n", 400},
      {kGet + "\tHost: x\r\n\r\n", 400},
      {kGet + " Host: x\r\n\r\n", 400},
      {kGet + "Host: x\ry\r\n\r\n", 400},
      {kGet + "Host: x\r\r\n\r\n", 400},
      {kGet + "Host: x\r\n\r\r\n", 400},
      {kGet + "Host x\r\n\r\n", 400},
      {kGet + ": x\r\n\r\n", 400},
      {kGet + "Ho(st: x\r\n\r\n", 400},
      {kGet + std::string("X: a\0b\r\n\r\n", 10), 400},
      {kGet + "X: a\x7f\r\n\r\n", 400},
      {kGet + "X: a\x01\r\n\r\n", 400},
      // Request line.
      {"GET / HTTP/1.1\rX: y\r\n\r\n", 400},
      {"\rGET / HTTP/1.1\r\n\r\n", 400},
      {" / HTTP/1.1\r\n\r\n", 400},
      {" GET / HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"G\xc3\xa9T / HTTP/1.1\r\n\r\n", 400},
      {"GET  / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1 \r\n\r\n", 400},
      {"GET /a b HTTP/1.1\r\n\r\n", 400},
      {"GET /a\tb HTTP/1.1\r\n\r\n", 400},
      {"GET /a\x7f HTTP/1.1\r\n\r\n", 400},
      {"GET /\r\n\r\n", 400},
      {"GET\r\n\r\n", 400},
      {"GET / http/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.10\r\n\r\n", 400},
      {"GET / HTTP/1.1x\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTP/1.2\r\n\r\n", 505},
      {"GET / HTTP/0.9\r\n\r\n", 505},
      {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
      {"GET /" + std::string(8 * 1024, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"GET /" + std::string(20 * 1024, 'a') + " HTTP/1.1\r\n\r\n", 414},  // past the head limit
      {"GET /" + std::string(20 * 1024, 'a'), 414},                        // and with no line end
      {"G(T /" + std::string(20 * 1024, 'a'), 431},
      // Size of the head.
      {kGet + "X: " + std::string(16 * 1024, 'a') + "\r\n\r\n", 431},
      {kGet + "X: " + std::string(16 * 1024, 'a'), 431},
      {std::string(16 * 1024 + 1, '\n'), 431},
  };
  for (const Case& c : cases) {
    INFO(c.input.substr(0, 200));
    Outcome o = ParseOnce(c.input);
    CHECK(o.state == RequestParser::State::kError);
    CHECK(o.status == c.status);
    CHECK_FALSE(o.message.empty());
    CHECK(o.message.size() <= 160);
    for (char ch : o.message) CHECK((ch >= 0x20 && ch < 0x7f));
    if (c.input.size() < 300) {
      CHECK(StatusOf(c.input) == c.status);
    } else {
      CHECK(ParseBytewise(c.input) == o);
    }
  }
}

TEST_CASE("http parser: limits are exact and refused as soon as passed", "[http_parser]") {
  Limits limits;
  limits.max_head_bytes = 64;
  limits.max_headers = 3;
  limits.max_target_bytes = 10;
  std::string line = "GET /123456789 HTTP/1.1\r\n";  // target exactly 10 bytes
  CHECK(StatusOf(line + "\r\n", limits) == 0);
  CHECK(StatusOf("GET /1234567890 HTTP/1.1\r\n\r\n", limits) == 414);

  std::string fill = "X: " + std::string(64 - line.size() - 2 - 5, 'a') + "\r\n";
  REQUIRE(line.size() + fill.size() + 2 == 64);
  CHECK(StatusOf(line + fill + "\r\n", limits) == 0);          // exactly 64 bytes
  CHECK(StatusOf(line + "X" + fill + "\r\n", limits) == 431);  // 65

  // No line end in sight: refused once the 65th byte is there, without waiting for more.
  RequestParser p(limits);
  std::string endless = line + "X: " + std::string(100, 'a');
  size_t used = 0;
  CHECK(p.Parse(endless.data(), 64, &used) == RequestParser::State::kNeedMore);
  CHECK(used == 64);
  CHECK(p.Parse(endless.data() + 64, 1, &used) == RequestParser::State::kError);
  CHECK(p.error_status() == 431);

  std::string three = line + "A: 1\r\nB: 2\r\nC: 3\r\n\r\n";
  CHECK(StatusOf(three, limits) == 0);
  CHECK(StatusOf(line + "A: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", limits) == 431);
}

TEST_CASE("http parser: error messages are short and printable", "[http_parser]") {
  std::string version = "HTTP/9.9";
  Outcome o = ParseOnce("GET / " + version + "\r\n\r\n");
  CHECK(o.status == 505);
  CHECK(o.message.find("HTTP/9.9") != std::string::npos);
  o = ParseOnce("POST / HTTP/1.1\r\nTransfer-Encoding: \xff" + std::string(200, 'z') +
                ", chunked\r\n\r\n");
  CHECK(o.status == 501);
  CHECK(o.message.size() < 64 + 40);
  CHECK(o.message.find('\xff') == std::string::npos);
}

TEST_CASE("http parser: started() tells a lost partial request from an idle close",
          "[http_parser]") {
  RequestParser p;
  size_t used = 0;
  CHECK_FALSE(p.started());
  CHECK(p.Parse("\r\n\r", 3, &used) == RequestParser::State::kNeedMore);
  CHECK(used == 3);
  CHECK_FALSE(p.started());
  CHECK(p.Parse("\nG", 2, &used) == RequestParser::State::kNeedMore);
  CHECK(p.started());
  p.Reset();
  CHECK_FALSE(p.started());
  CHECK(p.Parse("GET / HTTP/1.1\r\n\r\n", 18, &used) == RequestParser::State::kDone);
  CHECK(p.started());
}

TEST_CASE("http parser: pipelined requests and Reset", "[http_parser]") {
  std::string first = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\n";
  std::string second = "GET /b HTTP/1.1\r\nConnection: close\r\n\r\n";
  std::string wire = first + "abc" + second + "GET /c HTTP/1.1\r\n";
  Outcome o = ParseEverySplit(wire);
  REQUIRE(o.state == RequestParser::State::kDone);
  CHECK(o.consumed == first.size());

  RequestParser p;
  size_t used = 0;
  REQUIRE(p.Parse(wire.data(), wire.size(), &used) == RequestParser::State::kDone);
  REQUIRE(used == first.size());
  size_t off = used;
  // After kDone the parser stays done until Reset.
  CHECK(p.Parse(wire.data() + off, wire.size() - off, &used) == RequestParser::State::kDone);
  CHECK(used == 0);
  BodyDecoder body(p.request().body, p.request().content_length);
  std::string out;
  REQUIRE(body.Decode(wire.data() + off, wire.size() - off, &used, &out) ==
          BodyDecoder::State::kDone);
  CHECK(out == "abc");
  off += used;
  p.Reset();
  REQUIRE(p.Parse(wire.data() + off, wire.size() - off, &used) == RequestParser::State::kDone);
  CHECK(used == second.size());
  CHECK(p.request().target == "/b");
  CHECK(p.request().headers.size() == 1);
  CHECK_FALSE(p.request().keep_alive);
  CHECK(p.request().body == BodyKind::kNone);
  off += used;
  p.Reset();
  CHECK(p.Parse(wire.data() + off, wire.size() - off, &used) == RequestParser::State::kNeedMore);
  CHECK(used == wire.size() - off);
  CHECK(p.started());
}

TEST_CASE("http parser: after an error the parser stays failed until Reset", "[http_parser]") {
  RequestParser p;
  std::string bad = "GET / HTTP/1.1\r\nBad Name: x\r\nHost: y\r\n\r\n";
  size_t used = 0;
  REQUIRE(p.Parse(bad.data(), bad.size(), &used) == RequestParser::State::kError);
  CHECK(p.error_status() == 400);
  CHECK(used == std::string("GET / HTTP/1.1\r\nBad Name: x\r\n").size());  // up to the bad line
  CHECK(p.Parse("GET / HTTP/1.1\r\n\r\n", 18, &used) == RequestParser::State::kError);
  CHECK(used == 0);
  p.Reset();
  CHECK(p.error_status() == 0);
  CHECK(p.error_message().empty());
  // A CRLF left after the previous body is skipped and does not count as a started request.
  CHECK(p.Parse("\r\n", 2, &used) == RequestParser::State::kNeedMore);
  CHECK_FALSE(p.started());
  REQUIRE(p.Parse("GET / HTTP/1.1\r\n\r\n", 18, &used) == RequestParser::State::kDone);
  CHECK(p.request().headers.empty());
}

TEST_CASE("http parser: Content-Length bodies", "[http_parser]") {
  Decoded d = DecodeEverySplit(BodyKind::kLength, 5, "hello, and the next request");
  CHECK(d.state == BodyDecoder::State::kDone);
  CHECK(d.consumed == 5);
  CHECK(d.body == "hello");

  d = DecodeEverySplit(BodyKind::kLength, 10, "short");
  CHECK(d.state == BodyDecoder::State::kNeedMore);
  CHECK(d.consumed == 5);
  CHECK(d.decoded == 5);

  d = DecodeEverySplit(BodyKind::kLength, 0, "GET /");
  CHECK(d.state == BodyDecoder::State::kDone);
  CHECK(d.consumed == 0);
  d = DecodeEverySplit(BodyKind::kNone, 0, "GET /");
  CHECK(d.state == BodyDecoder::State::kDone);
  CHECK(d.consumed == 0);
  CHECK(BodyDecoder().done());

  // The decoder only appends to what the caller already holds.
  BodyDecoder b(BodyKind::kLength, 2);
  std::string out = "kept";
  size_t used = 0;
  CHECK(b.Decode("xyz", 3, &used, &out) == BodyDecoder::State::kDone);
  CHECK(out == "keptxy");
  CHECK(b.decoded() == 2);

  BodyDecoder negative(BodyKind::kLength, -1);
  CHECK(negative.Decode("x", 1, &used, &out) == BodyDecoder::State::kError);
  CHECK_FALSE(negative.error_message().empty());
}

TEST_CASE("http parser: chunked bodies with extensions and trailers", "[http_parser]") {
  std::string body =
      "5\r\nhello\r\n"
      "1A;name=value;quoted=\"a;b\"\r\n"
      "abcdefghijklmnopqrstuvwxyz\r\n"
      "0000a ; ext\r\n0123456789\r\n"
      "0\r\n"
      "Checksum: abc\r\n"
      "X-Trailer:\tdone\r\n"
      "\r\n";
  Decoded d = DecodeEverySplit(BodyKind::kChunked, 0, body + "GET / HTTP/1.1\r\n");
  CHECK(d.state == BodyDecoder::State::kDone);
  CHECK(d.consumed == body.size());
  CHECK(d.body == "helloabcdefghijklmnopqrstuvwxyz0123456789");
  CHECK(d.message.empty());

  d = DecodeEverySplit(BodyKind::kChunked, 0, "3\nabc\nF\n0123456789abcde\n0\n\n");
  CHECK(d.state == BodyDecoder::State::kDone);
  CHECK(d.body == "abc0123456789abcde");

  d = DecodeEverySplit(BodyKind::kChunked, 0, "0\r\n\r\n");
  CHECK(d.state == BodyDecoder::State::kDone);
  CHECK(d.body.empty());

  d = DecodeEverySplit(BodyKind::kChunked, 0, "4\r\nabcd\r\n0\r\nX: y\r\n");
  CHECK(d.state == BodyDecoder::State::kNeedMore);
  CHECK(d.body == "abcd");

  d = DecodeEverySplit(BodyKind::kChunked, 0, "fffffffffffffff\r\n" + std::string(100, 'x'));
  CHECK(d.state == BodyDecoder::State::kNeedMore);
  CHECK(d.decoded == 100);
}

TEST_CASE("http parser: malformed chunked framing is refused", "[http_parser]") {
  const std::string bad[] = {
      "x\r\n",
      "\r\n",
      "-1\r\n",
      " 5\r\nhello\r\n0\r\n\r\n",
      "5 x\r\nhello\r\n0\r\n\r\n",
      "5;\x01\r\nhello\r\n0\r\n\r\n",
      "0000000000000005\r\nhello\r\n0\r\n\r\n",  // 16 hex digits
      "5\r\nhelloX\r\n",
      "5\r\nhello\rX",
      "5\r\nhello\r\n0\r\nbad trailer\r\n\r\n",
      "5\r\nhello\r\n0\r\n folded: x\r\n\r\n",
      "5\r\nhello\r\n0\r\nX : y\r\n\r\n",
      "5\r\nhello\r\n0\r\nX: a\rb\r\n\r\n",
      "5\rx\nhello\r\n",
      "5;" + std::string(5000, 'e') + "\r\n",
      "5;" + std::string(5000, 'e'),
      "0\r\nX: " + std::string(5000, 'v') + "\r\n\r\n",
      "0\r\n" +
          [] {
            std::string t;
            for (int i = 0; i < 10; ++i) t += "X: " + std::string(2000, 'v') + "\r\n";
            return t;
          }() +
          "\r\n",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    INFO(bad[i].substr(0, 80));
    Decoded d = DecodePieces(BodyKind::kChunked, 0, bad[i], {});
    CHECK(d.state == BodyDecoder::State::kError);
    CHECK_FALSE(d.message.empty());
    std::vector<size_t> bytes;
    for (size_t k = 1; k < bad[i].size(); ++k) bytes.push_back(k);
    CHECK(DecodePieces(BodyKind::kChunked, 0, bad[i], bytes) == d);
    if (bad[i].size() < 100) DecodeEverySplit(BodyKind::kChunked, 0, bad[i]);
  }
  // Bounds are exact: a chunk-size line of 4096 bytes with its CR (not its LF) is accepted.
  std::string line = "1;" + std::string(4093, 'e') + "\r";
  Decoded d = DecodePieces(BodyKind::kChunked, 0, line + "\nz\r\n0\r\n\r\n", {});
  CHECK(d.state == BodyDecoder::State::kDone);
  CHECK(d.body == "z");
  d = DecodePieces(BodyKind::kChunked, 0, "e" + line + "\nz\r\n0\r\n\r\n", {});
  CHECK(d.state == BodyDecoder::State::kError);
  CHECK(d.consumed == 4097);
}

TEST_CASE("http parser: a whole request split everywhere, head then chunked body",
          "[http_parser]") {
  std::string wire =
      "PUT /v1/blobs/x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;a=b\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\nNEXT";
  // A front end's loop: append what arrived, parse the head, then decode the body.
  auto run = [&](size_t cut) {
    RequestParser p;
    BodyDecoder body;
    bool head_done = false;
    std::string pending, out;
    for (std::string piece : {wire.substr(0, cut), wire.substr(cut)}) {
      pending += piece;
      size_t used = 0;
      if (!head_done) {
        auto s = p.Parse(pending.data(), pending.size(), &used);
        pending.erase(0, used);
        if (s == RequestParser::State::kNeedMore) continue;
        REQUIRE(s == RequestParser::State::kDone);
        head_done = true;
        body = BodyDecoder(p.request().body, p.request().content_length);
      }
      if (body.done()) break;
      auto s = body.Decode(pending.data(), pending.size(), &used, &out);
      pending.erase(0, used);
      REQUIRE(s != BodyDecoder::State::kError);
    }
    CHECK(body.done());
    return std::make_pair(pending, out);
  };
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    INFO("split at " << cut);
    auto [rest, out] = run(cut);
    CHECK(out == "abcde");
    CHECK(rest == "NEXT");
  }
}

TEST_CASE("http parser: reason phrases", "[http_parser]") {
  CHECK(std::string(ReasonPhrase(200)) == "OK");
  CHECK(std::string(ReasonPhrase(404)) == "Not Found");
  CHECK(std::string(ReasonPhrase(416)) == "Range Not Satisfiable");
  CHECK(std::string(ReasonPhrase(431)) == "Request Header Fields Too Large");
  CHECK(std::string(ReasonPhrase(505)) == "HTTP Version Not Supported");
  CHECK(std::string(ReasonPhrase(299)) == "Unknown");
}
