// zlib inflation for archives: raw deflate (zip entries) and gzip (.tar.gz), both bounded.
#include <zlib.h>

#include <algorithm>

#include "agent/train/images/archive_entries.h"

namespace gleaner::images::internal {
namespace {

constexpr size_t kInflateChunk = 1u << 16;

}  // namespace

Result<std::string> InflateRaw(std::string_view in, uint64_t size, uint64_t max_bytes) {
  const uint64_t want = std::min(size, max_bytes);
  std::string out(want, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return Status::Internal("zlib: inflateInit failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  uint64_t in_left = in.size(), produced = 0;
  int rc = Z_OK;
  while (produced < want && rc != Z_STREAM_END) {
    if (z.avail_in == 0) {
      z.avail_in = uInt(std::min<uint64_t>(in_left, kInflateChunk));
      in_left -= z.avail_in;
    }
    z.next_out = reinterpret_cast<Bytef*>(&out[produced]);
    z.avail_out = uInt(std::min<uint64_t>(want - produced, kInflateChunk));
    uInt before = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    produced += before - z.avail_out;
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && in_left == 0) break;  // input ran out
    if (rc != Z_OK && rc != Z_STREAM_END) break;
  }
  // A whole entry must end exactly at its declared size.
  if (want == size && rc == Z_OK && produced == size) {
    unsigned char probe;
    z.next_out = &probe;
    z.avail_out = 1;
    if (z.avail_in == 0) {
      z.avail_in = uInt(std::min<uint64_t>(in_left, kInflateChunk));
      in_left -= z.avail_in;
    }
    rc = inflate(&z, Z_NO_FLUSH);
    if (z.avail_out == 0) rc = Z_DATA_ERROR;  // more data than declared
  }
  inflateEnd(&z);
  if (produced != want || (want == size && rc != Z_STREAM_END)) {
    return Status::Corruption("deflate data is damaged or does not match the declared size");
  }
  return out;
}

Result<std::string> Gunzip(std::string_view in, const ArchiveLimits& limits) {
  const uint64_t cap = limits.max_total_bytes + uint64_t(limits.max_entries + 2) * 1024 + 10240;
  std::string out;
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Status::Internal("zlib: inflateInit failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  uint64_t in_left = in.size();
  int rc = Z_OK;
  Status st;
  while (rc != Z_STREAM_END) {
    if (z.avail_in == 0) {
      if (in_left == 0) break;
      z.avail_in = uInt(std::min<uint64_t>(in_left, kInflateChunk));
      in_left -= z.avail_in;
    }
    size_t at = out.size();
    out.resize(at + kInflateChunk);
    z.next_out = reinterpret_cast<Bytef*>(&out[at]);
    z.avail_out = uInt(kInflateChunk);
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(at + kInflateChunk - z.avail_out);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    if (out.size() > cap) {
      st = Status(Code::kTooLarge, "tar.gz: more than " + std::to_string(limits.max_total_bytes) +
                                       " bytes uncompressed");
      break;
    }
    if (out.size() > kRatioFloorBytes &&
        out.size() / std::max<uint64_t>(z.total_in, 1) > limits.max_ratio) {
      st = Status(Code::kTooLarge, "tar.gz: compression ratio over " +
                                       std::to_string(limits.max_ratio) + ":1 (gzip bomb guard)");
      break;
    }
  }
  inflateEnd(&z);
  if (!st.ok()) return st;
  if (rc != Z_STREAM_END) return Status::Corruption("tar.gz: gzip data is damaged or truncated");
  return out;
}

}  // namespace gleaner::images::internal
