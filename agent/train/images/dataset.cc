#include "agent/train/images/dataset.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "shared/native/files.h"

namespace gleaner::images {
namespace {

constexpr uint64_t kSniffBytes = 16;
constexpr uint64_t kMaxCaptionBytes = 64 * 1024;
constexpr std::string_view kClassDir = "class/";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(uint8_t(c)));
  return out;
}

// Extension after the last '.' of the last path component, lower-cased ("" if none).
std::string Extension(std::string_view path) {
  size_t slash = path.rfind('/'), dot = path.rfind('.');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) return "";
  return Lower(path.substr(dot + 1));
}

// "a/dog 1.jpg" -> "a/dog 1.txt"; "a/photo" -> "a/photo.txt".
std::string CaptionPathFor(std::string_view path) {
  size_t slash = path.rfind('/'), dot = path.rfind('.');
  bool has_ext = dot != std::string_view::npos && (slash == std::string_view::npos || dot > slash);
  return std::string(has_ext ? path.substr(0, dot) : path) + ".txt";
}

bool HasImageExtension(std::string_view path) {
  static const char* const kExts[] = {"jpg", "jpeg", "png",  "webp", "gif",  "bmp",
                                      "tif", "tiff", "heic", "heif", "avif", "jxl"};
  std::string ext = Extension(path);
  return std::any_of(std::begin(kExts), std::end(kExts), [&](const char* e) { return ext == e; });
}

bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    uint8_t c = uint8_t(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      uint8_t d = uint8_t(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  const char* ws = " \t\r\n\v\f";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The folder every file lies under, with its slash ("photos/"), or "" when there is none.
std::string CommonRoot(const std::vector<ArchiveFile>& files) {
  if (files.empty()) return "";
  size_t slash = files[0].path.find('/');
  if (slash == std::string::npos) return "";
  std::string root = files[0].path.substr(0, slash + 1);
  if (root == kClassDir) return "";
  for (const ArchiveFile& f : files) {
    if (f.path.compare(0, root.size(), root) != 0) return "";
  }
  return root;
}

}  // namespace

Result<Dataset> Dataset::Open(const std::string& path, const DatasetOptions& options) {
  DatasetOptions o = options;
  if (o.name.empty()) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    o.name = p.substr(p.find_last_of('/') == std::string::npos ? 0 : p.find_last_of('/') + 1);
  }
  Result<std::unique_ptr<FileSet>> files =
      files::IsDir(path) ? OpenDirectory(path, o.archive) : OpenArchiveFile(path, o.archive);
  if (!files.ok()) {
    return Status(files.status().code(), o.name + ": " + files.status().message());
  }
  return FromFiles(std::move(*files), o);
}

Result<Dataset> Dataset::FromFiles(std::unique_ptr<FileSet> set, const DatasetOptions& o) {
  Dataset d;
  d.name_ = o.name.empty() ? "dataset" : o.name;
  d.decode_limits_ = o.decode;
  d.notes_ = set->notes();
  auto fail = [&](const std::string& path, const std::string& what) {
    return Status::Invalid(d.name_ + ": " + path + ": " + what);
  };
  const std::vector<ArchiveFile>& files = set->files();
  const std::string root = CommonRoot(files);
  std::map<std::string, size_t> captions;  // relative path -> file index
  std::vector<std::pair<std::string, size_t>> images;
  for (size_t i = 0; i < files.size(); ++i) {
    std::string rel = files[i].path.substr(root.size());
    if (rel.size() > 4 && rel.compare(rel.size() - 4, 4, ".txt") == 0) {
      captions.emplace(rel, i);
      continue;
    }
    Result<std::string> head = set->Read(i, kSniffBytes);
    if (!head.ok()) return fail(rel, head.status().message());
    ImageFormat format = SniffImageFormat(*head);
    if (IsDecodable(format)) {
      images.emplace_back(std::move(rel), i);
    } else if (format != ImageFormat::kUnknown) {
      return fail(rel, std::string(ImageFormatName(format)) +
                           " images are not supported (JPEG, PNG or WebP)");
    } else if (HasImageExtension(rel)) {
      return fail(rel, "not a JPEG, PNG or WebP image (its first bytes are not an image's)");
    } else {
      d.notes_.push_back(rel + ": not an image or a caption, skipped");
    }
  }
  const bool any_instance = std::any_of(images.begin(), images.end(), [](const auto& im) {
    return im.first.compare(0, kClassDir.size(), kClassDir) != 0;
  });
  if (!any_instance) {
    return Status::Invalid(d.name_ + ": no images (JPEG, PNG or WebP) outside class/" +
                           (images.empty() ? "" : " (only class images)"));
  }
  std::set<std::string> used_captions;
  for (auto& [rel, index] : images) {
    const bool is_class = rel.compare(0, kClassDir.size(), kClassDir) == 0;
    DatasetImage image;
    image.path = rel;
    image.file = index;
    auto caption = captions.find(CaptionPathFor(rel));
    if (caption != captions.end()) {
      used_captions.insert(caption->first);
      Result<std::string> text = set->Read(caption->second, kMaxCaptionBytes + 1);
      if (!text.ok()) return fail(caption->first, text.status().message());
      if (text->size() > kMaxCaptionBytes) return fail(caption->first, "caption over 64 KiB");
      std::string_view t = *text;
      if (t.substr(0, 3) == "\xEF\xBB\xBF") t.remove_prefix(3);
      if (!ValidUtf8(t)) return fail(caption->first, "caption is not UTF-8 text");
      image.caption = std::string(Trim(t));
      image.caption_from_file = !image.caption.empty();
    }
    if (image.caption.empty()) image.caption = is_class ? o.class_prompt : o.instance_prompt;
    if (image.caption.empty()) {
      return fail(rel, std::string("no caption (") + CaptionPathFor(rel) + ") and no " +
                           (is_class ? "class_prompt" : "instance_prompt") + " to fall back on");
    }
    (is_class ? d.class_ : d.instance_).push_back(std::move(image));
  }
  for (const auto& [rel, index] : captions) {
    if (!used_captions.count(rel)) d.notes_.push_back(rel + ": caption without an image, skipped");
  }
  d.files_ = std::move(set);
  return d;
}

Result<Image> Dataset::Decode(const DatasetImage& image) const {
  Result<std::string> bytes = files_->Read(image.file);
  if (!bytes.ok()) {
    return Status(bytes.status().code(),
                  name_ + ": " + image.path + ": " + bytes.status().message());
  }
  Result<Image> decoded = DecodeImage(*bytes, decode_limits_);
  if (!decoded.ok()) {
    return Status(decoded.status().code(),
                  name_ + ": " + image.path + ": " + decoded.status().message());
  }
  return decoded;
}

}  // namespace gleaner::images
