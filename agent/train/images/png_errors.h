// Internal to agent/train/images: libpng's error callbacks, shared by the PNG decoder and
// encoder. The error pointer given to png_create_*_struct is a PngMessage; on an error its text
// is kept and libpng longjmps to png_jmpbuf (set by the caller, whose frame must hold no C++
// object with a destructor). Warnings are ignored.
#pragma once

#include <png.h>

#include <cstdio>

namespace gleaner::images::internal {

struct PngMessage {
  char text[256] = {};
};

inline void PngError(png_structp png, png_const_charp msg) {
  auto* m = static_cast<PngMessage*>(png_get_error_ptr(png));
  std::snprintf(m->text, sizeof m->text, "%s", msg);
  png_longjmp(png, 1);
}

inline void PngWarning(png_structp, png_const_charp) {}

}  // namespace gleaner::images::internal
