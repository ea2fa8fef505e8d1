// WebP through libwebp (still images, lossy or lossless, with or without alpha) and
// libwebpdemux (the EXIF chunk).
#include <webp/decode.h>
#include <webp/demux.h>

#include "agent/train/images/codecs.h"

namespace gleaner::images::internal {
namespace {

std::string StatusText(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "truncated WebP (file ends early)";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "WebP uses a feature libwebp does not support";
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory decoding WebP";
    default:
      return "corrupt WebP (bitstream error)";
  }
}

std::string ExifChunk(std::string_view bytes) {
  WebPData data{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
  WebPDemuxer* demux = WebPDemux(&data);
  if (demux == nullptr) return "";
  std::string exif;
  WebPChunkIterator it;
  if (WebPDemuxGetChunk(demux, "EXIF", 1, &it)) {
    exif.assign(reinterpret_cast<const char*>(it.chunk.bytes), it.chunk.size);
    WebPDemuxReleaseChunkIterator(&it);
  }
  WebPDemuxDelete(demux);
  return exif;
}

}  // namespace

Result<DecodedFile> DecodeWebp(std::string_view bytes, const DecodeLimits& limits) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  WebPDecoderConfig config;
  if (WebPInitDecoderConfig(&config) == 0) return Status::Internal("libwebp version mismatch");
  VP8StatusCode st = WebPGetFeatures(data, bytes.size(), &config.input);
  if (st != VP8_STATUS_OK) return Status::Corruption(StatusText(st));
  if (config.input.has_animation) return Status::Invalid("animated WebP images are not supported");
  const int w = config.input.width, h = config.input.height;
  GLEANER_RETURN_IF_ERROR(CheckDimensions(w, h, limits));
  DecodedFile out;
  out.image = Image(w, h);
  // RGB output ignores an alpha channel (no premultiplication, no compositing).
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = out.image.rgb.data();
  config.output.u.RGBA.stride = w * 3;
  config.output.u.RGBA.size = out.image.rgb.size();
  st = WebPDecode(data, bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);
  if (st != VP8_STATUS_OK) return Status::Corruption(StatusText(st));
  out.exif = ExifChunk(bytes);
  return out;
}

}  // namespace gleaner::images::internal
