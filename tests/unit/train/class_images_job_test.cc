// Prior-preservation class images generated on the node (lora-sd num_class_images), through the
// real gleaner-train binary on a tiny generated diffusers model and a photo archive: only the
// missing ones are rendered, with the same bytes on a re-run; a SIGTERM while rendering keeps the
// finished images and a restart renders only the rest, ending equal to an uninterrupted run; the
// cache is reused (no file rewritten), a damaged cached image is rendered again, and with
// train_text_encoder the generated images are captioned too.
#include <signal.h>
#include <sys/stat.h>

#include "agent/protocol/trainer_protocol.h"
#include "agent/train/images/decode.h"
#include "agent/train/images/png_encode.h"
#include "agent/train/models/loader/tiny_diffusers_model.h"
#include "shared/native/files.h"
#include "tests/integration/harness.h"
#include "tests/unit/images/writers.h"
#include "train_test_util.h"

namespace h = gleaner::testing;
namespace iw = gleaner::images::testing;

namespace gleaner::train::testing {
namespace {

constexpr int kNative = 16;  // the tiny model's size: UNet sample_size 8 x the VAE's factor 2

std::string Png(int w, int h, int salt) {
  Result<std::string> png = images::EncodePng(iw::Pattern(w, h, salt));
  REQUIRE(png.ok());
  return *png;
}

// A tiny diffusers model and a photo archive with two instance images and `supplied` class
// images; the job asks for `num` class images of "a dog".
struct ClassJob {
  TempDir tmp;
  std::string spec_path = tmp / "SPEC.json";
  int runs = 0;

  ClassJob(int supplied, int64_t num, const Json& more_params = Json::object()) {
    REQUIRE(models::WriteTinyDiffusersModel(tmp / "model", false, 7).ok());
    std::vector<iw::ZipEntry> entries = {{"dog1.png", Png(16, 20, 1)},
                                         {"dog2.png", Png(20, 16, 2)}};
    for (int i = 0; i < supplied; ++i) {
      entries.push_back({"class/" + std::to_string(i) + ".png", Png(18, 18, 10 + i)});
    }
    REQUIRE(WriteFileDurable(tmp / "photos.zip", iw::WriteZip(entries)).ok());
    Json params = {{"steps", 2},
                   {"checkpoint_every", 2},
                   {"seed", 9},
                   {"instance_prompt", "a photo of sks dog"},
                   {"class_prompt", "a dog"},
                   {"num_class_images", num}};
    params.update(more_params);
    Json spec = {{"job_id", "job-c"},
                 {"kind", "lora-sd"},
                 {"params", params},
                 {"model", {{"format", "diffusers"}}},
                 {"inputs", {{"model", tmp / "model"}, {"dataset", tmp / "photos.zip"}}}};
    REQUIRE(WriteFileDurable(spec_path, spec.dump()).ok());
  }

  struct Run {
    int code = -1;
    std::string out, err;  // the progress lines, the diagnostics
  };

  // `gleaner-train run` in `work` (with `cache_dir` when given); when `stop_when` is given, a
  // SIGTERM as soon as it holds.
  Run Train(const std::string& work, const std::string& cache_dir = "",
            const std::function<bool()>& stop_when = nullptr) {
    h::ProcessSpec spec;
    spec.binary = "gleaner-train";
    spec.args = {"run", "--spec", spec_path, "--work-dir", work};
    if (!cache_dir.empty()) {
      spec.args.push_back("--cache-dir");
      spec.args.push_back(cache_dir);
    }
    const std::string n = std::to_string(++runs);
    spec.stdout_path = tmp / ("run" + n + ".out");
    spec.stderr_path = tmp / ("run" + n + ".err");
    h::Process p(spec);
    std::string error;
    if (!p.Start(&error)) FAIL(error);
    if (stop_when) {
      REQUIRE(h::WaitUntil([&] { return stop_when() || !p.Running(); }, h::Millis(60000),
                           h::Millis(1)));
      p.Signal(SIGTERM);
    }
    std::optional<h::ExitStatus> st = p.Wait(h::Millis(120000));
    if (!st) st = p.Kill();
    return {st->exited ? st->code : -st->signal, p.Stdout(), p.Stderr()};
  }
};

// The class image cache directory under `cache` ("" when there is none).
std::string ClassDir(const std::string& cache) {
  Result<std::vector<std::string>> names = files::ListDir(cache);
  if (!names.ok()) return "";
  for (const std::string& n : *names) {
    if (n.rfind("class-images-", 0) == 0) return cache + "/" + n;
  }
  return "";
}

// The files of a class image directory by name.
std::map<std::string, std::string> ClassPngs(const std::string& cache) {
  std::map<std::string, std::string> out;
  const std::string dir = ClassDir(cache);
  if (dir.empty()) return out;
  Result<std::vector<std::string>> names = files::ListDir(dir);
  REQUIRE(names.ok());
  for (const std::string& n : *names) out[n] = Bytes(dir + "/" + n);
  return out;
}

// A file's identity: a rewrite (temp + rename) gives it another inode and mtime.
std::pair<ino_t, int64_t> FileId(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return {0, 0};
  return {st.st_ino, int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::map<std::string, std::pair<ino_t, int64_t>> FileIds(const std::string& cache) {
  std::map<std::string, std::pair<ino_t, int64_t>> out;
  const std::string dir = ClassDir(cache);
  for (const auto& kv : ClassPngs(cache)) out[kv.first] = FileId(dir + "/" + kv.first);
  return out;
}

// Rows of class examples in a work dir's encoded dataset.
int64_t EncodedClassImages(const std::string& cache) {
  TensorMap t = MustLoad(cache + "/encoded-dataset.safetensors");
  return t.count("class_latents") ? t.at("class_latents").size(0) : 0;
}

std::string Event(int64_t count) {
  return "gleaner class_images count=" + std::to_string(count) + " seconds=";
}

}  // namespace

TEST_CASE("class images: none supplied, all generated with the same bytes on a re-run",
          "[lora_sd][class_images]") {
  ClassJob job(0, 3);
  const std::string a = job.tmp / "a", b = job.tmp / "b";
  ClassJob::Run first = job.Train(a);
  INFO(first.err);
  REQUIRE(first.code == kExitDone);
  std::map<std::string, std::string> pngs = ClassPngs(a);
  REQUIRE(pngs.size() == 3);
  for (const char* name : {"0000.png", "0001.png", "0002.png"}) {
    INFO(name);
    REQUIRE(pngs.count(name));
    Result<images::Image> img = images::DecodeImage(pngs[name]);
    REQUIRE(img.ok());
    CHECK(img->width == kNative);
    CHECK(img->height == kNative);
  }
  CHECK(pngs["0000.png"] != pngs["0001.png"]);  // a seed per image
  CHECK(first.out.find(Event(3)) != std::string::npos);
  CHECK(first.out.find(Event(3)) < first.out.find("gleaner progress"));  // before training
  CHECK(EncodedClassImages(a) == 3);                                     // they join the dataset

  ClassJob::Run again = job.Train(b);
  INFO(again.err);
  REQUIRE(again.code == kExitDone);
  CHECK(ClassPngs(b) == pngs);
  CHECK(Bytes(b + "/output/lora.safetensors") == Bytes(a + "/output/lora.safetensors"));
}

TEST_CASE("class images: only the missing ones are generated", "[lora_sd][class_images]") {
  ClassJob some(2, 5);
  const std::string work = some.tmp / "w";
  ClassJob::Run r = some.Train(work);
  INFO(r.err);
  REQUIRE(r.code == kExitDone);
  std::map<std::string, std::string> pngs = ClassPngs(work);
  CHECK(pngs.size() == 3);
  CHECK(pngs.count("0002.png") == 1);
  CHECK(r.out.find(Event(3)) != std::string::npos);
  CHECK(EncodedClassImages(work) == 5);  // 2 supplied + 3 generated

  ClassJob enough(2, 2);
  const std::string w2 = enough.tmp / "w";
  ClassJob::Run none = enough.Train(w2);
  INFO(none.err);
  REQUIRE(none.code == kExitDone);
  CHECK(ClassDir(w2).empty());
  CHECK(none.out.find("gleaner class_images") == std::string::npos);
  CHECK(EncodedClassImages(w2) == 2);
}

TEST_CASE("class images: a SIGTERM while generating keeps what was rendered, a restart ends equal",
          "[lora_sd][class_images][signal]") {
  constexpr int kCount = 5;  // each takes a good part of a second: the signal lands among them
  ClassJob job(0, kCount);
  const std::string whole = job.tmp / "whole", cut = job.tmp / "cut";
  ClassJob::Run ref = job.Train(whole);
  INFO(ref.err);
  REQUIRE(ref.code == kExitDone);
  const std::map<std::string, std::string> want = ClassPngs(whole);
  REQUIRE(want.size() == size_t(kCount));

  ClassJob::Run stopped = job.Train(cut, "", [&] {
    const std::string dir = ClassDir(cut);
    return !dir.empty() && files::Exists(dir + "/0000.png");
  });
  INFO(stopped.err);
  REQUIRE(stopped.code == kExitInterrupted);
  CHECK(stopped.out.find("gleaner progress") == std::string::npos);  // no step trained
  std::map<std::string, std::string> kept = ClassPngs(cut);
  REQUIRE(kept.size() >= 1);
  REQUIRE(kept.size() < size_t(kCount));
  for (const auto& [name, bytes] : kept) {
    INFO(name);
    CHECK(name.find(".tmp") == std::string::npos);  // every file there is a finished image
    REQUIRE(want.count(name));
    CHECK((bytes == want.at(name)));
  }
  const auto before = FileIds(cut);

  ClassJob::Run restarted = job.Train(cut);
  INFO(restarted.err);
  REQUIRE(restarted.code == kExitDone);
  CHECK(restarted.out.find(Event(kCount - int64_t(kept.size()))) != std::string::npos);
  CHECK(ClassPngs(cut) == want);
  const auto after = FileIds(cut);
  for (const auto& [name, id] : before) {
    INFO(name);
    CHECK((after.at(name) == id));  // not rendered again
  }
  CHECK(Bytes(cut + "/output/lora.safetensors") == Bytes(whole + "/output/lora.safetensors"));
}

TEST_CASE("class images: the cache dir's images are reused and a damaged one rendered again",
          "[lora_sd][class_images]") {
  ClassJob job(1, 4);
  const std::string cache = job.tmp / "cache";
  ClassJob::Run first = job.Train(job.tmp / "w1", cache);
  INFO(first.err);
  REQUIRE(first.code == kExitDone);
  CHECK(first.out.find(Event(3)) != std::string::npos);
  const std::map<std::string, std::string> pngs = ClassPngs(cache);
  REQUIRE(pngs.size() == 3);
  CHECK(ClassDir(job.tmp / "w1").empty());  // kept in the cache dir, not the work dir
  const auto ids = FileIds(cache);

  // Another lease on this node: nothing rendered, nothing rewritten, the encoding reused.
  ClassJob::Run second = job.Train(job.tmp / "w2", cache);
  INFO(second.err);
  REQUIRE(second.code == kExitDone);
  CHECK(second.out.find("gleaner class_images") == std::string::npos);
  CHECK(FileIds(cache) == ids);
  CHECK(second.err.find("reusing the encoded dataset") != std::string::npos);
  CHECK(Bytes(job.tmp / "w2/output/lora.safetensors") ==
        Bytes(job.tmp / "w1/output/lora.safetensors"));

  // A damaged cached image is not trusted: that one alone is rendered again, to the same bytes.
  const std::string one = ClassDir(cache) + "/0001.png";
  REQUIRE(WriteFileDurable(one, pngs.at("0001.png").substr(0, 20)).ok());
  ClassJob::Run third = job.Train(job.tmp / "w3", cache);
  INFO(third.err);
  REQUIRE(third.code == kExitDone);
  CHECK(third.out.find(Event(1)) != std::string::npos);
  CHECK(ClassPngs(cache) == pngs);
  CHECK(FileId(ClassDir(cache) + "/0000.png") == ids.at("0000.png"));
}

TEST_CASE("class images with train_text_encoder: the generated ones join the caption ids too",
          "[lora_sd][class_images]") {
  ClassJob job(1, 3, {{"train_text_encoder", true}});
  const std::string work = job.tmp / "w";
  ClassJob::Run r = job.Train(work);
  INFO(r.err);
  REQUIRE(r.code == kExitDone);
  CHECK(r.out.find(Event(2)) != std::string::npos);
  CHECK(EncodedClassImages(work) == 3);
  TensorMap peft = MustLoad(work + "/output/lora_peft.safetensors");
  CHECK(peft.count("text_encoder.text_model.encoder.layers.0.self_attn.q_proj.lora_A.weight") == 1);
}

TEST_CASE("class images need an image dataset: refused at start", "[lora_sd][class_images]") {
  TinyJob latent(4);
  const std::string spec_path = latent.tmp / "SPEC.json";
  Json params = {{"steps", 2}, {"class_prompt", "a dog"}, {"num_class_images", 3}};
  REQUIRE(WriteFileDurable(spec_path, latent.Spec(params).dump()).ok());
  const std::string err = latent.tmp / "err.log";
  CHECK(RunBin({"run", "--spec", spec_path, "--work-dir", latent.tmp / "w"}, err) == kExitFailed);
  CHECK(Bytes(err).find("num_class_images needs a base model in diffusers layout") !=
        std::string::npos);
}

}  // namespace gleaner::train::testing
