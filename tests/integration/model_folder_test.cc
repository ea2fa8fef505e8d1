// Base models as diffusers folders, end to end: `gleaner models upload` registers a folder once,
// `gleaner jobs submit` archives photos and submits; a real agent fetches every model file into
// its content-addressed cache (resuming a cut download with HTTP Range) and hands the trainer
// the folder. The trainer is a stand-in (model_folder_trainer.cc) that reports what it got.
// Blob traffic goes through a FaultProxy (the coordinator's public URL), which counts the bytes
// the server sent and cuts a download mid-file.
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <thread>

#include "shared/model_manifest.h"
#include "shared/native/files.h"
#include "shared/sha256.h"
#include "tests/counting_server.h"
#include "tests/integration/agent_fleet.h"
#include "tests/integration/fault_proxy.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

ToolRun Gleaner(const TempDir& dir, const std::string& url, const std::string& token,
                std::vector<std::string> args) {
  ProcessSpec spec;
  spec.binary = "gleaner";
  spec.args = std::move(args);
  spec.env = {{"GLEANER_URL", url}, {"GLEANER_TOKEN", token}};
  ToolRun r = RunTool(dir, std::move(spec));
  REQUIRE(r.code >= 0);
  return r;
}

std::string Bytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char(((i + seed) * 2654435761u) >> 13);
  return s;
}

void Put(const std::string& path, const std::string& bytes) {
  REQUIRE(files::MakeDirs(path.substr(0, path.rfind('/'))).ok());
  REQUIRE(files::WriteDurable(path, bytes).ok());
}

constexpr size_t kUnetBytes = 4 << 20;

// A tiny SD 1.x folder with one large file (the UNet weights) and a pickle file to be skipped.
// Returns the files that belong in the manifest: path -> content.
std::map<std::string, std::string> MakeModel(const std::string& dir) {
  std::map<std::string, std::string> files = {
      {"model_index.json", "{\"_class_name\":\"StableDiffusionPipeline\"}"},
      {"unet/config.json", "{\"block_out_channels\":[32,64]}"},
      {"unet/diffusion_pytorch_model.safetensors", Bytes(kUnetBytes, 1)},
      {"vae/config.json", "{\"scaling_factor\":0.18215}"},
      {"vae/diffusion_pytorch_model.safetensors", Bytes(3000, 2)},
      {"text_encoder/config.json", "{\"hidden_size\":32}"},
      {"text_encoder/model.safetensors", Bytes(2000, 3)},
      {"tokenizer/vocab.json", "{\"a</w>\":0}"},
      {"tokenizer/merges.txt", "#version: 0.2\n"}};
  for (const auto& [p, b] : files) Put(dir + "/" + p, b);
  Put(dir + "/unet/diffusion_pytorch_model.bin", "pickle");
  return files;
}

// Files whose heads are PNG and JPEG signatures (the dataset reader sorts by signature; the
// pixels are decoded only by the real trainer).
void MakePhotos(const std::string& dir) {
  Put(dir + "/dog1.png", "\x89PNG\r\n\x1a\n" + Bytes(5000, 7));
  Put(dir + "/dog1.txt", "a photo of sks dog on grass");
  Put(dir + "/more/dog2.jpg", "\xff\xd8\xff\xe0" + Bytes(4000, 8));
  Put(dir + "/.DS_Store", "junk");
  Put(dir + "/notes.md", "not an image");
}

std::string Output(Fleet& fleet, const std::string& id, const std::string& name) {
  HttpClient dev = fleet.coordinator().Client(fleet.developer_token());
  HttpResult r = dev.Get("/v1/jobs/" + id + "/result");
  if (r.status != 200) return "result: " + r.Describe();
  const Json result = r.json();
  for (const Json& o : result["outputs"]) {
    if (o.value("name", "") == name) {
      HttpResult got = HttpClient::Fetch("GET", o["url"].get<std::string>());
      return got.status == 200 ? got.body : "output: " + got.Describe();
    }
  }
  return "no output " + name + ": " + r.Describe();
}

std::string Listing(const std::map<std::string, std::string>& files) {
  std::string out;
  for (const auto& [p, b] : files) out += Sha256Hex(b) + "  " + p + "\n";
  return out;
}

std::vector<std::string> PartFiles(const std::string& cache) {
  std::vector<std::string> parts;
  Result<std::vector<std::string>> names = files::ListDir(cache);
  if (!names.ok()) return parts;
  for (const std::string& n : *names) {
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".part") == 0) parts.push_back(n);
  }
  return parts;
}

// A coordinator whose blob URLs go through a FaultProxy (its public URL), with a tiny model
// folder (dir/sd-tiny) and photos (dir/photos) on disk.
struct ProxiedModelFleet {
  TempDir dir;
  Fleet fleet;
  std::unique_ptr<FaultProxy> proxy;
  std::string url, dev;
  std::map<std::string, std::string> model;
  int64_t model_bytes = 0;

  explicit ProxiedModelFleet(const std::string& prefix) : dir(prefix), fleet(dir.path(), 0.2) {
    REQUIRE(fleet.ok());
    proxy = std::make_unique<FaultProxy>(fleet.coordinator().port());
    REQUIRE(proxy->ok());
    std::string error;
    REQUIRE(fleet.RestartCoordinator(&error, {"--public-url", proxy->url()}));
    url = fleet.coordinator().url();
    dev = fleet.developer_token();
    model = MakeModel(dir.File("sd-tiny"));
    MakePhotos(dir.File("photos"));
    for (const auto& [p, b] : model) model_bytes += int64_t(b.size());
  }
};

}  // namespace

TEST_CASE("a model folder uploaded once serves two jobs, fetched once, a cut download resumed",
          "[agent][e2e][models]") {
  ProxiedModelFleet f("gleaner-e2e-models");
  TempDir& dir = f.dir;
  Fleet& fleet = f.fleet;
  FaultProxy& proxy = *f.proxy;
  const std::string url = f.url, dev = f.dev;
  const std::map<std::string, std::string> model = f.model;
  const int64_t model_bytes = f.model_bytes;
  std::string error;

  ToolRun up = Gleaner(
      dir, url, dev, {"models", "upload", dir.File("sd-tiny"), "-o", dir.File("tiny.model.json")});
  INFO(up.err);
  REQUIRE(up.code == 0);
  CHECK(up.out == dir.File("tiny.model.json") + "\n");
  CHECK(up.err.find("skipping unet/diffusion_pytorch_model.bin") != std::string::npos);
  Result<ModelManifest> m = ParseModelManifest(ReadFile(dir.File("tiny.model.json")));
  REQUIRE(m.ok());
  REQUIRE(m->files.size() == model.size());
  // Registering the same folder again uploads nothing (the manifest already holds every file).
  const int64_t before_again = proxy.upstream_bytes();
  ToolRun again = Gleaner(
      dir, url, dev, {"models", "upload", dir.File("sd-tiny"), "-o", dir.File("tiny.model.json")});
  REQUIRE(again.code == 0);
  CHECK(proxy.upstream_bytes() == before_again);
  CHECK(ReadFile(dir.File("tiny.model.json")) == ModelManifestToJson(*m) + "\n");

  auto submit = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"jobs",
                                     "submit",
                                     "--images",
                                     dir.File("photos"),
                                     "--instance-prompt",
                                     "a photo of sks dog",
                                     "--model",
                                     dir.File("tiny.model.json"),
                                     "--steps",
                                     "5"};
    args.insert(args.end(), extra.begin(), extra.end());
    ToolRun s = Gleaner(dir, url, dev, args);
    INFO(s.err);
    REQUIRE(s.code == 0);
    REQUIRE(s.out.size() > 3);
    REQUIRE(s.out.back() == '\n');
    return s.out.substr(0, s.out.size() - 1);
  };
  const std::string job1 = submit({"--train-text-encoder"});
  CHECK(fleet.Job(job1)["params"]["instance_prompt"] == "a photo of sks dog");
  CHECK(fleet.Job(job1)["params"]["train_text_encoder"] == true);

  // The first download is cut 1 MiB into the UNet weights (the small files come first in
  // path order... all but vae/, which is 3 KB): the agent retries and asks only for the rest.
  const int64_t base1 = proxy.upstream_bytes();
  proxy.CutAfterUpstreamBytes(1 << 20);
  AgentProcess& agent = fleet.AddAgent(
      "a", {}, {"--trainer", BinPath("../tests/model-folder-trainer"), "--cache-max-mb", "100"});
  REQUIRE(agent.Start(&error));
  const bool final1 = fleet.WaitAllFinal({job1}, Millis(60000));
  INFO("agent:\n" << agent.Log());
  REQUIRE(final1);
  REQUIRE(fleet.Job(job1).value("state", "") == "completed");
  const int64_t used1 = proxy.upstream_bytes() - base1;
  // Without Range the cut would cost the 1 MiB again; with it, only the dataset (12 KB) and a
  // few response heads come on top of the model.
  CHECK(used1 >= model_bytes);
  CHECK(used1 < model_bytes + 64 * 1024);
  CHECK(agent.Log().find("retrying") != std::string::npos);
  std::string listing = Output(fleet, job1, "inputs.txt");
  INFO("inputs.txt:\n" << listing);
  CHECK(listing.find(Listing(model)) == 0);
  CHECK(listing.find("format diffusers\n") != std::string::npos);
  // The archive, read by the trainer's own dataset reader: captions from .txt, else the prompt.
  CHECK(listing.find("instance dog1.png a photo of sks dog on grass\n"
                     "instance more/dog2.jpg a photo of sks dog\n") != std::string::npos);
  CHECK(PartFiles(dir.File("a/cache")).empty());

  // The second job reuses the cached model: only its dataset (and output) cross the link.
  const int64_t base2 = proxy.upstream_bytes();
  Put(dir.File("dogs/0001.png"), "\x89PNG\r\n\x1a\n" + Bytes(3000, 9));
  const std::string job2 =
      submit({"--class-images", dir.File("dogs"), "--class-prompt", "a photo of a dog"});
  REQUIRE(fleet.WaitAllFinal({job2}, Millis(60000)));
  REQUIRE(fleet.Job(job2).value("state", "") == "completed");
  const int64_t used2 = proxy.upstream_bytes() - base2;
  CHECK(used2 < 64 * 1024);
  const std::string listing2 = Output(fleet, job2, "inputs.txt");
  CHECK(listing2.find(Listing(model)) == 0);
  CHECK(listing2.find("class class/0001.png a photo of a dog\n") != std::string::npos);
  CHECK(fleet.Job(job2)["params"]["class_prompt"] == "a photo of a dog");
  CHECK(!fleet.Job(job2)["params"].contains("train_text_encoder"));
}

TEST_CASE("a model file whose bytes do not match its sha256 fails the job and is deleted",
          "[agent][e2e][models]") {
  TempDir dir("gleaner-e2e-models-sha");
  // The extra file is served from loopback: the operator allows the host, the owner opted in.
  Fleet fleet(dir.path(), 0.2, {"--model-hosts", "127.0.0.1"});
  REQUIRE(fleet.ok());
  const std::string url = fleet.coordinator().url(), dev = fleet.developer_token();
  MakeModel(dir.File("sd-tiny"));
  MakePhotos(dir.File("photos"));
  REQUIRE(Gleaner(dir, url, dev,
                  {"models", "upload", dir.File("sd-tiny"), "-o", dir.File("m.model.json")})
              .code == 0);
  // One more file served from elsewhere, with a sha256 that its bytes do not have.
  httplib::Server server;
  server.Get("/scheduler_config.json", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"num_train_timesteps\":9999}", "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  struct Stop {
    httplib::Server* s;
    std::thread* t;
    ~Stop() {
      s->stop();
      t->join();
    }
  } stop{&server, &serving};
  Result<ModelManifest> m = ParseModelManifest(ReadFile(dir.File("m.model.json")));
  REQUIRE(m.ok());
  ModelFile extra;
  extra.path = "scheduler/scheduler_config.json";
  extra.url = "http://127.0.0.1:" + std::to_string(port) + "/scheduler_config.json";
  extra.sha256 = Sha256Hex("{\"num_train_timesteps\":1000}");
  extra.size = 28;
  m->files.push_back(extra);
  REQUIRE(files::WriteDurable(dir.File("bad.model.json"), ModelManifestToJson(*m)).ok());
  ToolRun s =
      Gleaner(dir, url, dev,
              {"jobs", "submit", "--images", dir.File("photos"), "--instance-prompt",
               "a photo of sks dog", "--model", dir.File("bad.model.json"), "--steps", "5"});
  INFO(s.err);
  REQUIRE(s.code == 0);
  const std::string id = s.out.substr(0, s.out.find('\n'));

  std::string error;
  AgentProcess& agent = fleet.AddAgent(
      "a", {}, {"--trainer", BinPath("../tests/model-folder-trainer"), "--allow-private-fetch"});
  REQUIRE(agent.Start(&error));
  // The node reports an input error (a file that is not what the job declared), so the job
  // waits for a node of another machine to confirm it.
  std::string reason;
  REQUIRE(WaitUntil(
      [&] {
        Json ev = fleet.Events(id);
        if (!ev.contains("input_errors") || ev["input_errors"].empty()) return false;
        reason = ev["input_errors"][0].value("reason", "");
        return true;
      },
      Millis(30000)));
  CHECK(fleet.Events(id)["failures"].empty());
  INFO("agent:\n" << agent.Log());
  // The developer learns nothing of what the host served (its hash, its size); the node's own
  // log keeps the detail.
  CHECK(reason == "model file unavailable");
  CHECK(WaitUntil(
      [&] {
        return agent.Log().find("input model/scheduler/scheduler_config.json: ") !=
                   std::string::npos &&
               agent.Log().find("sha256 mismatch") != std::string::npos;
      },
      Millis(5000)));
  CHECK(PartFiles(dir.File("a/cache")).empty());
  CHECK(!files::Exists(dir.File("a/cache/" + extra.sha256)));
}

TEST_CASE(
    "model file URLs at private addresses: the agent fetches nothing there and the "
    "developer sees only 'model file unavailable'",
    "[agent][e2e][models][fetch_guard]") {
  TempDir dir("gleaner-e2e-fetch-guard");
  // A secret on the volunteer's loopback, and a mirror (on loopback too) that redirects to it.
  CountingServer secret;
  secret.server.Get("/secret", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"error\":\"admin only\",\"token\":\"s3cr3t\"}", "application/json");
  });
  secret.Start();
  const std::string secret_url = "http://127.0.0.1:" + std::to_string(secret.port) + "/secret";
  CountingServer mirror;
  mirror.server.Get("/model.json", [&](const httplib::Request&, httplib::Response& res) {
    res.set_redirect(secret_url, 302);
  });
  mirror.Start();
  // The operator allows every host named here, so only the node's guard stands in the way.
  // 10.255.255.1 and 169.254.169.254 are never contacted: the guard refuses before a socket.
  Fleet fleet(dir.path(), 0.2,
              {"--model-hosts", "127.0.0.1,[::1],10.255.255.1,169.254.169.254",
               "--quarantine-failures", "100"});
  REQUIRE(fleet.ok());
  const std::string url = fleet.coordinator().url(), dev = fleet.developer_token();
  MakeModel(dir.File("sd-tiny"));
  REQUIRE(Gleaner(dir, url, dev,
                  {"models", "upload", dir.File("sd-tiny"), "-o", dir.File("m.model.json")})
              .code == 0);
  Result<ModelManifest> m = ParseModelManifest(ReadFile(dir.File("m.model.json")));
  REQUIRE(m.ok());
  HttpClient client = fleet.coordinator().Client(dev);
  const std::string photos = "not really a zip";
  HttpResult up = client.Post(
      "/v1/uploads",
      {{"name", "photos.zip"}, {"size", int64_t(photos.size())}, {"sha256", Sha256Hex(photos)}});
  REQUIRE(up.status == 201);
  REQUIRE(HttpClient::Fetch("PUT", up.json()["url"].get<std::string>(), photos).status / 100 == 2);
  auto submit = [&](const std::string& file_url) {
    Json files = ModelFilesToJson(m->files);
    files.push_back({{"path", "scheduler/scheduler_config.json"},
                     {"url", file_url},
                     {"sha256", Sha256Hex("{}")},
                     {"size", 2}});
    Json body = {{"kind", "lora-sd"},
                 {"params", {{"steps", 5}}},
                 {"max_failures", 1},
                 {"model", {{"files", files}}},
                 {"dataset", {{"uri", up.json()["uri"]}, {"sha256", Sha256Hex(photos)}}}};
    HttpResult r = client.Post("/v1/jobs", body);
    INFO(r.Describe());
    REQUIRE(r.status == 201);
    return r.json()["id"].get<std::string>();
  };
  const std::string port = std::to_string(secret.port);
  const std::vector<std::string> direct = {
      secret_url, "http://[::1]:" + port + "/secret", "http://10.255.255.1:" + port + "/secret",
      "http://169.254.169.254/latest/meta-data/iam/security-credentials/"};
  std::vector<std::string> ids;
  for (const std::string& u : direct) ids.push_back(submit(u));

  // What the developer sees of a job: its view and its events, with the one fixed reason.
  auto check_developer_view = [&](const std::string& id) {
    Json job = fleet.Job(id), events = fleet.Events(id);
    INFO(DumpJson(job) << "\n" << DumpJson(events));
    CHECK(job.value("state", "") == "failed");
    // An input error, confirmed by a node of another machine: no node fault, both reports show
    // only the fixed reason.
    CHECK(events["failures"].empty());
    REQUIRE(events.contains("input_errors"));
    REQUIRE(events["input_errors"].size() == 2);
    for (const Json& e : events["input_errors"]) {
      CHECK(e.value("reason", "") == "model file unavailable");
    }
    const std::string seen = DumpJson(job) + DumpJson(events);
    for (const char* leak : {"refused to connect", "(loopback)", "(private)", "(link-local)",
                             "HTTP 302", "admin only", "s3cr3t", "sha256 mismatch"}) {
      CHECK(seen.find(leak) == std::string::npos);
    }
  };

  // Two machines: an input error is confirmed by a node of another machine before the job fails.
  std::string error;
  AgentProcess& a =
      fleet.AddAgent("a", {}, {"--trainer", BinPath("../tests/model-folder-trainer")});
  AgentProcess& c =
      fleet.AddAgent("c", {}, {"--trainer", BinPath("../tests/model-folder-trainer")});
  REQUIRE(a.Start(&error));
  REQUIRE(c.Start(&error));
  REQUIRE(fleet.WaitAllFinal(ids, Millis(60000)));
  INFO("agent a:\n" << a.Log() << "\nagent c:\n" << c.Log());
  for (const std::string& id : ids) check_developer_view(id);
  CHECK(secret.requests.load() == 0);
  // The nodes' own logs keep the detail (each job was tried on both).
  const std::string log = a.Log() + c.Log();
  CHECK(log.find("127.0.0.1 (loopback)") != std::string::npos);
  CHECK(log.find("::1 (loopback)") != std::string::npos);
  CHECK(log.find("10.255.255.1 (private)") != std::string::npos);
  CHECK(log.find("169.254.169.254 (link-local)") != std::string::npos);
  a.process().Stop();
  c.process().Stop();

  // Through a redirect: an owner who opted in to a LAN mirror (--allow-private-fetch) fetches
  // from it, but the mirror's redirect is not followed.
  const std::string redirected =
      submit("http://127.0.0.1:" + std::to_string(mirror.port) + "/model.json");
  AgentProcess& b = fleet.AddAgent(
      "b", {}, {"--trainer", BinPath("../tests/model-folder-trainer"), "--allow-private-fetch"});
  AgentProcess& d = fleet.AddAgent(
      "d", {}, {"--trainer", BinPath("../tests/model-folder-trainer"), "--allow-private-fetch"});
  REQUIRE(b.Start(&error));
  REQUIRE(d.Start(&error));
  REQUIRE(fleet.WaitAllFinal({redirected}, Millis(60000)));
  INFO("agent b:\n" << b.Log() << "\nagent d:\n" << d.Log());
  check_developer_view(redirected);
  CHECK(mirror.requests.load() >= 2);
  CHECK(secret.requests.load() == 0);
  CHECK(b.Log().find("HTTP 302") != std::string::npos);
  CHECK(d.Log().find("HTTP 302") != std::string::npos);
}

TEST_CASE("gleaner models and jobs submit: bad usage and bad folders are one line, non-zero",
          "[cli][models]") {
  TempDir dir("gleaner-models-cli");
  const std::string url = "http://127.0.0.1:9", tok = "glt_x";  // never reached
  MakePhotos(dir.File("photos"));
  Put(dir.File("half/model_index.json"), "{}");
  Put(dir.File("half/unet/config.json"), "{}");
  Put(dir.File("bad.model.json"), "{\"format\":\"gleaner-model\",\"version\":1,\"files\":[]}");
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string line;
  };
  const std::vector<Case> cases = {
      {{"jobs", "submit", "--images", dir.File("photos"), "--instance-prompt", "x"},
       1,
       "gleaner: usage: gleaner jobs submit --images DIR --instance-prompt TEXT --model "
       "MANIFEST|DIR [--train-text-encoder] [--class-images DIR --class-prompt TEXT] [--steps N] "
       "[--params JSON] [--wait]"},
      {{"jobs", "submit", "--images", dir.File("photos"), "--instance-prompt", "x", "--model",
        dir.File("bad.model.json"), "--class-images", dir.File("photos")},
       1,
       "gleaner: --class-images and --class-prompt go together"},
      {{"jobs", "submit", "--images", dir.File("nope"), "--instance-prompt", "x", "--model",
        dir.File("bad.model.json")},
       1,
       "gleaner: --images " + dir.File("nope") + " is not a folder"},
      {{"jobs", "submit", "--images", dir.File("photos"), "--instance-prompt", "x", "--model",
        dir.File("bad.model.json"), "--steps", "-3"},
       1,
       "gleaner: --steps must be a positive integer"},
      {{"jobs", "submit", "--images", dir.File("photos"), "--instance-prompt", "x", "--model",
        dir.File("bad.model.json")},
       5,
       "gleaner: " + dir.File("bad.model.json") +
           ": model manifest: files must be an array of 1 to 256 files"},
      {{"models", "upload", dir.File("half")},
       5,
       "gleaner: " + dir.File("half") +
           ": not a diffusers folder: missing unet/*.safetensors, vae/config.json, "
           "vae/*.safetensors, text_encoder/config.json, text_encoder/*.safetensors, "
           "tokenizer/vocab.json, tokenizer/merges.txt"},
      {{"models", "upload"},
       1,
       "gleaner: usage: gleaner models upload DIR [--name NAME] [-o MANIFEST]"},
      {{"models", "check", dir.File("bad.model.json")},
       5,
       "gleaner: " + dir.File("bad.model.json") +
           ": model manifest: files must be an array of 1 to 256 files"},
      {{"models", "frobnicate"},
       1,
       "gleaner: usage: gleaner models upload DIR [--name NAME] [-o MANIFEST] | gleaner models "
       "check MANIFEST"},
  };
  for (const Case& c : cases) {
    ToolRun r = Gleaner(dir, url, tok, c.args);
    INFO(c.args[0] << " " << c.args[1]);
    CHECK(r.code == c.code);
    CHECK(r.err == c.line + "\n");
    CHECK(r.out.empty());
  }
}

TEST_CASE("an agent killed mid-download fetches only the rest of the file after a restart",
          "[agent][e2e][models]") {
  ProxiedModelFleet f("gleaner-e2e-models-kill");
  TempDir& dir = f.dir;
  Fleet& fleet = f.fleet;
  FaultProxy& proxy = *f.proxy;
  const std::string url = f.url, dev = f.dev;
  const std::map<std::string, std::string> model = f.model;
  const int64_t model_bytes = f.model_bytes;
  std::string error;
  REQUIRE(Gleaner(dir, url, dev,
                  {"models", "upload", dir.File("sd-tiny"), "-o", dir.File("m.model.json")})
              .code == 0);
  ToolRun s = Gleaner(dir, url, dev,
                      {"jobs", "submit", "--images", dir.File("photos"), "--instance-prompt",
                       "a photo of sks dog", "--model", dir.File("m.model.json"), "--steps", "5"});
  REQUIRE(s.code == 0);
  const std::string id = s.out.substr(0, s.out.find('\n'));

  // A slow link (each 64 KiB chunk held 20 ms): the 4 MiB weights take over a second.
  proxy.SetDelay(Millis(20));
  const std::vector<std::string> args = {"--trainer", BinPath("../tests/model-folder-trainer")};
  AgentProcess& first = fleet.AddAgent("a", {}, args);
  REQUIRE(first.Start(&error));
  const std::string part = dir.File(
      "a/cache/" + Sha256Hex(model.at("unet/diffusion_pytorch_model.safetensors")) + ".part");
  REQUIRE(WaitUntil([&] { return ReadFile(part).size() >= (1u << 20); }, Millis(30000)));
  first.process().Signal(SIGKILL);
  REQUIRE(first.process().Wait(Millis(10000)).has_value());
  const int64_t have = int64_t(ReadFile(part).size());
  REQUIRE(have < int64_t(kUnetBytes));

  proxy.SetDelay(Millis(0));
  const int64_t base = proxy.upstream_bytes();
  AgentProcess& second = fleet.AddAgent("a", {}, args);
  REQUIRE(second.Start(&error));
  const bool final = fleet.WaitAllFinal({id}, Millis(60000));
  INFO("agent after the restart:\n" << second.Log());
  REQUIRE(final);
  CHECK(fleet.Job(id).value("state", "") == "completed");
  const int64_t used = proxy.upstream_bytes() - base;
  // The restarted agent asked for the weights from byte `have` (>= 1 MiB) on, and fetched the
  // small files it had not reached, the dataset and its output's answer; the slack also covers
  // a chunk the proxy may still have read for the killed agent. Starting over would cost `have`
  // more.
  CHECK(used >= int64_t(kUnetBytes) - have);
  CHECK(used < model_bytes - have + 256 * 1024);
  CHECK(Output(fleet, id, "inputs.txt").find(Listing(model)) == 0);
  CHECK(PartFiles(dir.File("a/cache")).empty());
}
