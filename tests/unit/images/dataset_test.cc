// Datasets: layout, captions, and every bad input failing with a message that names the file;
// and `gleaner-train prepare-images` end to end.
#include "agent/train/images/dataset.h"

#include <png.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "shared/native/files.h"
#include "shared/json.h"
#include "shared/safetensors.h"
#include "tests/unit/images/writers.h"

using namespace gleaner;
using namespace gleaner::images;
using namespace gleaner::images::testing;

namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gleaner-dataset-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() { (void)files::RemoveTree(path_); }
  std::string Write(const std::string& name, const std::string& bytes) const {
    std::string p = path_ + "/" + name;
    REQUIRE(files::MakeDirs(files::Dirname(p)).ok());
    REQUIRE(files::WriteSynced(p, bytes).ok());
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Jpeg(int w = 40, int h = 30, int salt = 0) {
  return WriteJpeg(Pattern(w, h, salt));
}
std::string Png(int w = 40, int h = 30) {
  Image im = Pattern(w, h, 9);
  return WritePng(PngSpec{w, h, PNG_COLOR_TYPE_RGB, 8, false, im.rgb});
}

DatasetOptions Prompts(const std::string& instance, const std::string& cls = "") {
  DatasetOptions o;
  o.instance_prompt = instance;
  o.class_prompt = cls;
  return o;
}

// The message of the error that opening (or, if it opens, decoding every image of) a dataset
// made of `entries` gives.
std::string FirstError(const std::vector<ZipEntry>& entries, const DatasetOptions& o,
                       bool tar = false) {
  TempDir dir;
  std::string path;
  if (tar) {
    std::vector<TarEntry> t;
    for (const ZipEntry& e : entries) t.push_back({e.name, e.data});
    path = dir.Write("ds.tar", WriteTar(t));
  } else {
    path = dir.Write("ds.zip", WriteZip(entries));
  }
  Result<Dataset> d = Dataset::Open(path, o);
  if (!d.ok()) return d.status().message();
  for (const DatasetImage& im : d->instance_images()) {
    Result<Image> r = d->Decode(im);
    if (!r.ok()) return r.status().message();
  }
  FAIL("no error");
  return "";
}

int Run(const std::string& args, std::string* err) {
  TempDir d;
  std::string cmd = std::string(GLEANER_BIN_DIR) + "/gleaner-train prepare-images " + args +
                    " >/dev/null 2>" + d.path() + "/err";
  int rc = std::system(cmd.c_str());
  Result<std::string> text = files::ReadAll(d.path() + "/err");
  *err = text.ok() ? *text : "";
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST_CASE("dataset layout: root folder, images by signature, captions, class folder, notes",
          "[images][dataset]") {
  TempDir dir;
  std::string zip = dir.Write(
      "photos.zip", WriteZip({{"photos/dog1.jpg", Jpeg()},
                              {"photos/dog1.txt", "\xEF\xBB\xBF  a photo of sks dog on grass \n"},
                              {"photos/dog2.png", Png()},
                              {"photos/dog3.webp", WriteWebp(Pattern(20, 20), true)},
                              {"photos/dog3.txt", " \n\t "},
                              {"photos/IMG_0004", Jpeg(30, 40)},
                              {"photos/sub/dog5.JPG", Jpeg()},
                              {"photos/class/c1.webp", WriteWebp(Pattern(20, 20), false)},
                              {"photos/class/c1.txt", "a photo of a dog, outdoors"},
                              {"photos/class/c2.jpg", Jpeg()},
                              {"photos/notes.md", "# my dog"},
                              {"photos/orphan.txt", "nobody's caption"},
                              {"__MACOSX/photos/._dog1.jpg", "junk"}}));
  Result<Dataset> d = Dataset::Open(zip, Prompts("a photo of sks dog", "a photo of a dog"));
  INFO(d.status().ToString());
  REQUIRE(d.ok());
  CHECK(d->name() == "photos.zip");
  const auto& inst = d->instance_images();
  REQUIRE(inst.size() == 5);
  CHECK(inst[0].path == "IMG_0004");
  CHECK(inst[0].caption == "a photo of sks dog");
  CHECK(inst[1].path == "dog1.jpg");
  CHECK(inst[1].caption == "a photo of sks dog on grass");
  CHECK(inst[1].caption_from_file);
  CHECK(inst[2].path == "dog2.png");
  CHECK(inst[3].path == "dog3.webp");
  CHECK(inst[3].caption == "a photo of sks dog");  // empty caption file falls back
  CHECK_FALSE(inst[3].caption_from_file);
  CHECK(inst[4].path == "sub/dog5.JPG");
  const auto& cls = d->class_images();
  REQUIRE(cls.size() == 2);
  CHECK(cls[0].path == "class/c1.webp");
  CHECK(cls[0].caption == "a photo of a dog, outdoors");
  CHECK(cls[1].caption == "a photo of a dog");
  CHECK(d->notes() == std::vector<std::string>{"notes.md: not an image or a caption, skipped",
                                               "orphan.txt: caption without an image, skipped"});
  for (const auto& im : inst) CHECK(d->Decode(im).ok());
  Result<Image> portrait = d->Decode(inst[0]);
  REQUIRE(portrait.ok());
  CHECK(portrait->width == 30);
  CHECK(portrait->height == 40);
}

TEST_CASE("a directory dataset reads the same as its zip", "[images][dataset]") {
  TempDir dir;
  dir.Write("set/a.jpg", Jpeg());
  dir.Write("set/a.txt", "caption a");
  dir.Write("set/class/b.png", Png());
  Result<Dataset> d = Dataset::Open(dir.path() + "/set/", Prompts("", "cls"));
  REQUIRE(d.ok());
  CHECK(d->name() == "set");
  REQUIRE(d->instance_images().size() == 1);
  CHECK(d->instance_images()[0].caption == "caption a");
  REQUIRE(d->class_images().size() == 1);
  CHECK(d->class_images()[0].path == "class/b.png");
}

TEST_CASE("each bad input fails with a message naming the dataset and the file",
          "[images][dataset]") {
  const DatasetOptions o = Prompts("a photo of sks dog");
  std::string jpeg = Jpeg(), png = Png(), webp = WriteWebp(Pattern(30, 30), false);
  struct Case {
    const char* what;
    std::vector<ZipEntry> entries;
    std::string words;
  } cases[] = {
      {"truncated JPEG",
       {{"ok.png", png}, {"bad.jpg", jpeg.substr(0, jpeg.size() / 2)}},
       "ds.zip: bad.jpg: corrupt or truncated JPEG"},
      {"truncated PNG",
       {{"bad.png", png.substr(0, png.size() - 30)}},
       "ds.zip: bad.png: corrupt or truncated PNG"},
      {"truncated WebP",
       {{"bad.webp", webp.substr(0, webp.size() / 2)}},
       "ds.zip: bad.webp: truncated WebP"},
      {"garbage with an image name",
       {{"ok.jpg", jpeg}, {"garbage.jpg", "not really a jpeg"}},
       "ds.zip: garbage.jpg: not a JPEG, PNG or WebP image"},
      {"unsupported format",
       {{"ok.jpg", jpeg}, {"anim.gif", "GIF89a\x01\x00\x01\x00"}},
       "ds.zip: anim.gif: GIF images are not supported"},
      {"header bomb",
       {{"bomb.png", PatchedPngSize(png, 100000, 100000)}},
       "ds.zip: bomb.png: image is 100000x100000, over the limit"},
      {"zip bomb",
       {{"zeros.jpg", std::string(8 << 20, '\0'), true}},
       "ds.zip: zip entry \"zeros.jpg\": compressed"},
      {"path traversal",
       {{"ok.jpg", jpeg}, {"../../evil.jpg", jpeg}},
       "ds.zip: zip entry \"../../evil.jpg\": path leaves the archive"},
      {"empty archive", {}, "ds.zip: no images (JPEG, PNG or WebP)"},
      {"only class images", {{"class/c.jpg", jpeg}}, "ds.zip: no images"},
      {"bad caption encoding",
       {{"a.jpg", jpeg}, {"a.txt", "caf\xE9"}},
       "ds.zip: a.txt: caption is not UTF-8 text"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    std::string message = FirstError(c.entries, o);
    INFO(message);
    CHECK(message.find(c.words) != std::string::npos);
  }
  std::string tar_traversal = FirstError({{"../evil.jpg", jpeg}}, o, true);
  CHECK(tar_traversal.find("ds.tar: tar entry \"../evil.jpg\": path leaves the archive") !=
        std::string::npos);
  CHECK(FirstError({}, o, true).find("ds.tar: no images") != std::string::npos);
  std::string no_prompt = FirstError({{"dog.jpg", jpeg}}, DatasetOptions());
  CHECK(no_prompt ==
        "ds.zip: dog.jpg: no caption (dog.txt) and no instance_prompt to fall back on");
  std::string no_class_prompt = FirstError({{"a.jpg", jpeg}, {"class/c.jpg", jpeg}}, o);
  CHECK(no_class_prompt.find("ds.zip: class/c.jpg: no caption (class/c.txt) and no class_prompt") !=
        std::string::npos);
}

TEST_CASE("prepare-images writes pixel_values, time_ids and captions", "[images][dataset][cli]") {
  TempDir dir;
  std::string zip = dir.Write("ds.zip", WriteZip({{"a.jpg", Jpeg(60, 40)},
                                                  {"a.txt", "caption of a"},
                                                  {"b.png", Png(30, 50)},
                                                  {"class/c.jpg", Jpeg(32, 32, 3)}}));
  const std::string out = dir.path() + "/out.safetensors";
  const std::string args = "--dataset " + zip + " --resolution 16 --center-crop --flip 0.5 " +
                           "--seed 7 --instance-prompt 'sks dog' --class-prompt dog --preview " +
                           dir.path() + "/preview --out " + out;
  std::string err;
  REQUIRE(Run(args, &err) == 0);
  Result<std::string> bytes = files::ReadAll(out);
  REQUIRE(bytes.ok());
  Result<safetensors::ParsedFile> f = safetensors::Parse(*bytes);
  REQUIRE(f.ok());
  CHECK(f->tensors.at("pixel_values").shape == std::vector<int64_t>{2, 3, 16, 16});
  CHECK(f->tensors.at("time_ids").shape == std::vector<int64_t>{2, 6});
  CHECK(f->tensors.at("class_pixel_values").shape == std::vector<int64_t>{1, 3, 16, 16});
  CHECK(f->metadata.at("captions") == R"(["caption of a","sks dog"])");
  CHECK(f->metadata.at("class_captions") == R"(["dog"])");
  CHECK(f->metadata.at("files") == R"(["a.jpg","b.png"])");
  std::vector<float> t(12);
  std::memcpy(t.data(), f->tensors.at("time_ids").data.data(), 48);
  // a.jpg 60x40 -> 24x16, centre left 8 / 2 = 4; b.png 30x50 -> 16x26, top 10 / 2 = 5.
  CHECK(t == std::vector<float>{40, 60, 0, 4, 16, 16, 50, 30, 5, 0, 16, 16});
  for (const char* png : {"0.png", "1.png", "class_0.png"}) {
    CHECK(files::Exists(dir.path() + "/preview/" + png));
  }
  // Same arguments, same bytes.
  REQUIRE(Run(args, &err) == 0);
  CHECK(*files::ReadAll(out) == *bytes);
}

TEST_CASE("prepare-images exits 2 naming the file, 64 on usage errors", "[images][dataset][cli]") {
  TempDir dir;
  std::string jpeg = Jpeg();
  std::string zip =
      dir.Write("ds.zip", WriteZip({{"ok.jpg", jpeg}, {"bad.jpg", jpeg.substr(0, 300)}}));
  std::string err;
  CHECK(Run("--dataset " + zip + " --resolution 16 --instance-prompt x --out " + dir.path() +
                "/o.safetensors",
            &err) == 2);
  CHECK(err.find("gleaner-train prepare-images: ds.zip: bad.jpg: corrupt or truncated JPEG") !=
        std::string::npos);
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK_FALSE(files::Exists(dir.path() + "/o.safetensors"));
  CHECK(Run("--dataset " + zip + " --out x", &err) == 64);
  CHECK(Run("--dataset " + zip + " --resolution 0 --out x", &err) == 64);
  CHECK(Run("--bogus", &err) == 64);
}
