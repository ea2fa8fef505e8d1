// PNG through libpng. libpng reports errors through the error callback and then longjmps to
// png_jmpbuf, set in Run(), whose frame holds no C++ object with a destructor (the job's state
// lives in the caller's frame), so the jump skips nothing that needs cleaning up.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "agent/train/images/codecs.h"
#include "agent/train/images/png_errors.h"

namespace gleaner::images::internal {
namespace {

// Ancillary chunks (text, ICC profiles, EXIF) larger than this are an error, not an allocation.
constexpr png_alloc_size_t kMaxChunkBytes = 8u << 20;

struct PngJob {
  std::string_view bytes;
  size_t offset = 0;
  PngMessage message;
  Status status;
  DecodedFile out;
  std::vector<png_bytep> rows;
};

void ReadBytes(png_structp png, png_bytep dst, size_t n) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  if (n > job->bytes.size() - job->offset) png_error(png, "file ends early (truncated)");
  std::memcpy(dst, job->bytes.data() + job->offset, n);
  job->offset += n;
}

void TakeExif(png_structp png, png_infop info, PngJob* job) {
  png_uint_32 n = 0;
  png_bytep exif = nullptr;
  if (job->out.exif.empty() && png_get_eXIf_1(png, info, &n, &exif) != 0 && exif != nullptr) {
    job->out.exif.assign(reinterpret_cast<const char*>(exif), n);
  }
}

bool Run(const DecodeLimits& limits, PngJob* job) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &job->message, PngError, PngWarning);
  if (png == nullptr) {
    std::snprintf(job->message.text, sizeof job->message.text, "libpng could not start");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  png_infop end = png_create_info_struct(png);
  if (info == nullptr || end == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, &end);
    return false;
  }
  png_set_read_fn(png, job, ReadBytes);
  // Dimensions are judged by CheckDimensions below, so the message is the same for every format.
  png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_set_chunk_malloc_max(png, kMaxChunkBytes);
  png_read_info(png, info);
  png_uint_32 w = 0, h = 0;
  int depth = 0, color = 0, interlace = 0;
  png_get_IHDR(png, info, &w, &h, &depth, &color, &interlace, nullptr, nullptr);
  job->status = CheckDimensions(w, h, limits);
  if (!job->status.ok()) {
    png_destroy_read_struct(&png, &info, &end);
    return false;
  }
  TakeExif(png, info, job);
  // Pillow's convert("RGB"): palette looked up, transparency and alpha dropped (never
  // composited), gray replicated, low bit depths scaled to 8 bits, 16 bits -> high byte.
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  // (Expanding a palette also turns a tRNS chunk into alpha, stripped here as well.)
  if ((color & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS)) {
    png_set_strip_alpha(png);
  }
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != size_t(w) * 3) png_error(png, "unexpected row layout");
  job->out.image = Image(int(w), int(h));
  job->rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) job->rows[y] = job->out.image.pixel(0, int(y));
  png_read_image(png, job->rows.data());
  png_read_end(png, end);
  TakeExif(png, end, job);
  png_destroy_read_struct(&png, &info, &end);
  return true;
}

}  // namespace

Result<DecodedFile> DecodePng(std::string_view bytes, const DecodeLimits& limits) {
  PngJob job;
  job.bytes = bytes;
  if (!Run(limits, &job)) {
    if (!job.status.ok()) return job.status;
    return Status::Corruption(std::string("corrupt or truncated PNG: ") + job.message.text);
  }
  return std::move(job.out);
}

}  // namespace gleaner::images::internal
