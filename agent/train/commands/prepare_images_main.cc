// `gleaner-train prepare-images`: a dataset (archive or directory) through decode, resize,
// crop, flip and scaling, written as tensors, so the image pipeline can be checked from outside.
//
//   gleaner-train prepare-images --dataset PATH --out O.safetensors
//       [--resolution R | --height H --width W] [--center-crop | --random-crop] [--flip P]
//       [--seed S] [--instance-prompt P] [--class-prompt P] [--interpolation bilinear|lanczos]
//       [--max-side N] [--max-pixels N] [--preview DIR]
//
// O: `pixel_values` [N,3,H,W] F32 in [-1,1], `time_ids` [N,6] F32 (original h, w, crop top,
// left, target h, w) and, with class images, `class_pixel_values`, `class_time_ids`; metadata
// `captions`, `files`, `flipped` (JSON arrays, and `class_*` likewise) and the settings.
// --preview writes each prepared image back as DIR/<i>.png (class images: DIR/class_<i>.png).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/commands/commands.h"
#include "agent/train/images/dataset.h"
#include "agent/train/images/png_encode.h"
#include "agent/train/images/transform.h"
#include "shared/json.h"
#include "shared/native/files.h"
#include "shared/safetensors.h"

namespace gleaner::train {
namespace {

using namespace images;

constexpr int kMaxResolution = 8192;

struct Args {
  std::string dataset, out, preview, instance_prompt, class_prompt;
  TransformOptions transform;
  DecodeLimits decode;
};

bool ParseInt(const char* s, int64_t min, int64_t max, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

// Returns "" when the arguments are fine, else what is wrong.
std::string Parse(int argc, char** argv, Args* a) {
  int64_t resolution = 0, height = 0, width = 0;
  for (int i = 0; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--center-crop" || k == "--random-crop") {
      a->transform.center_crop = k == "--center-crop";
      continue;
    }
    if (i + 1 >= argc) return k + " needs a value";
    const char* v = argv[++i];
    int64_t n = 0;
    if (k == "--dataset") {
      a->dataset = v;
    } else if (k == "--out") {
      a->out = v;
    } else if (k == "--preview") {
      a->preview = v;
    } else if (k == "--instance-prompt") {
      a->instance_prompt = v;
    } else if (k == "--class-prompt") {
      a->class_prompt = v;
    } else if (k == "--resolution" || k == "--height" || k == "--width") {
      if (!ParseInt(v, 8, kMaxResolution, &n)) return k + " must be an integer in [8, 8192]";
      (k == "--resolution" ? resolution : k == "--height" ? height : width) = n;
    } else if (k == "--seed") {
      if (!ParseInt(v, 0, INT64_MAX, &n)) return "--seed must be a non-negative integer";
      a->transform.seed = uint64_t(n);
    } else if (k == "--flip") {
      char* end = nullptr;
      double p = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(p >= 0.0 && p <= 1.0)) return "--flip must be in [0, 1]";
      a->transform.flip_probability = p;
    } else if (k == "--interpolation") {
      std::string f = v;
      if (f != "bilinear" && f != "lanczos") return "--interpolation must be bilinear or lanczos";
      a->transform.filter = f == "lanczos" ? ResizeFilter::kLanczos : ResizeFilter::kBilinear;
    } else if (k == "--max-side") {
      if (!ParseInt(v, 1, 1 << 16, &n)) return "--max-side must be an integer in [1, 65536]";
      a->decode.max_side = int(n);
    } else if (k == "--max-pixels") {
      if (!ParseInt(v, 1, int64_t(1) << 32, &n)) return "--max-pixels must be a positive integer";
      a->decode.max_pixels = n;
    } else {
      return "unknown argument " + k;
    }
  }
  if (a->dataset.empty() || a->out.empty()) return "--dataset and --out are required";
  if (resolution != 0 && (height != 0 || width != 0)) {
    return "give --resolution or --height and --width, not both";
  }
  if (resolution == 0 && (height == 0) != (width == 0)) return "--height and --width go together";
  if (resolution == 0 && height == 0) return "--resolution (or --height and --width) is required";
  a->transform.height = int(resolution != 0 ? resolution : height);
  a->transform.width = int(resolution != 0 ? resolution : width);
  return "";
}

struct Prepared {
  std::vector<float> pixels, time_ids;
  Json captions = Json::array(), files = Json::array(), flipped = Json::array();
};

Status PrepareAll(const Dataset& d, const std::vector<DatasetImage>& list, const Args& a,
                  bool is_class, Prepared* out) {
  TransformOptions t = a.transform;
  if (is_class) t.flip_probability = 0.0;  // as diffusers: class images are never flipped
  for (size_t i = 0; i < list.size(); ++i) {
    Result<Image> image = d.Decode(list[i]);
    if (!image.ok()) return image.status();
    PreparedImage p = PrepareImage(*image, t, ImageKey(i, is_class));
    out->pixels.insert(out->pixels.end(), p.pixels.begin(), p.pixels.end());
    for (int64_t v : p.time_ids) out->time_ids.push_back(float(v));
    out->captions.push_back(list[i].caption);
    out->files.push_back(list[i].path);
    out->flipped.push_back(p.flipped);
    if (!a.preview.empty()) {
      Result<std::string> png = EncodePng(TensorToImage(p.pixels.data(), t.height, t.width));
      if (!png.ok()) return png.status();
      std::string name = (is_class ? "class_" : "") + std::to_string(i) + ".png";
      GLEANER_RETURN_IF_ERROR(files::WriteSynced(files::Join(a.preview, name), *png));
    }
  }
  return Status::Ok();
}

std::string_view Bytes(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

Status Run(const Args& a) {
  DatasetOptions options;
  options.instance_prompt = a.instance_prompt;
  options.class_prompt = a.class_prompt;
  options.decode = a.decode;
  Result<Dataset> d = Dataset::Open(a.dataset, options);
  if (!d.ok()) return d.status();
  for (const std::string& note : d->notes()) std::fprintf(stderr, "note: %s\n", note.c_str());
  if (!a.preview.empty()) GLEANER_RETURN_IF_ERROR(files::MakeDirs(a.preview));
  Prepared inst, cls;
  GLEANER_RETURN_IF_ERROR(PrepareAll(*d, d->instance_images(), a, false, &inst));
  GLEANER_RETURN_IF_ERROR(PrepareAll(*d, d->class_images(), a, true, &cls));
  const int64_t h = a.transform.height, w = a.transform.width;
  const int64_t n = int64_t(d->instance_images().size()), m = int64_t(d->class_images().size());
  using safetensors::DType;
  std::map<std::string, safetensors::TensorToWrite> tensors;
  tensors["pixel_values"] = {DType::kF32, {n, 3, h, w}, Bytes(inst.pixels)};
  tensors["time_ids"] = {DType::kF32, {n, 6}, Bytes(inst.time_ids)};
  std::map<std::string, std::string> meta = {
      {"format", "gleaner-images"},
      {"format_version", "1"},
      {"captions", DumpJson(inst.captions)},
      {"files", DumpJson(inst.files)},
      {"flipped", DumpJson(inst.flipped)},
      {"height", std::to_string(h)},
      {"width", std::to_string(w)},
      {"center_crop", a.transform.center_crop ? "true" : "false"},
      {"flip_probability", DumpJson(a.transform.flip_probability)},
      {"seed", std::to_string(a.transform.seed)},
      {"interpolation", a.transform.filter == ResizeFilter::kLanczos ? "lanczos" : "bilinear"},
  };
  if (m > 0) {
    tensors["class_pixel_values"] = {DType::kF32, {m, 3, h, w}, Bytes(cls.pixels)};
    tensors["class_time_ids"] = {DType::kF32, {m, 6}, Bytes(cls.time_ids)};
    meta["class_captions"] = DumpJson(cls.captions);
    meta["class_files"] = DumpJson(cls.files);
  }
  Result<std::string> bytes = safetensors::Serialize(tensors, meta);
  if (!bytes.ok()) return bytes.status();
  GLEANER_RETURN_IF_ERROR(files::WriteDurable(a.out, *bytes));
  std::printf("prepared %lld instance and %lld class images (%lldx%lld) from %s into %s\n",
              static_cast<long long>(n), static_cast<long long>(m), static_cast<long long>(h),
              static_cast<long long>(w), d->name().c_str(), a.out.c_str());
  return Status::Ok();
}

}  // namespace

int PrepareImagesMain(int argc, char** argv) {
  Args a;
  std::string problem = Parse(argc, argv, &a);
  if (!problem.empty()) {
    std::fprintf(
        stderr,
        "gleaner-train prepare-images: %s\n"
        "usage: gleaner-train prepare-images --dataset ARCHIVE_OR_DIR --out O.safetensors\n"
        "  (--resolution R | --height H --width W) [--center-crop | --random-crop]\n"
        "  [--flip P] [--seed S] [--instance-prompt P] [--class-prompt P]\n"
        "  [--interpolation bilinear|lanczos] [--max-side N] [--max-pixels N]\n"
        "  [--preview DIR]\n",
        problem.c_str());
    return kExitUsage;
  }
  Status s = Run(a);
  if (!s.ok()) {
    std::fprintf(stderr, "gleaner-train prepare-images: %s\n", s.message().c_str());
    return kExitFailed;
  }
  return kExitDone;
}

}  // namespace gleaner::train
