// A training dataset of photos and captions, from an archive (zip, tar, tar.gz) or a directory.
//
// Layout (docs/training.md, "Images and datasets"):
//   - Root: when every file lies under one top-level folder other than `class/` (what zipping a
//     folder gives), that folder is the root; otherwise the archive itself is.
//   - Images: every file whose first bytes are JPEG, PNG or WebP, in any folder, whatever its
//     name. Images under `class/` (at the root) are class images for prior preservation; all
//     others are instance images. Each list is ordered by path; an image's position is its key
//     for the seeded crop and flip (transform.h).
//   - Captions: `<stem>.txt` beside the image (`dog 1.jpg` -> `dog 1.txt`), UTF-8 (a BOM is
//     dropped), surrounding whitespace trimmed, at most 64 KiB. Without one, or when it is
//     empty, an instance image takes `instance_prompt` and a class image `class_prompt`.
//   - Refused, with a message naming the dataset and the file: a file with an image extension
//     (jpg, jpeg, png, webp, gif, bmp, tif, tiff, heic, heif, avif, jxl) or an image signature
//     that is not a JPEG, PNG or WebP; a caption that is not UTF-8; an image with no caption
//     and no prompt to fall back on; a dataset without instance images. Other files (and
//     captions without an image) are skipped with a note.
// Decode() is where corrupt, truncated or oversized images are found (messages name the file).
// Open() reads only file heads and captions. A Dataset is immutable after Open; Decode() may be
// called from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/train/images/archive.h"
#include "agent/train/images/decode.h"

namespace gleaner::images {

struct DatasetOptions {
  std::string instance_prompt;  // caption of instance images that have no .txt
  std::string class_prompt;     // caption of class images that have no .txt
  std::string name;             // how messages name the dataset; default: the path's last part
  ArchiveLimits archive;        // also applied to a directory
  DecodeLimits decode;
};

struct DatasetImage {
  std::string path;  // relative to the dataset's root, e.g. "dog1.jpg", "class/0001.png"
  std::string caption;
  bool caption_from_file = false;
  size_t file = 0;  // index in the underlying FileSet
};

class Dataset {
 public:
  Dataset() = default;
  // `path` is an archive file or a directory.
  static Result<Dataset> Open(const std::string& path, const DatasetOptions& options);
  // Same rules over files already opened (e.g. an archive held in memory).
  static Result<Dataset> FromFiles(std::unique_ptr<FileSet> files, const DatasetOptions& options);

  const std::vector<DatasetImage>& instance_images() const { return instance_; }
  const std::vector<DatasetImage>& class_images() const { return class_; }
  // Skipped files and entries, one line each.
  const std::vector<std::string>& notes() const { return notes_; }
  const std::string& name() const { return name_; }

  // Decodes one image (oriented RGB); errors read "<dataset>: <path>: <reason>".
  Result<Image> Decode(const DatasetImage& image) const;

 private:
  std::string name_;
  DecodeLimits decode_limits_;
  std::shared_ptr<const FileSet> files_;
  std::vector<DatasetImage> instance_, class_;
  std::vector<std::string> notes_;
};

}  // namespace gleaner::images
