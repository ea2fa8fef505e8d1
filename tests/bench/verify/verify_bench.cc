// bench_verify: verified training (docs/architecture.md "Verified training") in a fleet with
// dishonest nodes. A real gleaner-coordinator; honest and dishonest replay nodes
// (tests/integration/replay_node.h: an exact hash-chain trainer, test-only forgeries) driven
// from one thread in a shuffled order each round; jobs submitted with --fraction.
//   bench_verify [--honest 16] [--dishonest 4] [--jobs 60] [--steps 100] [--every 10]
//                [--fraction 0.1] [--seed 1] [--max-rounds 5000] [--max-wait S]
// Dishonest node i forges as kPerturb, kOtherJob, kSkipSteps, kForgeOutput in turn (i mod 4).
// --max-wait: the coordinator's verify-max-wait (seconds of wall time; default its own, 600 s,
// which a run never reaches, so replays wait for idle nodes; 0: every open replay goes ahead of
// queued jobs for verifying nodes).
// Reports: dishonest nodes quarantined (detection rate) and honest ones (false positives),
// forged checkpoints accepted and how many were caught, jobs whose result is not the honest one,
// jobs delivered with a forged output and completed jobs reopened by a cheater's taint,
// the replay overhead (steps replayed / steps trained) and the rework rewinds caused, and the
// time to quarantine a cheater (its accepted forgeries and the fleet rounds until then).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "shared/sha256.h"
#include "tests/integration/coordinator_fixture.h"
#include "tests/integration/replay_node.h"

using namespace gleaner;
using namespace gleaner::testing;

namespace {

struct Args {
  int honest = 16, dishonest = 4, jobs = 60;
  int64_t steps = 100, every = 10;
  double fraction = 0.1;
  unsigned seed = 1;
  int max_rounds = 5000;
  std::string max_wait;  // "" = the coordinator's default
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--honest")
      a->honest = std::atoi(v);
    else if (k == "--dishonest")
      a->dishonest = std::atoi(v);
    else if (k == "--jobs")
      a->jobs = std::atoi(v);
    else if (k == "--steps")
      a->steps = std::atoll(v);
    else if (k == "--every")
      a->every = std::atoll(v);
    else if (k == "--fraction")
      a->fraction = std::atof(v);
    else if (k == "--seed")
      a->seed = unsigned(std::atoi(v));
    else if (k == "--max-rounds")
      a->max_rounds = std::atoi(v);
    else if (k == "--max-wait")
      a->max_wait = v;
    else
      return false;
  }
  return (argc % 2) == 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: bench_verify [--honest N] [--dishonest N] [--jobs N] [--steps N] "
                 "[--every N] [--fraction F] [--seed N] [--max-rounds N] [--max-wait S]\n");
    return 64;
  }
  TempDir dir("gleaner-bench-verify");
  CoordinatorOptions o;
  o.stall_after_s = 600;  // one thread drives the fleet: leases must not stall meanwhile
  if (!a.max_wait.empty()) o.extra_args = {"--verify-max-wait", a.max_wait};
  CoordinatorProcess coord(dir.path(), o);
  std::string error;
  if (!coord.Start(&error)) {
    std::fprintf(stderr, "bench_verify: %s\n", error.c_str());
    return 1;
  }
  auto dev_token = CreateKey(coord, "developer", &error);
  auto enroll = dev_token ? CreateKey(coord, "enroll", &error) : std::nullopt;
  if (!enroll) {
    std::fprintf(stderr, "bench_verify: %s\n", error.c_str());
    return 1;
  }
  HttpClient dev = coord.Client(*dev_token);
  std::vector<ReplayNode> nodes;
  const Forgery kinds[] = {Forgery::kPerturb, Forgery::kOtherJob, Forgery::kSkipSteps,
                           Forgery::kForgeOutput};
  for (int i = 0; i < a.honest + a.dishonest; ++i) {
    auto cred = RegisterNode(coord, *enroll, "bench-" + std::to_string(i), 8192, &error);
    if (!cred) {
      std::fprintf(stderr, "bench_verify: %s\n", error.c_str());
      return 1;
    }
    Forgery f = i < a.dishonest ? kinds[i % 4] : Forgery::kNone;
    nodes.emplace_back(cred->id, coord.Client(cred->token), f, a.every);
  }
  std::vector<std::string> jobs;
  for (int j = 0; j < a.jobs; ++j) {
    auto id = SubmitSyntheticJob(dev, a.steps, a.every, &error, {{"verify_fraction", a.fraction}});
    if (!id) {
      std::fprintf(stderr, "bench_verify: %s\n", error.c_str());
      return 1;
    }
    jobs.push_back(*id);
  }
  auto events = [&](const std::string& job) {
    return dev.Get("/v1/jobs/" + job + "/events").json();
  };
  auto settled = [&] {
    for (const std::string& j : jobs) {
      Json e = events(j);
      if (e["job"]["state"] != "completed" || e["job"]["verification"]["open"] != 0) return false;
    }
    return true;
  };

  std::mt19937 rng(a.seed);
  std::vector<size_t> order(nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::map<std::string, int> quarantined_round;  // node -> first round it saw 204 quarantined
  std::map<std::string, size_t> forged_by_then;  // node -> forged commits accepted by then
  const auto start = std::chrono::steady_clock::now();
  int round = 0;
  for (; round < a.max_rounds; ++round) {
    if (round % 20 == 0 && settled()) break;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      ReplayNode& n = nodes[i];
      if (!n.Step(&error)) {
        std::fprintf(stderr, "bench_verify: %s\n", error.c_str());
        return 1;
      }
      if (n.saw_quarantine() && !quarantined_round.count(n.id())) {
        quarantined_round[n.id()] = round;
        size_t forged = 0;
        for (const Upload& u : n.uploads()) forged += u.forged && !u.verification;
        forged_by_then[n.id()] = forged;
      }
    }
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool done = settled();

  // Node states from the coordinator.
  Json listing = coord.OperatorClient().Get("/v1/nodes?limit=500").json();
  std::map<std::string, std::string> state;
  for (const Json& n : listing["nodes"]) state[n["id"]] = n["state"];
  int dishonest_active = 0, dishonest_caught = 0, honest_quarantined = 0;
  for (const ReplayNode& n : nodes) {
    if (n.forgery() == Forgery::kNone) {
      honest_quarantined += state[n.id()] == "quarantined";
    } else if (std::any_of(n.uploads().begin(), n.uploads().end(),
                           [](const Upload& u) { return u.forged; })) {
      ++dishonest_active;
      dishonest_caught += state[n.id()] == "quarantined";
    }
  }
  // Forged checkpoints accepted from dishonest trainers, and their fate.
  std::map<std::pair<std::string, int64_t>, std::vector<Json>> by_segment;
  int jobs_honest = 0, jobs_forged = 0, reopened = 0, unverifiable = 0;
  for (const std::string& j : jobs) {
    const Json e = events(j);
    bool honest =
        e["job"]["state"] == "completed" && e["job"]["outputs"].size() == 1 &&
        e["job"]["outputs"][0]["sha256"] == Sha256Hex(ReplayNode::HonestOutput(j, a.steps));
    jobs_honest += honest;
    // Delivered (completed) with an output that is not the honest one.
    jobs_forged += e["job"]["state"] == "completed" && !honest;
    reopened += int(e["reopened"].size());
    unverifiable += e["job"]["verification"]["unverifiable"].get<int>();
    for (const Json& v : e["verifications"]) by_segment[{j, v["step"].get<int64_t>()}].push_back(v);
  }
  int forged = 0, forged_judged = 0, forged_voided = 0;
  int64_t trained = 0, replayed = 0;
  for (const ReplayNode& n : nodes) {
    trained += n.steps_trained();
    replayed += n.steps_replayed();
    for (const Upload& u : n.uploads()) {
      if (u.verification || !u.forged) continue;
      ++forged;
      bool judged = false, voided = false;
      for (const Json& v : by_segment[{u.job, u.step}]) {
        if (v["claimed_sha256"] != u.sha256) continue;
        // An output forger's checkpoint is honest: the replay that judged it is the one of its
        // outputs.
        if (!u.outputs.is_null() && v["claimed_outputs"] != u.outputs) continue;
        judged = judged || v["verdict"] == "trainer_bad" || v["verdict"] == "no_majority";
        voided = voided || v["state"] == "void";
      }
      forged_judged += judged;
      forged_voided += !judged && voided;
    }
  }
  const int64_t needed = int64_t(a.jobs) * a.steps;
  std::printf(
      "bench_verify: %d honest + %d dishonest nodes, %d jobs x %lld steps (every %lld), "
      "f = %.3f, seed %u\n",
      a.honest, a.dishonest, a.jobs, (long long)a.steps, (long long)a.every, a.fraction, a.seed);
  std::printf("  settled: %s after %d rounds (%.1f s wall)\n", done ? "yes" : "NO", round, wall);
  std::printf(
      "  dishonest nodes that uploaded a forgery: %d, quarantined: %d (detection rate %.0f%%)\n",
      dishonest_active, dishonest_caught,
      dishonest_active ? 100.0 * dishonest_caught / dishonest_active : 0.0);
  std::printf("  honest nodes quarantined (false positives): %d of %d\n", honest_quarantined,
              a.honest);
  std::printf(
      "  forged checkpoints accepted: %d; judged bad: %d; discarded with an earlier bad "
      "one: %d; never checked: %d\n",
      forged, forged_judged, forged_voided, forged - forged_judged - forged_voided);
  std::printf("  jobs with the honest result: %d of %d; completed with a forged output: %d\n",
              jobs_honest, a.jobs, jobs_forged);
  std::printf(
      "  completed jobs reopened (a forger in their lineage): %d; unverifiable replays: %d\n",
      reopened, unverifiable);
  std::printf(
      "  steps trained %lld (needed %lld: rework %.1f%%), replayed %lld (overhead %.1f%% of "
      "trained)\n",
      (long long)trained, (long long)needed, 100.0 * double(trained - needed) / double(needed),
      (long long)replayed, 100.0 * double(replayed) / double(trained));
  std::printf("  replayed / steps needed (rework excluded from the base): %.1f%%\n",
              100.0 * double(replayed) / double(needed));
  static const char* const kForgeryNames[] = {"honest", "perturb", "other-job", "skip-steps",
                                              "forge-output"};
  for (const ReplayNode& n : nodes) {
    if (n.forgery() == Forgery::kNone || n.uploads().empty()) continue;
    const char* kind = kForgeryNames[int(n.forgery())];
    auto it = quarantined_round.find(n.id());
    if (it == quarantined_round.end()) {
      std::printf("  cheater %s (%s): not quarantined\n", n.id().c_str(), kind);
    } else {
      std::printf("  cheater %s (%s): quarantined in round %d after %zu accepted forgeries\n",
                  n.id().c_str(), kind, it->second, forged_by_then[n.id()]);
    }
  }
  return done && honest_quarantined == 0 && jobs_forged == 0 ? 0 : 1;
}
