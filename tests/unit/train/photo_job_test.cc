// lora-sd jobs made only of photos and captions, on a tiny diffusers model that the test
// generates (`gleaner-train make-model --diffusers`): end to end through the real coordinator,
// agents and `gleaner` CLI (models upload, jobs submit --images) across a SIGTERM of the first
// agent, outputs compared byte for byte with an uninterrupted local run; with and without
// text-encoder training. Bad inputs fail the trainer (exit 2) with a message naming the file.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "agent/train/images/png_encode.h"
#include "tests/integration/agent_fleet.h"
#include "tests/unit/images/writers.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

namespace h = gleaner::testing;
namespace iw = gleaner::images::testing;
using namespace gleaner;
using namespace gleaner::train;
using gleaner::train::testing::TempDir;

namespace {

struct TrainRun {
  int code = -1;
  std::string err;
};

TrainRun RunTrain(const std::vector<std::string>& args, const std::string& log) {
  h::ProcessSpec spec;
  spec.binary = "gleaner-train";
  spec.args = args;
  spec.stderr_path = log;
  h::RemoveAll(log);
  h::Process p(spec);
  std::string error;
  if (!p.Start(&error)) FAIL(error);
  std::optional<h::ExitStatus> st = p.Wait(h::Millis(120000));
  if (!st) st = p.Kill();
  return {st->exited ? st->code : -st->signal, p.Stderr()};
}

void Put(const std::string& path, const std::string& bytes) {
  REQUIRE(MakeDirs(path.substr(0, path.rfind('/'))).ok());
  REQUIRE(WriteFileDurable(path, bytes).ok());
}

std::string Png(int w, int h, int salt) {
  Result<std::string> png = images::EncodePng(iw::Pattern(w, h, salt));
  REQUIRE(png.ok());
  return *png;
}

// Three photos of different sizes, one with its own caption; two class images.
void MakePhotos(const std::string& dir) {
  Put(dir + "/photos/dog1.png", Png(24, 20, 1));
  Put(dir + "/photos/dog1.txt", "a photo of sks dog on grass");
  Put(dir + "/photos/dog2.png", Png(20, 30, 2));
  Put(dir + "/photos/more/dog3.png", Png(16, 16, 3));
  Put(dir + "/dogs/0001.png", Png(18, 18, 4));
  Put(dir + "/dogs/0002.png", Png(22, 16, 5));
}

h::ToolRun Gleaner(const h::TempDir& dir, const std::string& url, const std::string& token,
                   std::vector<std::string> args) {
  h::ProcessSpec spec;
  spec.binary = "gleaner";
  spec.args = std::move(args);
  spec.env = {{"GLEANER_URL", url}, {"GLEANER_TOKEN", token}};
  h::ToolRun r = h::RunTool(dir, std::move(spec));
  REQUIRE(r.code >= 0);
  return r;
}

std::map<std::string, std::string> Outputs(h::Fleet& fleet, const std::string& id) {
  h::HttpClient dev = fleet.coordinator().Client(fleet.developer_token());
  h::HttpResult r = dev.Get("/v1/jobs/" + id + "/result");
  INFO(r.Describe());
  REQUIRE(r.status == 200);
  std::map<std::string, std::string> got;
  const Json result = r.json();
  for (const Json& o : result["outputs"]) {
    got[o["name"].get<std::string>()] =
        h::HttpClient::Fetch("GET", o["url"].get<std::string>()).body;
  }
  return got;
}

// Which photo job: the model family and what it trains.
struct PhotoJob {
  bool sdxl = false;
  bool flux = false;  // a tiny FLUX.1 model (make-model --flux), with samples
  bool train_text_encoder = false;
  int64_t steps = 30;
};

PhotoJob Photos(int64_t steps, bool sdxl = false, bool train_text_encoder = false,
                bool flux = false) {
  PhotoJob j;
  j.steps = steps;
  j.sdxl = sdxl;
  j.train_text_encoder = train_text_encoder;
  j.flux = flux;
  return j;
}

// A tiny diffusers model (dir/tiny) uploaded with `gleaner models upload`, and a job on the
// photos in dir/photos submitted with `gleaner jobs submit --images`; returns the job id.
std::string SubmitPhotoJob(const h::TempDir& dir, h::Fleet& fleet, const PhotoJob& job) {
  const bool sdxl = job.sdxl, train_text_encoder = job.train_text_encoder;
  const int64_t steps = job.steps;
  std::vector<std::string> make = {"make-model", "--diffusers", dir.File("tiny"), "--seed", "3"};
  if (sdxl) make.push_back("--sdxl");
  if (job.flux) make.push_back("--flux");
  TrainRun made = RunTrain(make, dir.File("make.log"));
  INFO(made.err);
  REQUIRE(made.code == 0);
  MakePhotos(dir.path());
  const std::string url = fleet.coordinator().url(), dev = fleet.developer_token();
  h::ToolRun up =
      Gleaner(dir, url, dev, {"models", "upload", dir.File("tiny"), "-o", dir.File("m.json")});
  INFO(up.err);
  REQUIRE(up.code == 0);
  Json params = {{"batch_size", 1}, {"checkpoint_every", 5}, {"learning_rate", 0.003}, {"seed", 5}};
  if (job.flux) {
    // Small: 32 px photos (16x16 latents, 64 tokens), 16 T5 tokens; flow-matching settings off
    // their defaults, and samples at two steps of the run.
    params["resolution"] = 64;
    params["max_sequence_length"] = 16;
    params["weighting_scheme"] = "logit_normal";
    params["timestep_shift"] = "resolution";
    params["guidance"] = 3.5;
    params["sample_prompts"] = {"a photo of sks dog"};
    params["sample_every"] = steps / 2;
    params["sample_steps"] = 3;
    params["sample_resolution"] = 32;
  }
  std::vector<std::string> args = {"jobs",
                                   "submit",
                                   "--images",
                                   dir.File("photos"),
                                   "--instance-prompt",
                                   "a photo of sks dog",
                                   "--model",
                                   dir.File("m.json"),
                                   "--steps",
                                   std::to_string(steps)};
  if (train_text_encoder) {
    params["text_encoder_lr"] = 0.001;
    for (const char* a : {"--train-text-encoder", "--class-images"}) args.push_back(a);
    args.push_back(dir.File("dogs"));
    args.push_back("--class-prompt");
    args.push_back("a photo of a dog");
  }
  args.push_back("--params");
  args.push_back(params.dump());
  h::ToolRun sub = Gleaner(dir, url, dev, args);
  INFO(sub.err);
  REQUIRE(sub.code == 0);
  return sub.out.substr(0, sub.out.size() - 1);
}

void RunPhotoJob(const PhotoJob& want) {
  const bool sdxl = want.sdxl, train_text_encoder = want.train_text_encoder;
  const int64_t steps = want.steps;
  h::TempDir dir(want.flux             ? "gleaner-photo-flux"
                 : train_text_encoder ? "gleaner-photo-te"
                                      : "gleaner-photo");
  // FLUX: every segment is replayed by another agent (the agents after the SIGTERM verify).
  std::vector<std::string> coordinator_args;
  if (want.flux) coordinator_args = {"--verify-fraction", "1"};
  h::Fleet fleet(dir.path(), 0.2, coordinator_args);
  REQUIRE(fleet.ok());
  const std::string id = SubmitPhotoJob(dir, fleet, want);

  std::string error;
  h::AgentProcess& a = fleet.AddAgent("a");
  REQUIRE(a.Start(&error));
  bool mid = h::WaitUntil(
      [&] {
        Json j = fleet.Job(id);
        return j.value("state", "") == "running" && j["step"].is_number() &&
               j["step"].get<int64_t>() >= steps / 4;
      },
      h::Millis(90000), h::Millis(50));
  INFO(a.Log());
  REQUIRE(mid);
  a.process().Signal(SIGTERM);
  std::optional<h::ExitStatus> st = a.process().Wait(h::Millis(30000));
  REQUIRE(st);
  CHECK(st->clean());
  CHECK(fleet.Job(id).value("state", "") == "pending");
  CHECK(fleet.Job(id)["step"].get<int64_t>() < steps);

  std::vector<std::string> verify;
  if (want.flux) verify = {"--verify"};
  h::AgentProcess& b = fleet.AddAgent("b", {}, verify);
  REQUIRE(b.Start(&error));
  h::AgentProcess* c = nullptr;
  if (want.flux) {
    c = &fleet.AddAgent("c", {}, verify);
    REQUIRE(c->Start(&error));
  }
  const bool final = fleet.WaitAllFinal({id}, h::Millis(240000));
  INFO(b.Log());
  if (c != nullptr) INFO(c->Log());
  REQUIRE(final);
  REQUIRE(fleet.Job(id).value("state", "") == "completed");
  CHECK((b.Log() + (c != nullptr ? c->Log() : "")).find("resum") != std::string::npos);
  if (want.flux) {
    // Verified training holds for the new family: replays from other agents agreed.
    const Json events = fleet.Events(id);
    REQUIRE(events["verifications"].size() >= 1);
    for (const Json& v : events["verifications"]) {
      INFO(DumpJson(v));
      if (v.value("verdict", "") != "") CHECK(v["verdict"] == "agree");
    }
  }
  std::map<std::string, std::string> got = Outputs(fleet, id);
  REQUIRE(got.count("lora.safetensors"));
  REQUIRE(got.count("lora_peft.safetensors"));

  // The same job run here without interruption, on the archive the CLI uploaded (from agent
  // a's cache) and the model folder, gives the same bytes.
  const Json job = fleet.Job(id);
  const std::string archive = dir.File("a/cache/" + job["dataset"]["sha256"].get<std::string>());
  Json spec = {{"job_id", id},
               {"kind", "lora-sd"},
               {"steps", steps},
               {"params", job["params"]},
               {"inputs", {{"model", dir.File("tiny")}, {"dataset", archive}}},
               {"model", {{"format", "diffusers"}}}};
  Put(dir.File("SPEC.json"), spec.dump());
  TrainRun local =
      RunTrain({"run", "--spec", dir.File("SPEC.json"), "--work-dir", dir.File("local")},
               dir.File("local.log"));
  INFO(local.err);
  REQUIRE(local.code == 0);
  for (const char* f : {"lora.safetensors", "lora_peft.safetensors"}) {
    INFO(f);
    Result<std::string> mine = ReadFile(dir.File("local/output/") + f);
    REQUIRE(mine.ok());
    CHECK((got[f] == *mine));
  }
  Result<TensorMap> kohya = DecodeSafetensors(got["lora.safetensors"], "kohya");
  Result<TensorMap> peft = DecodeSafetensors(got["lora_peft.safetensors"], "peft");
  REQUIRE(kohya.ok());
  REQUIRE(peft.ok());
  auto has = [](const TensorMap& m, const std::string& k) { return m.count(k) == 1; };
  if (want.flux) {
    // The names FluxPipeline.load_lora_weights and kohya/ComfyUI read, and samples rendered at
    // the due steps (the same bytes as the local run's).
    CHECK(has(*peft, "transformer.transformer_blocks.0.attn.to_q.lora_A.weight"));
    CHECK(has(*kohya, "lora_unet_double_blocks_0_img_attn_qkv.lora_down.weight"));
    CHECK(peft->at("transformer.transformer_blocks.0.attn.to_q.lora_B.weight")
              .abs()
              .sum()
              .item<double>() > 0);
    for (int64_t step : {steps / 2, steps}) {
      char png[64];
      std::snprintf(png, sizeof png, "samples/%010lld/0.png", static_cast<long long>(step));
      INFO(png);
      Result<std::string> local_png = ReadFile(dir.File("local/") + std::string(png));
      REQUIRE(local_png.ok());
      CHECK(local_png->size() > 8);
    }
    return;
  }
  const std::string q = "text_model_encoder_layers_1_self_attn_q_proj.lora_down.weight";
  const std::string pq = ".text_model.encoder.layers.1.self_attn.out_proj.lora_B.weight";
  if (!train_text_encoder) {
    CHECK_FALSE(has(*kohya, "lora_te_" + q));
    CHECK_FALSE(has(*peft, "text_encoder" + pq));
  } else if (!sdxl) {
    CHECK(has(*kohya, "lora_te_" + q));
    CHECK(has(*peft, "text_encoder" + pq));
  } else {
    CHECK(has(*kohya, "lora_te1_" + q));
    CHECK(has(*kohya, "lora_te2_" + q));
    CHECK(has(*peft, "text_encoder" + pq));
    CHECK(has(*peft, "text_encoder_2" + pq));
  }
  // The encoders' adapters trained (B starts at zero). SDXL conditions on text_encoder's
  // penultimate state, which its last layer does not touch: that layer's adapters get no gradient
  // (as in diffusers), so the check looks at layer 0.
  if (train_text_encoder) {
    const std::string b0 = ".text_model.encoder.layers.0.self_attn.out_proj.lora_B.weight";
    CHECK(peft->at("text_encoder" + b0).abs().sum().item<double>() > 0);
    if (sdxl) CHECK(peft->at("text_encoder_2" + pq).abs().sum().item<double>() > 0);
  }
}

// A job spec for `gleaner-train run` on the tiny model in dir/tiny and the dataset `data`.
std::string LocalSpec(const TempDir& tmp, const std::string& model, const std::string& data) {
  Json spec = {{"job_id", "bad"},
               {"kind", "lora-sd"},
               {"steps", 2},
               {"params", {{"steps", 2}, {"instance_prompt", "a photo of sks dog"}}},
               {"inputs", {{"model", model}, {"dataset", data}}},
               {"model", {{"format", "diffusers"}}}};
  std::string path = tmp / "SPEC.json";
  Put(path, spec.dump());
  return path;
}

// The file's identity: a durable rewrite (temp + rename) gives it another inode.
std::pair<ino_t, int64_t> FileId(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return {0, 0};
  return {st.st_ino, int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

// The pid of the live gleaner-train process whose command line mentions `needle` (0: none).
pid_t TrainerMentioning(const std::string& needle) {
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  pid_t found = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string proc = std::string("/proc/") + e->d_name;
    std::string cmd = h::ReadFile(proc + "/cmdline");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    const bool zombie = h::ReadFile(proc + "/stat").find(") Z ") != std::string::npos;
    if (!zombie && cmd.find("gleaner-train run") != std::string::npos &&
        cmd.find(needle) != std::string::npos) {
      found = pid_t(std::atoi(e->d_name));
    }
  }
  closedir(d);
  return found;
}

}  // namespace

TEST_CASE("a photo-folder job trains end to end across a SIGTERM and ends byte-identical",
          "[lora_sd][photos][e2e]") {
  RunPhotoJob(Photos(40));
}

TEST_CASE("a photo-folder job with train_text_encoder (SDXL-shaped) resumes byte-identical",
          "[lora_sd][photos][sdxl][e2e]") {
  RunPhotoJob(Photos(30, /*sdxl=*/true, /*train_text_encoder=*/true));
}

TEST_CASE("a photo-folder job trains the SD text encoder too", "[lora_sd][photos][e2e]") {
  RunPhotoJob(Photos(30, /*sdxl=*/false, /*train_text_encoder=*/true));
}

TEST_CASE("a FLUX.1 photo job trains across a SIGTERM, byte-identical, with samples, verified",
          "[lora_sd][photos][flux][e2e]") {
  RunPhotoJob(Photos(20, false, false, /*flux=*/true));
}

TEST_CASE("a photo job with a bad input fails (exit 2) naming the file", "[lora_sd][photos]") {
  TempDir tmp;
  const std::string model = tmp / "tiny";
  REQUIRE(RunTrain({"make-model", "--diffusers", model}, tmp / "make.log").code == 0);
  const std::string good = Png(16, 16, 1);
  auto zip = [&](const std::string& name, std::vector<iw::ZipEntry> entries) {
    Put(tmp / name, iw::WriteZip(entries));
    return tmp / name;
  };
  auto fails = [&](const std::string& model_dir, const std::string& data) {
    TrainRun r =
        RunTrain({"run", "--spec", LocalSpec(tmp, model_dir, data), "--work-dir", tmp / "work"},
                 tmp / "run.log");
    INFO(r.err);
    CHECK(r.code == 2);
    return r.err;
  };
  const std::string ok = zip("ok.zip", {{"dog1.png", good}});

  SECTION("a corrupt image") {
    std::string bad = good;
    for (size_t i = 40; i < bad.size() - 12; ++i) bad[i] = char(bad[i] ^ 0x5a);
    std::string err = fails(model, zip("corrupt.zip", {{"dog1.png", good}, {"dog2.png", bad}}));
    CHECK(err.find("dataset: dog2.png: ") != std::string::npos);
  }
  SECTION("a truncated image") {
    std::string err =
        fails(model, zip("cut.zip", {{"a.png", good}, {"b.png", good.substr(0, good.size() / 2)}}));
    CHECK(err.find("dataset: b.png: ") != std::string::npos);
  }
  SECTION("an archive without images") {
    std::string err = fails(model, zip("empty.zip", {{"notes.txt", "hello"}}));
    CHECK(err.find("dataset: no images (JPEG, PNG or WebP) outside class/") != std::string::npos);
  }
  SECTION("a tokenizer without merges.txt") {
    REQUIRE(std::remove((model + "/tokenizer/merges.txt").c_str()) == 0);
    std::string err = fails(model, ok);
    CHECK(err.find(model + "/tokenizer/merges.txt: missing") != std::string::npos);
  }
  SECTION("a model folder without unet") {
    gleaner::train::testing::RemoveTree(model + "/unet");
    std::string err = fails(model, ok);
    CHECK(err.find(model + "/unet: missing (not a folder)") != std::string::npos);
  }
}

TEST_CASE("encoded photos are cached in the work dir and reused when the trainer starts again",
          "[lora_sd][photos]") {
  TempDir tmp;
  const std::string model = tmp / "tiny";
  REQUIRE(RunTrain({"make-model", "--diffusers", model}, tmp / "make.log").code == 0);
  Put(tmp / "photos.zip",
      iw::WriteZip({{"dog1.png", Png(16, 20, 1)}, {"dog2.png", Png(20, 16, 2)}}));
  Json spec = {{"job_id", "cache"},
               {"kind", "lora-sd"},
               {"steps", 6},
               {"params", {{"steps", 6}, {"checkpoint_every", 3}, {"instance_prompt", "sks dog"}}},
               {"inputs", {{"model", model}, {"dataset", tmp / "photos.zip"}}},
               {"model", {{"format", "diffusers"}}}};
  Put(tmp / "SPEC.json", spec.dump());
  const std::string work = tmp / "work", cache = work + "/encoded-dataset.safetensors";
  TrainRun first =
      RunTrain({"run", "--spec", tmp / "SPEC.json", "--work-dir", work}, tmp / "1.log");
  INFO(first.err);
  REQUIRE(first.code == 0);
  CHECK(first.err.find("reusing") == std::string::npos);
  std::map<std::string, std::string> meta;
  REQUIRE(LoadSafetensors(cache, &meta).ok());
  CHECK(meta["format"] == "gleaner-encoded-images");
  CHECK(meta["version"] == "1");
  Result<std::string> full = ReadFile(work + "/output/lora.safetensors");
  REQUIRE(full.ok());

  // Started again from the step-3 checkpoint in the same work dir: the cache is read back and the
  // result is the same.
  const std::string ckpt = tmp / "ckpt";
  REQUIRE(std::rename((work + "/checkpoints/0000000003").c_str(), ckpt.c_str()) == 0);
  gleaner::train::testing::RemoveTree(work + "/output");
  gleaner::train::testing::RemoveTree(work + "/checkpoints");
  TrainRun again = RunTrain(
      {"run", "--spec", tmp / "SPEC.json", "--work-dir", work, "--resume", ckpt}, tmp / "2.log");
  INFO(again.err);
  REQUIRE(again.code == 0);
  CHECK(again.err.find("lora-sd: reusing the encoded dataset " + cache) != std::string::npos);
  CHECK(*ReadFile(work + "/output/lora.safetensors") == *full);

  // Another dataset under the same work dir: the stale cache is replaced, not read.
  Put(tmp / "photos.zip", iw::WriteZip({{"dog1.png", Png(16, 20, 3)}}));
  gleaner::train::testing::RemoveTree(work + "/output");
  gleaner::train::testing::RemoveTree(work + "/checkpoints");
  TrainRun other =
      RunTrain({"run", "--spec", tmp / "SPEC.json", "--work-dir", work}, tmp / "3.log");
  INFO(other.err);
  REQUIRE(other.code == 0);
  CHECK(other.err.find("encoding the dataset again") != std::string::npos);
  CHECK(*ReadFile(work + "/output/lora.safetensors") != *full);
}

TEST_CASE("with --cache-dir the encoded photos are kept there and reused from another work dir",
          "[lora_sd][photos]") {
  TempDir tmp;
  const std::string model = tmp / "tiny";
  REQUIRE(RunTrain({"make-model", "--diffusers", model}, tmp / "make.log").code == 0);
  Put(tmp / "photos.zip",
      iw::WriteZip({{"dog1.png", Png(16, 20, 1)}, {"dog2.png", Png(20, 16, 2)}}));
  Json spec = {{"job_id", "cache-dir"},
               {"kind", "lora-sd"},
               {"steps", 4},
               {"params", {{"steps", 4}, {"instance_prompt", "sks dog"}}},
               {"inputs", {{"model", model}, {"dataset", tmp / "photos.zip"}}},
               {"model", {{"format", "diffusers"}}}};
  Put(tmp / "SPEC.json", spec.dump());
  const std::string cache_dir = tmp / "cache", cache = cache_dir + "/encoded-dataset.safetensors";
  auto run = [&](const std::string& work, const std::string& log) {
    TrainRun r = RunTrain(
        {"run", "--spec", tmp / "SPEC.json", "--work-dir", work, "--cache-dir", cache_dir}, log);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return r.err;
  };
  std::string err = run(tmp / "w1", tmp / "1.log");
  CHECK(err.find("reusing") == std::string::npos);
  CHECK(ReadFile(tmp / "w1/encoded-dataset.safetensors").status().code() == Code::kNotFound);
  const std::pair<ino_t, int64_t> written = FileId(cache);
  REQUIRE(written.first != 0);
  Result<std::string> full = ReadFile(tmp / "w1/output/lora.safetensors");
  REQUIRE(full.ok());

  // A later lease: another work dir, the same cache dir. The encoding is read back, not
  // rewritten, and the result is the same.
  err = run(tmp / "w2", tmp / "2.log");
  CHECK(err.find("lora-sd: reusing the encoded dataset " + cache) != std::string::npos);
  CHECK(FileId(cache) == written);
  CHECK(*ReadFile(tmp / "w2/output/lora.safetensors") == *full);

  // A damaged cache is not trusted: encoded again, replaced, same result.
  REQUIRE(WriteFileDurable(cache, "not a safetensors file").ok());
  err = run(tmp / "w3", tmp / "3.log");
  CHECK(err.find("encoding the dataset again") != std::string::npos);
  CHECK(*ReadFile(tmp / "w3/output/lora.safetensors") == *full);
  std::map<std::string, std::string> meta;
  CHECK(LoadSafetensors(cache, &meta).ok());
  CHECK(meta["format"] == "gleaner-encoded-images");

  // Even a directory in its place is replaced.
  REQUIRE(std::remove(cache.c_str()) == 0);
  REQUIRE(MakeDirs(cache + "/odd").ok());
  err = run(tmp / "w4", tmp / "4.log");
  CHECK(err.find("encoding the dataset again") != std::string::npos);
  CHECK(*ReadFile(tmp / "w4/output/lora.safetensors") == *full);
  CHECK(LoadSafetensors(cache).ok());
}

TEST_CASE(
    "a photo job claimed again by the same node reuses its encoded photos and its job cache "
    "goes when it completes",
    "[lora_sd][photos][e2e]") {
  h::TempDir dir("gleaner-photo-cache");
  h::Fleet fleet(dir.path(), 0.2);
  REQUIRE(fleet.ok());
  const int64_t steps = 40;
  const std::string id = SubmitPhotoJob(dir, fleet, Photos(steps));
  std::string error;
  h::AgentProcess& a = fleet.AddAgent("a");
  REQUIRE(a.Start(&error));
  const std::string job_cache = dir.File("a/job-cache/" + id);
  const std::string cache = job_cache + "/encoded-dataset.safetensors";
  bool mid = h::WaitUntil(
      [&] {
        Json j = fleet.Job(id);
        return j.value("state", "") == "running" && j["step"].is_number() &&
               j["step"].get<int64_t>() >= steps / 4;
      },
      h::Millis(90000), h::Millis(50));
  INFO(a.Log());
  REQUIRE(mid);
  const std::pair<ino_t, int64_t> written = FileId(cache);
  REQUIRE(written.first != 0);

  // The trainer (not the agent) gets SIGTERM: it checkpoints and exits "interrupted", the agent
  // hands the job back and, the only node, claims it again.
  const pid_t trainer = TrainerMentioning(dir.File("a/jobs/"));
  REQUIRE(trainer > 0);
  REQUIRE(::kill(trainer, SIGTERM) == 0);
  // Until the job completes, the cache file is never rewritten (a new lease that encoded again
  // would replace it: another inode).
  bool rewritten = false;
  const bool final = h::WaitUntil(
      [&] {
        const std::pair<ino_t, int64_t> now = FileId(cache);
        if (now.first != 0 && now != written) rewritten = true;
        return fleet.Job(id).value("state", "") == "completed";
      },
      h::Millis(120000), h::Millis(5));
  REQUIRE(final);
  CHECK_FALSE(rewritten);
  CHECK(a.Log().find("released at step") != std::string::npos);
  const Json segs = fleet.Events(id)["segments"];
  REQUIRE(segs.size() >= 2);
  for (const Json& seg : segs) CHECK(seg.value("node_id", "") == a.NodeId());
  // Completed: the job's cache on the node is removed.
  CHECK(h::WaitUntil([&] { return ::access(job_cache.c_str(), F_OK) != 0; }, h::Millis(10000)));
}
