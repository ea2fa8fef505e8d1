// JPEG through libjpeg-turbo. libjpeg reports errors by calling error_exit, which must not
// return: it longjmps back into Run(), whose frame holds no C++ object with a destructor (the
// job's state lives in the caller's frame), so the jump skips nothing that needs cleaning up.
#include <csetjmp>
#include <cstdio>
#include <cstring>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "agent/train/images/codecs.h"

namespace gleaner::images::internal {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg hands &pub back as cinfo->err
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

struct ProgressMonitor {
  jpeg_progress_mgr pub;  // first: libjpeg hands &pub back as cinfo->progress
  int max_scans;
};

struct JpegJob {
  ErrorManager err;
  ProgressMonitor progress;
  jpeg_decompress_struct cinfo;
  Status status;
  DecodedFile out;
};

[[noreturn]] void Fail(j_common_ptr c) {
  auto* e = reinterpret_cast<ErrorManager*>(c->err);
  c->err->format_message(c, e->message);
  longjmp(e->jump, 1);
}

// libjpeg recovers from corrupt entropy data with a warning, as Pillow accepts; a file that
// ends early is an error, as Pillow's "image file is truncated".
void OnMessage(j_common_ptr c, int level) {
  if (level == -1 && c->err->msg_code == JWRN_JPEG_EOF) Fail(c);
}

void OnProgress(j_common_ptr c) {
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  auto* p = reinterpret_cast<ProgressMonitor*>(c->progress);
  if (d->is_decompressor && d->input_scan_number > p->max_scans) {
    auto* e = reinterpret_cast<ErrorManager*>(c->err);
    std::snprintf(e->message, sizeof e->message, "progressive JPEG has more than %d scans",
                  p->max_scans);
    longjmp(e->jump, 1);
  }
}

// Pillow's "CMYK;I" unpacking (inverted, Adobe polarity) followed by its cmyk2rgb().
inline uint8_t CmykToRgb(uint8_t stored_c, uint8_t stored_k) {
  int c = 255 - stored_c, nk = stored_k;  // nk = 255 - K with K = 255 - stored_k
  int t = c * nk + 128;
  int mul = ((t >> 8) + t) >> 8;
  int v = nk - mul;
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

bool Run(std::string_view bytes, const DecodeLimits& limits, JpegJob* job) {
  jpeg_decompress_struct* cinfo = &job->cinfo;
  cinfo->err = jpeg_std_error(&job->err.pub);
  job->err.pub.error_exit = Fail;
  job->err.pub.emit_message = OnMessage;
  job->err.message[0] = '\0';
  if (setjmp(job->err.jump)) {
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  jpeg_create_decompress(cinfo);
  job->progress.pub.progress_monitor = OnProgress;
  job->progress.max_scans = limits.max_jpeg_scans;
  cinfo->progress = &job->progress.pub;
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(cinfo, TRUE);
  job->status = CheckDimensions(cinfo->image_width, cinfo->image_height, limits);
  if (!job->status.ok()) {
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  for (jpeg_saved_marker_ptr m = cinfo->marker_list; m != nullptr; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
        std::memcmp(m->data, "Exif\0\0", 6) == 0) {
      job->out.exif.assign(reinterpret_cast<const char*>(m->data), m->data_length);
      break;
    }
  }
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  const int w = int(cinfo->image_width), h = int(cinfo->image_height);
  job->out.image = Image(w, h);
  jpeg_start_decompress(cinfo);
  if (int(cinfo->output_width) != w || int(cinfo->output_height) != h ||
      cinfo->output_components != (cmyk ? 4 : 3)) {
    std::snprintf(job->err.message, sizeof job->err.message, "unexpected JPEG output layout");
    jpeg_destroy_decompress(cinfo);
    return false;
  }
  JSAMPARRAY cmyk_row = cmyk ? (*cinfo->mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(cinfo),
                                                           JPOOL_IMAGE, JDIMENSION(w) * 4, 1)
                             : nullptr;
  while (cinfo->output_scanline < cinfo->output_height) {
    uint8_t* dst = job->out.image.pixel(0, int(cinfo->output_scanline));
    if (!cmyk) {
      JSAMPROW row = dst;
      jpeg_read_scanlines(cinfo, &row, 1);
      continue;
    }
    jpeg_read_scanlines(cinfo, cmyk_row, 1);
    const uint8_t* src = cmyk_row[0];
    for (int x = 0; x < w; ++x, src += 4, dst += 3) {
      dst[0] = CmykToRgb(src[0], src[3]);
      dst[1] = CmykToRgb(src[1], src[3]);
      dst[2] = CmykToRgb(src[2], src[3]);
    }
  }
  jpeg_finish_decompress(cinfo);
  jpeg_destroy_decompress(cinfo);
  return true;
}

}  // namespace

Result<DecodedFile> DecodeJpeg(std::string_view bytes, const DecodeLimits& limits) {
  JpegJob job{};
  if (!Run(bytes, limits, &job)) {
    if (!job.status.ok()) return job.status;
    return Status::Corruption(std::string("corrupt or truncated JPEG: ") + job.err.message);
  }
  return std::move(job.out);
}

}  // namespace gleaner::images::internal
