#include "coordinator/cli/tar_writer.h"

#include <cstring>
#include <vector>

namespace gleaner::cli {
namespace {

constexpr int64_t kMaxTarFile = (int64_t(1) << 33) - 1;  // 11 octal digits

void Octal(char* field, size_t width, uint64_t v) {
  // width - 1 digits, zero-padded, then NUL.
  std::snprintf(field, width, "%0*llo", int(width - 1), static_cast<unsigned long long>(v));
}

}  // namespace

TarWriter::TarWriter(const std::string& path) : path_(path) {
  out_ = std::fopen(path.c_str(), "wb");
}

TarWriter::~TarWriter() {
  if (out_ != nullptr) std::fclose(out_);
}

Failure TarWriter::Add(const std::string& name, const std::string& source) {
  if (out_ == nullptr) return {kExitLocal, "cannot write " + path_};
  std::string prefix, base = name;
  if (name.size() > 100) {
    size_t cut = name.rfind('/', 155);
    if (cut == std::string::npos || name.size() - cut - 1 > 100 || cut == 0) {
      return {kExitLocal, "path too long for the archive (255 bytes at most): " + name};
    }
    prefix = name.substr(0, cut);
    base = name.substr(cut + 1);
  }
  std::FILE* in = std::fopen(source.c_str(), "rb");
  if (in == nullptr) return {kExitLocal, "cannot read " + source};
  std::fseek(in, 0, SEEK_END);
  int64_t size = std::ftell(in);
  std::fseek(in, 0, SEEK_SET);
  if (size < 0 || size > kMaxTarFile) {
    std::fclose(in);
    return {kExitLocal, source + " is too large for the archive"};
  }
  char h[512] = {0};
  std::memcpy(h, base.data(), base.size());
  Octal(h + 100, 8, 0644);
  Octal(h + 108, 8, 0);
  Octal(h + 116, 8, 0);
  Octal(h + 124, 12, uint64_t(size));
  Octal(h + 136, 12, 0);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memcpy(h + 345, prefix.data(), prefix.size());
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 7, "%06o", sum);
  h[154] = '\0';
  h[155] = ' ';
  bool ok = std::fwrite(h, 1, 512, out_) == 512;
  std::vector<char> buf(1 << 16);
  int64_t copied = 0;
  size_t n;
  while (ok && (n = std::fread(buf.data(), 1, buf.size(), in)) > 0) {
    ok = std::fwrite(buf.data(), 1, n, out_) == n;
    copied += int64_t(n);
  }
  std::fclose(in);
  if (!ok || copied != size) return {kExitLocal, "cannot archive " + source};
  static const char kZeros[512] = {0};
  size_t pad = size_t((512 - size % 512) % 512);
  if (std::fwrite(kZeros, 1, pad, out_) != pad) return {kExitLocal, "cannot write " + path_};
  return {};
}

Failure TarWriter::Finish() {
  if (out_ == nullptr) return {kExitLocal, "cannot write " + path_};
  static const char kZeros[1024] = {0};
  bool ok = std::fwrite(kZeros, 1, sizeof kZeros, out_) == sizeof kZeros;
  ok = std::fclose(out_) == 0 && ok;
  out_ = nullptr;
  if (!ok) return {kExitLocal, "cannot write " + path_};
  return {};
}

}  // namespace gleaner::cli
