// libpng errors longjmp back into Run(), whose frame holds no C++ object with a destructor.
#include "agent/train/images/png_encode.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <vector>

#include "agent/train/images/png_errors.h"

namespace gleaner::images {
namespace {

struct EncodeJob {
  std::string out;
  std::vector<png_bytep> rows;
  internal::PngMessage message;
};

void WriteBytes(png_structp png, png_bytep data, size_t n) {
  static_cast<EncodeJob*>(png_get_io_ptr(png))->out.append(reinterpret_cast<char*>(data), n);
}

void Flush(png_structp) {}

bool Run(const Image& image, EncodeJob* job) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &job->message,
                                            internal::PngError, internal::PngWarning);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, job, WriteBytes, Flush);
  png_set_compression_level(png, 6);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_ALL_FILTERS);
  png_set_IHDR(png, info, png_uint_32(image.width), png_uint_32(image.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_BASE,
               PNG_FILTER_TYPE_BASE);
  png_write_info(png, info);
  png_write_image(png, job->rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

Result<std::string> EncodePng(const Image& image) {
  if (image.width < 1 || image.height < 1 ||
      image.rgb.size() != size_t(image.width) * size_t(image.height) * 3) {
    return Status::Invalid("PNG encode: image size and pixel buffer disagree");
  }
  EncodeJob job;
  job.rows.resize(size_t(image.height));
  for (int y = 0; y < image.height; ++y) {
    job.rows[size_t(y)] = const_cast<png_bytep>(image.pixel(0, y));
  }
  if (!Run(image, &job)) return Status::Internal(std::string("PNG encode: ") + job.message.text);
  return std::move(job.out);
}

}  // namespace gleaner::images
