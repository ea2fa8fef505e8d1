#include "tests/unit/images/writers.h"

#include <png.h>
#include <webp/encode.h>
#include <webp/mux.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
// clang-format off
#include <jpeglib.h>
// clang-format on

namespace gleaner::images::testing {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "test writer failed: %s\n", what);
    std::abort();
  }
}

void PutLe(std::string* s, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s->push_back(char((v >> (8 * i)) & 0xFF));
}

std::string RawDeflate(const std::string& in) {
  z_stream z{};
  Check(deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK, "deflate");
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = uInt(out.size());
  Check(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate finish");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

uint32_t Crc(const std::string& s) {
  return uint32_t(crc32(0, reinterpret_cast<const Bytef*>(s.data()), uInt(s.size())));
}

void PngWrite(png_structp png, png_bytep data, size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<char*>(data), n);
}
void PngFlush(png_structp) {}

}  // namespace

Image Pattern(int width, int height, int salt) {
  Image im(width, height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = im.pixel(x, y);
      p[0] = uint8_t(x * 255 / std::max(width - 1, 1) + salt);
      p[1] = uint8_t(y * 255 / std::max(height - 1, 1) + 3 * salt);
      p[2] = uint8_t((x * 3 + y * 5 + salt * 7) % 256);
    }
  }
  return im;
}

std::string MakeExif(int orientation, bool little, bool prefix) {
  std::string s = prefix ? std::string("Exif\0\0", 6) : "";
  auto put16 = [&](uint16_t v) {
    s.push_back(char(little ? v & 0xFF : v >> 8));
    s.push_back(char(little ? v >> 8 : v & 0xFF));
  };
  auto put32 = [&](uint32_t v) {
    put16(uint16_t(little ? v & 0xFFFF : v >> 16));
    put16(uint16_t(little ? v >> 16 : v & 0xFFFF));
  };
  s += little ? "II" : "MM";
  put16(42);
  put32(8);
  put16(2);  // two entries: ImageWidth (ignored), Orientation
  put16(0x0100);
  put16(3);
  put32(1);
  put16(64);
  put16(0);
  put16(0x0112);
  put16(3);
  put32(1);
  put16(uint16_t(orientation));
  put16(0);
  put32(0);  // no next IFD
  return s;
}

std::string WriteJpeg(const Image& image, const JpegSpec& spec) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = JDIMENSION(image.width);
  c.image_height = JDIMENSION(image.height);
  c.input_components = spec.components;
  c.in_color_space = spec.components == 1   ? JCS_GRAYSCALE
                     : spec.components == 4 ? JCS_CMYK
                                            : JCS_RGB;
  jpeg_set_defaults(&c);
  if (spec.components == 4) {
    jpeg_set_colorspace(&c, spec.ycck ? JCS_YCCK : JCS_CMYK);
    c.write_Adobe_marker = spec.adobe_marker ? TRUE : FALSE;
  }
  jpeg_set_quality(&c, spec.quality, TRUE);
  if (spec.progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  if (!spec.exif.empty()) {
    jpeg_write_marker(&c, JPEG_APP0 + 1, reinterpret_cast<const JOCTET*>(spec.exif.data()),
                      unsigned(spec.exif.size()));
  }
  std::vector<uint8_t> row(size_t(image.width) * size_t(spec.components));
  while (c.next_scanline < c.image_height) {
    int y = int(c.next_scanline);
    for (int x = 0; x < image.width; ++x) {
      const uint8_t* p = image.pixel(x, y);
      if (spec.components == 1) {
        row[size_t(x)] = p[0];
      } else if (spec.components == 3) {
        std::memcpy(&row[size_t(x) * 3], p, 3);
      } else {
        std::memcpy(&row[size_t(x) * 4], &spec.cmyk[(size_t(y) * image.width + x) * 4], 4);
      }
    }
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::string out(reinterpret_cast<char*>(buf), size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

std::string WritePng(const PngSpec& spec) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  Check(png != nullptr && info != nullptr, "png create");
  std::string out;
  png_set_write_fn(png, &out, PngWrite, PngFlush);
  png_set_IHDR(png, info, png_uint_32(spec.width), png_uint_32(spec.height), spec.bit_depth,
               spec.color_type, spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
  std::vector<png_color> pal;
  for (auto& c : spec.palette) pal.push_back({c[0], c[1], c[2]});
  if (!pal.empty()) png_set_PLTE(png, info, pal.data(), int(pal.size()));
  if (!spec.trns.empty()) {
    png_set_tRNS(png, info, spec.trns.data(), int(spec.trns.size()), nullptr);
  }
  if (spec.has_trns_key) {
    png_color_16 key{};
    key.gray = key.red = spec.trns_key[0];
    key.green = spec.trns_key[1];
    key.blue = spec.trns_key[2];
    png_set_tRNS(png, info, nullptr, 0, &key);
  }
  if (!spec.exif.empty()) {
    png_set_eXIf_1(png, info, png_uint_32(spec.exif.size()),
                   reinterpret_cast<png_bytep>(const_cast<char*>(spec.exif.data())));
  }
  png_write_info(png, info);
  size_t row_bytes = spec.samples.size() / size_t(spec.height);
  std::vector<png_bytep> rows;
  for (int y = 0; y < spec.height; ++y) {
    rows.push_back(const_cast<png_bytep>(&spec.samples[size_t(y) * row_bytes]));
  }
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::string PatchedPngSize(std::string png, uint32_t w, uint32_t h) {
  // IHDR data starts at byte 16; its CRC covers type + data (bytes 12..28).
  for (int i = 0; i < 4; ++i) {
    png[size_t(16 + i)] = char(w >> (24 - 8 * i));
    png[size_t(20 + i)] = char(h >> (24 - 8 * i));
  }
  uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(&png[12]), 17));
  for (int i = 0; i < 4; ++i) png[size_t(29 + i)] = char(crc >> (24 - 8 * i));
  return png;
}

std::string WriteWebp(const Image& image, bool lossless, const std::vector<uint8_t>& alpha,
                      const std::string& exif) {
  uint8_t* buf = nullptr;
  size_t size = 0;
  if (alpha.empty()) {
    size = lossless ? WebPEncodeLosslessRGB(image.rgb.data(), image.width, image.height,
                                            image.width * 3, &buf)
                    : WebPEncodeRGB(image.rgb.data(), image.width, image.height, image.width * 3,
                                    90, &buf);
  } else {
    std::vector<uint8_t> rgba;
    for (size_t i = 0; i < alpha.size(); ++i) {
      rgba.insert(rgba.end(), &image.rgb[i * 3], &image.rgb[i * 3] + 3);
      rgba.push_back(alpha[i]);
    }
    size =
        lossless
            ? WebPEncodeLosslessRGBA(rgba.data(), image.width, image.height, image.width * 4, &buf)
            : WebPEncodeRGBA(rgba.data(), image.width, image.height, image.width * 4, 90, &buf);
  }
  Check(size > 0, "webp encode");
  std::string out(reinterpret_cast<char*>(buf), size);
  WebPFree(buf);
  if (exif.empty()) return out;
  WebPData bitstream{reinterpret_cast<const uint8_t*>(out.data()), out.size()};
  WebPData chunk{reinterpret_cast<const uint8_t*>(exif.data()), exif.size()};
  WebPMux* mux = WebPMuxNew();
  Check(WebPMuxSetImage(mux, &bitstream, 1) == WEBP_MUX_OK, "mux image");
  Check(WebPMuxSetChunk(mux, "EXIF", &chunk, 1) == WEBP_MUX_OK, "mux exif");
  WebPData assembled;
  Check(WebPMuxAssemble(mux, &assembled) == WEBP_MUX_OK, "mux assemble");
  std::string with(reinterpret_cast<const char*>(assembled.bytes), assembled.size);
  WebPDataClear(&assembled);
  WebPMuxDelete(mux);
  return with;
}

namespace {

struct ZipRecord {
  std::string stored;
  uint16_t method;
  uint32_t crc;
  uint64_t usize;
};

ZipRecord Encode(const ZipEntry& e) {
  ZipRecord r;
  r.stored = e.deflate ? RawDeflate(e.data) : e.data;
  r.method = e.method_override ? e.method_override : e.deflate ? 8 : 0;
  r.crc = Crc(e.data);
  r.usize = e.declared_size >= 0 ? uint64_t(e.declared_size) : e.data.size();
  return r;
}

std::string LocalRecord(const ZipEntry& e, const ZipRecord& r, bool zip64) {
  std::string s;
  PutLe(&s, 0x04034b50, 4);
  PutLe(&s, zip64 ? 45 : 20, 2);
  PutLe(&s, e.flags, 2);
  PutLe(&s, r.method, 2);
  PutLe(&s, 0, 4);  // time, date
  PutLe(&s, r.crc, 4);
  PutLe(&s, zip64 ? 0xFFFFFFFF : r.stored.size(), 4);
  PutLe(&s, zip64 ? 0xFFFFFFFF : r.usize, 4);
  PutLe(&s, e.name.size(), 2);
  PutLe(&s, zip64 ? 20 : 0, 2);
  s += e.name;
  if (zip64) {
    PutLe(&s, 1, 2);
    PutLe(&s, 16, 2);
    PutLe(&s, r.usize, 8);
    PutLe(&s, r.stored.size(), 8);
  }
  return s + r.stored;
}

}  // namespace

std::string ZipLocalRecord(const ZipEntry& entry) {
  return LocalRecord(entry, Encode(entry), false);
}

std::string WriteZip(const std::vector<ZipEntry>& entries, const ZipOptions& o) {
  std::string body, central;
  for (const ZipEntry& e : entries) {
    ZipRecord r = Encode(e);
    uint64_t offset = e.local_offset >= 0 ? uint64_t(e.local_offset) : body.size();
    if (e.write_local) body += LocalRecord(e, r, o.zip64);
    PutLe(&central, 0x02014b50, 4);
    PutLe(&central, 3 << 8 | 20, 2);  // made by: Unix
    PutLe(&central, o.zip64 ? 45 : 20, 2);
    PutLe(&central, e.flags, 2);
    PutLe(&central, r.method, 2);
    PutLe(&central, 0, 4);
    PutLe(&central, r.crc, 4);
    PutLe(&central, o.zip64 ? 0xFFFFFFFF : r.stored.size(), 4);
    PutLe(&central, o.zip64 ? 0xFFFFFFFF : r.usize, 4);
    PutLe(&central, e.name.size(), 2);
    PutLe(&central, o.zip64 ? 28 : 0, 2);
    PutLe(&central, 0, 2);  // comment
    PutLe(&central, o.disk, 2);
    PutLe(&central, 0, 2);
    PutLe(&central, uint64_t(e.unix_mode) << 16, 4);
    PutLe(&central, o.zip64 ? 0xFFFFFFFF : offset, 4);
    central += e.name;
    if (o.zip64) {
      PutLe(&central, 1, 2);
      PutLe(&central, 24, 2);
      PutLe(&central, r.usize, 8);
      PutLe(&central, r.stored.size(), 8);
      PutLe(&central, offset, 8);
    }
  }
  std::string out = body + central;
  if (o.zip64) {
    uint64_t end64 = out.size();
    PutLe(&out, 0x06064b50, 4);
    PutLe(&out, 44, 8);
    PutLe(&out, 45, 2);
    PutLe(&out, 45, 2);
    PutLe(&out, o.disk, 4);
    PutLe(&out, 0, 4);
    PutLe(&out, entries.size(), 8);
    PutLe(&out, entries.size(), 8);
    PutLe(&out, central.size(), 8);
    PutLe(&out, body.size(), 8);
    PutLe(&out, 0x07064b50, 4);
    PutLe(&out, 0, 4);
    PutLe(&out, end64, 8);
    PutLe(&out, 1, 4);
  }
  PutLe(&out, 0x06054b50, 4);
  PutLe(&out, o.disk, 2);
  PutLe(&out, 0, 2);
  PutLe(&out, o.zip64 ? 0xFFFF : entries.size(), 2);
  PutLe(&out, o.zip64 ? 0xFFFF : entries.size(), 2);
  PutLe(&out, o.zip64 ? 0xFFFFFFFF : central.size(), 4);
  PutLe(&out, o.zip64 ? 0xFFFFFFFF : body.size(), 4);
  PutLe(&out, 0, 2);
  return out;
}

namespace {

std::string TarHeader(const std::string& name, size_t size, char type, const std::string& link) {
  std::string h(512, '\0');
  std::string n = name, prefix;
  if (n.size() > 100) {  // POSIX split at a slash: prefix (<= 155) / name (<= 100)
    for (size_t slash = n.find('/'); slash != std::string::npos; slash = n.find('/', slash + 1)) {
      if (slash <= 155 && n.size() - slash - 1 <= 100) {
        prefix = n.substr(0, slash);
        n = n.substr(slash + 1);
        break;
      }
    }
  }
  std::memcpy(&h[0], n.data(), std::min<size_t>(n.size(), 100));
  std::snprintf(&h[100], 8, "%07o", 0644);
  std::snprintf(&h[108], 8, "%07o", 0);
  std::snprintf(&h[116], 8, "%07o", 0);
  std::snprintf(&h[124], 12, "%011llo", static_cast<unsigned long long>(size));
  std::snprintf(&h[136], 12, "%011o", 0);
  h[156] = type;
  std::memcpy(&h[157], link.data(), std::min<size_t>(link.size(), 100));
  std::memcpy(&h[257],
              "ustar\0"
              "00",
              8);
  std::memcpy(&h[345], prefix.data(), std::min<size_t>(prefix.size(), 155));
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += uint8_t(c);
  std::snprintf(&h[148], 8, "%06o", sum);
  h[155] = ' ';
  return h;
}

void AppendTar(std::string* out, const std::string& name, const std::string& data, char type,
               const std::string& link) {
  *out += TarHeader(name, data.size(), type, link);
  *out += data;
  out->append((512 - data.size() % 512) % 512, '\0');
}

}  // namespace

std::string WriteTar(const std::vector<TarEntry>& entries) {
  std::string out;
  for (const TarEntry& e : entries) {
    if (e.long_name == TarEntry::LongName::kGnu) {
      AppendTar(&out, "././@LongLink", e.name + std::string(1, '\0'), 'L', "");
    } else if (e.long_name == TarEntry::LongName::kPax) {
      std::string body = " path=" + e.name + "\n";
      size_t len = body.size() + 1;
      while (std::to_string(len).size() + body.size() != len) ++len;
      AppendTar(&out, "PaxHeaders/x", std::to_string(len) + body, 'x', "");
    }
    std::string name = e.long_name == TarEntry::LongName::kNone ? e.name : "truncated-name";
    AppendTar(&out, name, e.type == '0' ? e.data : "", e.type, e.link);
  }
  out.append(1024, '\0');
  return out;
}

std::string Gzip(const std::string& data) {
  z_stream z{};
  Check(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK, "gzip");
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = uInt(data.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = uInt(out.size());
  Check(deflate(&z, Z_FINISH) == Z_STREAM_END, "gzip finish");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace gleaner::images::testing
