// EXIF: the orientation tag of a photo, read by a small strict TIFF parser.
//
// Input is an EXIF block as files carry it: the TIFF structure ("II*\0" little-endian or
// "MM\0*" big-endian header, then IFD0), optionally prefixed with "Exif\0\0" as in a JPEG APP1
// segment (some PNG and WebP writers keep that prefix too). Only IFD0 is read: its entry table
// must lie inside the block, the Orientation tag (0x0112) must appear at most once and be one
// SHORT (or LONG) value. Anything else is a kCorruption Status naming the problem; nothing
// outside the block is ever read. Portable, no allocation, thread-safe.
#pragma once

#include <string_view>

#include "shared/status.h"

namespace gleaner::images {

// The Orientation value as stored (1 when the tag is absent). Values outside 1..8 are returned
// as found; the caller decides (DecodeImage treats them as 1, as Pillow does).
Result<int> ExifOrientation(std::string_view exif);

}  // namespace gleaner::images
