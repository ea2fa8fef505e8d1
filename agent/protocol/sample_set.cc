#include "agent/protocol/sample_set.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "agent/protocol/checkpoint_dir.h"
#include "shared/job_params.h"
#include "shared/native/files.h"

namespace gleaner::train {

std::string SampleDirFor(const std::string& work_dir, int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%010lld", static_cast<long long>(step));
  return files::Join(files::Join(work_dir, "samples"), buf);
}

std::string SampleImageName(int i) {
  return std::to_string(i) + ".png";
}

Result<SampleSet> SampleSetFromParams(const Json& params) {
  auto it = params.find("sample_prompts");
  if (it == params.end() || !it->is_array() || it->empty()) {
    return Status::NotFound("the job asks for no samples");
  }
  Json j = {{"format", kSampleSetFormat},
            {"version", kSampleSetVersion},
            {"step", 0},
            {"seed", params.value("sample_seed", int64_t(0))},
            {"seconds", 0.0},
            {"resolution", params.value("sample_resolution", int64_t(512))},
            {"sample_steps", params.value("sample_steps", int64_t(25))},
            {"guidance_scale", params.value("guidance_scale", 7.5)},
            {"prompts", *it}};
  return ParseSampleSet(DumpJson(j));
}

bool SampleDue(int64_t step, int64_t steps, int64_t sample_every) {
  return step > 0 && (step == steps || (sample_every > 0 && step % sample_every == 0));
}

std::string SampleSetToJson(const SampleSet& set) {
  Json prompts = Json::array();
  for (const SamplePrompt& p : set.prompts) {
    prompts.push_back({{"prompt", p.prompt}, {"negative_prompt", p.negative_prompt}});
  }
  return DumpJson({{"format", kSampleSetFormat},
                   {"version", kSampleSetVersion},
                   {"step", set.step},
                   {"seed", set.seed},
                   {"seconds", set.seconds},
                   {"resolution", set.resolution},
                   {"sample_steps", set.sample_steps},
                   {"guidance_scale", set.guidance_scale},
                   {"prompts", prompts}});
}

Result<SampleSet> ParseSampleSet(const std::string& text) {
  if (text.size() > (1 << 20)) return Status::Corruption("samples.json larger than 1 MiB");
  Result<Json> parsed = ParseJson(text);
  if (!parsed.ok()) return Status::Corruption("samples.json: " + parsed.status().message());
  const Json& j = *parsed;
  FieldReader r(j, "samples.");
  std::string format;
  int64_t version = 0;
  SampleSet s;
  r.String("format", &format, true, 64);
  r.Int("version", &version, true, 1, 1000);
  r.Int("step", &s.step, true, 0, kMaxJobSteps);
  r.Int("seed", &s.seed, true, 0, kMaxSafeInteger);
  r.Number("seconds", &s.seconds, true, 0, 1e9);
  r.Int("resolution", &s.resolution, true, 8, 4096);
  r.Int("sample_steps", &s.sample_steps, true, 1, 1000);
  r.Number("guidance_scale", &s.guidance_scale, true, 0, 100);
  if (!r.ok()) return Status::Corruption(r.status().message());
  if (format != kSampleSetFormat) return Status::Corruption("samples.format is not " + format);
  if (version != kSampleSetVersion) {
    return Status::Corruption("samples.version " + std::to_string(version) + " is not supported");
  }
  auto it = j.find("prompts");
  if (it == j.end() || !it->is_array() || it->empty() || it->size() > kMaxSampleImages) {
    return Status::Corruption("samples.prompts must be an array of 1 to 8 prompts");
  }
  for (const Json& p : *it) {
    FieldReader pr(p, "samples.prompts[].");
    SamplePrompt sp;
    pr.String("prompt", &sp.prompt, true, kMaxSamplePromptChars);
    pr.String("negative_prompt", &sp.negative_prompt, false, kMaxSamplePromptChars);
    if (!pr.ok()) return Status::Corruption(pr.status().message());
    s.prompts.push_back(std::move(sp));
  }
  return s;
}

Status WriteSampleSet(const std::string& dir, const std::string& kind, const std::string& job_id,
                      const SampleSet& set, const std::vector<std::string>& pngs) {
  if (pngs.size() != set.prompts.size() || pngs.empty()) {
    return Status::Invalid("a sample set needs one image per prompt");
  }
  Result<CheckpointWriter> w = CheckpointWriter::Begin(dir);
  if (!w.ok()) return w.status();
  for (size_t i = 0; i < pngs.size(); ++i) {
    GLEANER_RETURN_IF_ERROR(w->AddFile(SampleImageName(int(i)), pngs[i]));
  }
  GLEANER_RETURN_IF_ERROR(w->AddFile(kSampleSetName, SampleSetToJson(set)));
  return w->Commit(kind, job_id, set.step);
}

Result<SampleSet> VerifySampleDir(const std::string& dir) {
  Result<CheckpointManifest> m = VerifyCheckpointDir(dir);
  if (!m.ok()) return m.status();
  Result<std::string> text = files::ReadAll(files::Join(dir, kSampleSetName), 1 << 20);
  if (!text.ok()) return text.status();
  Result<SampleSet> set = ParseSampleSet(*text);
  if (!set.ok()) return set.status();
  if (set->step != m->step) return Status::Corruption("samples.json step differs from manifest");
  std::set<std::string> expected = {kSampleSetName};
  for (size_t i = 0; i < set->prompts.size(); ++i) expected.insert(SampleImageName(int(i)));
  std::set<std::string> listed;
  for (const ManifestFile& f : m->files) listed.insert(f.name);
  if (listed != expected) {
    return Status::Corruption("sample directory must hold <i>.png per prompt and samples.json");
  }
  return set;
}

}  // namespace gleaner::train
