// libFuzzer target for the HTTP/1.1 request framing (coordinator/native/http_parser.h): the input
// is a connection's byte stream. It is read as a front end would, request after request (head,
// then the body its framing says), once with all bytes in one buffer and once in pieces whose
// sizes come from the input; both readings must give the same transcript. Every header value and
// the raw input also go through ParseRange.
//
// Input format: byte 0 selects the limits (bit 0: small limits, so 414/431 are reached) and the
// range object size (bits 1-2); bytes 1-4 seed the piece sizes; the rest is the stream.
// Invariants (violations trap): consumed <= the bytes given; kNeedMore consumes all it is given;
// kDone ends exactly at the first blank line after the request line; decoded() equals the body
// bytes produced; a satisfiable range lies inside the object; error messages are short and
// printable; and one-shot and piecewise transcripts are identical.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "coordinator/core/blob_policy.h"
#include "coordinator/native/http/http_parser.h"

namespace {

using namespace gleaner::native::http;
using gleaner::core::ByteRange;
using gleaner::core::ParseRange;
using gleaner::core::RangeResult;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Piece sizes: mostly small (1-16 bytes) so lines and chunk framing straddle calls, sometimes
// large. A piece size of 0 means "everything at once".
struct Pieces {
  uint32_t state;
  size_t Next() {
    if (state == 0) return SIZE_MAX;
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    uint32_t r = state % 64;
    return r < 48 ? 1 + r % 16 : 1 + state % 4096;
  }
};

void CheckMessage(const std::string& m) {
  Check(!m.empty() && m.size() <= 200);
  for (char c : m) Check(c >= 0x20 && c < 0x7f);
}

// The head [start, end) must end at the first blank line after any leading empty lines.
void CheckHeadEnd(std::string_view wire, size_t start, size_t end) {
  std::string_view head = wire.substr(start, end - start);
  size_t i = 0;
  while (true) {  // skip leading empty lines
    if (head.substr(i, 1) == "\n") {
      i += 1;
    } else if (head.substr(i, 2) == "\r\n") {
      i += 2;
    } else {
      break;
    }
  }
  size_t lf = head.find("\n\n", i);
  size_t crlf = head.find("\n\r\n", i);
  size_t blank_end = std::min(lf == std::string_view::npos ? SIZE_MAX : lf + 2,
                              crlf == std::string_view::npos ? SIZE_MAX : crlf + 3);
  Check(blank_end == head.size());
}

void CheckRequest(const Request& r, const Limits& limits) {
  Check(!r.method.empty() && !r.target.empty());
  Check(r.target.size() <= limits.max_target_bytes);
  Check(r.version_minor == 0 || r.version_minor == 1);
  Check(r.headers.size() <= limits.max_headers);
  for (const auto& [name, value] : r.headers) {
    const std::string* first = r.Header(name);
    Check(first != nullptr);
    Check(!name.empty());
    for (char c : name) Check(!(c >= 'A' && c <= 'Z') && c != ':' && c != ' ');
    Check(value.empty() || (value.front() != ' ' && value.front() != '\t' && value.back() != ' ' &&
                            value.back() != '\t'));
    for (char c : value) Check(c != '\r' && c != '\n' && c != '\0');
  }
  Check(r.content_length >= 0);
  Check(r.body == BodyKind::kLength || r.content_length == 0);
  Check(r.body != BodyKind::kChunked || r.version_minor == 1);
  Check(!r.expect_continue || r.version_minor == 1);
}

void CheckRanges(const Request& r, int64_t size) {
  for (const auto& h : r.headers) {
    ByteRange br{-1, -1};
    if (ParseRange(h.second, size, &br) == RangeResult::kSatisfiable) {
      Check(0 <= br.first && br.first <= br.last && br.last < size);
    }
  }
}

// Reads the stream request after request; seed 0 delivers everything at once. Returns a
// transcript of what the front end saw.
std::string Read(std::string_view wire, const Limits& limits, uint32_t seed, int64_t range_size) {
  Pieces pieces{seed};
  std::string t, pending, body;
  RequestParser parser(limits);
  BodyDecoder decoder;
  bool in_body = false;
  size_t delivered = 0, head_start = 0, taken = 0;  // taken: bytes consumed by parser/decoder
  size_t head_used = 0, body_used = 0;
  for (int requests = 0; requests < 8;) {
    size_t n = std::min(pieces.Next(), wire.size() - delivered);
    pending.append(wire.data() + delivered, n);
    delivered += n;
    bool need_more = false;
    while (!need_more) {
      size_t used = 0;
      if (!in_body) {
        auto s = parser.Parse(pending.data(), pending.size(), &used);
        Check(used <= pending.size());
        pending.erase(0, used);
        head_used += used;
        taken += used;
        if (s == RequestParser::State::kNeedMore) {
          Check(pending.empty());
          Check(head_used <= limits.max_head_bytes);
          need_more = true;
          continue;
        }
        if (s == RequestParser::State::kError) {
          Check(head_used <= limits.max_head_bytes);
          int status = parser.error_status();
          Check(status == 400 || status == 414 || status == 431 || status == 501 || status == 505);
          Check(std::string(ReasonPhrase(status)) != "Unknown");
          CheckMessage(parser.error_message());
          t += "E" + std::to_string(status) + " " + std::to_string(head_used) + " " +
               parser.error_message() + "\n";
          return t;
        }
        const Request& r = parser.request();
        Check(head_used <= limits.max_head_bytes);
        CheckHeadEnd(wire, head_start, head_start + head_used);
        CheckRequest(r, limits);
        CheckRanges(r, range_size);
        t += "H " + std::to_string(head_used) + " " + r.method + " " + r.target + " " +
             std::to_string(r.version_minor) + " " + std::to_string(r.headers.size()) + " " +
             std::to_string(static_cast<int>(r.body)) + " " + std::to_string(r.content_length) +
             (r.keep_alive ? " ka" : " close") + (r.expect_continue ? " 100" : "") + "\n";
        for (const auto& [name, value] : r.headers) t += name + "=" + value + "\n";
        decoder = BodyDecoder(r.body, r.content_length);
        body.clear();
        body_used = 0;
        in_body = true;
      }
      auto s = decoder.Decode(pending.data(), pending.size(), &used, &body);
      Check(used <= pending.size());
      Check(decoder.decoded() == static_cast<int64_t>(body.size()));
      Check(body.size() <= body_used + used);
      pending.erase(0, used);
      body_used += used;
      taken += used;
      if (s == BodyDecoder::State::kNeedMore) {
        Check(pending.empty() && !decoder.done());
        need_more = true;
        continue;
      }
      if (s == BodyDecoder::State::kError) {
        CheckMessage(decoder.error_message());
        t += "BE " + std::to_string(body_used) + " " + decoder.error_message() + "\n";
        return t;
      }
      Check(decoder.done());
      if (parser.request().body == BodyKind::kLength) {
        Check(body_used == static_cast<size_t>(parser.request().content_length));
      }
      t += "B " + std::to_string(body_used) + " " + body + "\n";
      in_body = false;
      head_used = 0;
      head_start = taken;
      parser.Reset();
      Check(!parser.started());
      if (++requests == 8) return t;
    }
    if (delivered == wire.size()) {
      t += in_body ? "end in body\n" : parser.started() ? "end in head\n" : "end\n";
      return t;
    }
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  Limits limits;
  if (data[0] & 1) {
    limits.max_head_bytes = 200;
    limits.max_headers = 4;
    limits.max_target_bytes = 40;
  }
  const int64_t kSizes[] = {0, 1, 1000, INT64_MAX};
  int64_t range_size = kSizes[(data[0] >> 1) & 3];
  uint32_t seed = static_cast<uint32_t>(data[1]) | static_cast<uint32_t>(data[2]) << 8 |
                  static_cast<uint32_t>(data[3]) << 16 | static_cast<uint32_t>(data[4]) << 24;
  std::string_view wire(reinterpret_cast<const char*>(data) + 5, size - 5);

  std::string once = Read(wire, limits, 0, range_size);
  std::string split = Read(wire, limits, seed | 1, range_size);
  Check(once == split);

  ByteRange br{-1, -1};
  if (ParseRange(wire, range_size, &br) == RangeResult::kSatisfiable) {
    Check(0 <= br.first && br.first <= br.last && br.last < range_size);
  }
  return 0;
}
