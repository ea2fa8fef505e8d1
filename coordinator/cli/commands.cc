// The read and admin commands: status, list, logs, cancel, report, nodes, keys.
#include <cstdio>

#include "coordinator/cli/cli.h"

namespace gleaner::cli {
namespace {

std::string S(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "-";
  const Json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
    return buf;
  }
  return v.dump();
}

// Left-aligned columns, widths from the content.
void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t c = 0; c < header.size(); ++c) w[c] = header[c].size();
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t c = 0; c < r.size(); ++c) {
      out += r[c];
      if (c + 1 < r.size()) out += std::string(w[c] - r[c].size() + 2, ' ');
    }
    std::printf("%s\n", out.c_str());
  };
  line(header);
  for (const auto& r : rows) line(r);
}

// The member `key` when it has the wanted type, else an empty value of that type (nlohmann's
// value() can throw, which Gleaner never lets it do).
const Json& Member(const Json& j, const char* key, Json::value_t type) {
  static const Json kArray = Json::array(), kObject = Json::object();
  if (j.is_object() && j.contains(key) && j[key].type() == type) return j[key];
  return type == Json::value_t::array ? kArray : kObject;
}
const Json& Arr(const Json& j, const char* key) {
  return Member(j, key, Json::value_t::array);
}
const Json& Obj(const Json& j, const char* key) {
  return Member(j, key, Json::value_t::object);
}

int NeedId(const Args& a, const char* usage) {
  if (a.words.size() != 1) return Report({kExitUsage, std::string("usage: ") + usage});
  return kExitOk;
}

std::string Enc(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == ':') {
      out.push_back(char(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace

int Report(const Failure& f) {
  if (!f.ok()) std::fprintf(stderr, "gleaner: %s\n", f.message.c_str());
  return f.code;
}

void PrintJson(const Json& j) {
  std::printf("%s\n", j.dump(2).c_str());
}

int CmdStatus(Api& api, const Args& a) {
  if (int rc = NeedId(a, "gleaner status ID [--json]")) return rc;
  Reply r;
  if (Failure f = api.Call("GET", "/v1/jobs/" + Enc(a.words[0]), nullptr, &r); !f.ok()) {
    return Report(f);
  }
  if (a.Has("json")) {
    PrintJson(r.json);
    return kExitOk;
  }
  const Json& j = r.json;
  std::printf(
      "id        %s\nkind      %s\nstate     %s%s\nprogress  %s/%s\nattempts  %s "
      "(failures %s of %s)\nnode      %s\ncost_usd  %s\ncreated   %s\nfinished  %s\n",
      S(j, "id").c_str(), S(j, "kind").c_str(), S(j, "state").c_str(),
      j.contains("stalled") && j["stalled"].is_boolean() && j["stalled"].get<bool>() ? " (stalled)"
                                                                                     : "",
      S(j, "step").c_str(), S(j, "steps").c_str(), S(j, "attempts").c_str(),
      S(j, "failures").c_str(), S(j, "max_failures").c_str(), S(j, "node_id").c_str(),
      S(j, "cost_usd").c_str(), S(j, "created_at").c_str(), S(j, "finished_at").c_str());
  if (j.contains("reason") && j["reason"].is_string()) {
    std::printf("reason    %s\n", j["reason"].get<std::string>().c_str());
  }
  return kExitOk;
}

int CmdList(Api& api, const Args& a) {
  std::string q = "?limit=" + Enc(a.Flag("limit", "50"));
  if (a.Has("state")) q += "&state=" + Enc(a.Flag("state"));
  Reply r;
  if (Failure f = api.Call("GET", "/v1/jobs" + q, nullptr, &r); !f.ok()) return Report(f);
  if (a.Has("json")) {
    PrintJson(r.json);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Json& j : Arr(r.json, "jobs")) {
    rows.push_back({S(j, "id"), S(j, "kind"), S(j, "state"), S(j, "step") + "/" + S(j, "steps"),
                    S(j, "attempts"), S(j, "cost_usd"), S(j, "created_at")});
  }
  PrintTable({"ID", "KIND", "STATE", "PROGRESS", "ATTEMPTS", "COST_USD", "CREATED"}, rows);
  return kExitOk;
}

int CmdLogs(Api& api, const Args& a) {
  if (int rc = NeedId(a, "gleaner logs ID [--json]")) return rc;
  Reply r;
  if (Failure f = api.Call("GET", "/v1/jobs/" + Enc(a.words[0]) + "/events", nullptr, &r);
      !f.ok()) {
    return Report(f);
  }
  if (a.Has("json")) {
    PrintJson(r.json);
    return kExitOk;
  }
  const Json& job = Obj(r.json, "job");
  std::printf("%s  created    %s\n", S(job, "created_at").c_str(), S(job, "id").c_str());
  for (const Json& s : Arr(r.json, "segments")) {
    std::printf("%s  lease %s  node %s (%s, $%s/h) from step %s\n", S(s, "started_at").c_str(),
                S(s, "epoch").c_str(), S(s, "node_id").c_str(), S(s, "gpu").c_str(),
                S(s, "usd_per_hour").c_str(), S(s, "step_start").c_str());
    std::printf(
        "%s  ended %s  %s heartbeats, step %s (committed %s), $%s%s%s\n", S(s, "ended_at").c_str(),
        S(s, "end_reason").c_str(), S(s, "heartbeats").c_str(), S(s, "step_end").c_str(),
        S(s, "step_committed").c_str(), S(s, "cost_usd").c_str(),
        s.contains("note") && s["note"].is_string() ? ": " : "",
        s.contains("note") && s["note"].is_string() ? s["note"].get<std::string>().c_str() : "");
  }
  for (const Json& c : Arr(r.json, "checkpoints")) {
    std::printf("%s  checkpoint step %s (lease %s, %s bytes)\n", S(c, "committed_at").c_str(),
                S(c, "step").c_str(), S(c, "epoch").c_str(), S(c, "size").c_str());
  }
  for (const Json& f : Arr(r.json, "failures")) {
    std::printf("%s  failure on %s: %s\n", S(f, "at").c_str(), S(f, "node_id").c_str(),
                S(f, "reason").c_str());
  }
  std::printf("state %s, step %s/%s, cost $%s\n", S(job, "state").c_str(), S(job, "step").c_str(),
              S(job, "steps").c_str(), S(job, "cost_usd").c_str());
  return kExitOk;
}

int CmdCancel(Api& api, const Args& a) {
  if (int rc = NeedId(a, "gleaner cancel ID [--reason TEXT]")) return rc;
  Json body = Json::object();
  if (a.Has("reason")) body["reason"] = a.Flag("reason");
  Reply r;
  if (Failure f = api.Call("POST", "/v1/jobs/" + Enc(a.words[0]) + "/cancel", &body, &r); !f.ok()) {
    return Report(f);
  }
  if (a.Has("json")) {
    PrintJson(r.json);
  } else {
    std::printf("%s %s\n", S(r.json, "id").c_str(), S(r.json, "state").c_str());
  }
  return kExitOk;
}

int CmdReport(Api& api, const Args& a) {
  std::string by = a.Flag("by", "job");
  std::string q = "?group_by=" + Enc(by) + "&format=" + (a.Has("csv") ? "csv" : "json");
  if (a.Has("from")) q += "&from=" + Enc(a.Flag("from"));
  if (a.Has("to")) q += "&to=" + Enc(a.Flag("to"));
  Reply r;
  if (Failure f = api.Call("GET", "/v1/reports/cost" + q, nullptr, &r); !f.ok()) return Report(f);
  if (a.Has("csv")) {
    std::fputs(r.body.c_str(), stdout);
    return kExitOk;
  }
  if (a.Has("json")) {
    PrintJson(r.json);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  auto row = [&](const std::string& key, const Json& g) {
    rows.push_back({key, S(g, "segments"), S(g, "steps"), S(g, "billable_seconds"),
                    S(g, "cost_usd"), S(g, "cost_per_step"), S(g, "wasted_cost_usd"),
                    S(g, "queue_wait_median_s"), S(g, "queue_wait_p95_s")});
  };
  for (const Json& g : Arr(r.json, "groups")) row(S(g, "key"), g);
  row("total", Obj(r.json, "totals"));
  PrintTable({by == "day"    ? "DAY"
              : by == "gpu"  ? "GPU"
              : by == "node" ? "NODE"
                             : "JOB",
              "SEGMENTS", "STEPS", "BILLABLE_S", "COST_USD", "USD/STEP", "WASTED_USD",
              "QUEUE_P50_S", "QUEUE_P95_S"},
             rows);
  return kExitOk;
}

int CmdNodes(Api& api, const Args& a) {
  if (!a.words.empty()) {
    // gleaner nodes quarantine|restore|revoke ID [--reason TEXT] [--extend-to-enroll-key]
    if (a.words.size() != 2 ||
        (a.words[0] != "quarantine" && a.words[0] != "restore" && a.words[0] != "revoke")) {
      return Report({kExitUsage,
                     "usage: gleaner nodes [quarantine|restore|revoke ID [--reason TEXT]] "
                     "(quarantine: [--extend-to-enroll-key])"});
    }
    Json body = Json::object();
    if (a.Has("reason")) body["reason"] = a.Flag("reason");
    if (a.Has("extend-to-enroll-key")) body["extend_to_enroll_key"] = true;
    Reply r;
    if (Failure f = api.Call("POST", "/v1/nodes/" + Enc(a.words[1]) + "/" + a.words[0], &body, &r);
        !f.ok()) {
      return Report(f);
    }
    if (a.Has("json")) {
      PrintJson(r.json);
    } else {
      std::printf("%s %s\n", S(r.json, "id").c_str(), S(r.json, "state").c_str());
    }
    return kExitOk;
  }
  Reply r;
  if (Failure f = api.Call("GET", "/v1/nodes", nullptr, &r); !f.ok()) return Report(f);
  if (a.Has("json")) {
    PrintJson(r.json);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Json& n : Arr(r.json, "nodes")) {
    const Json& gpu = Obj(n, "gpu");
    rows.push_back({S(n, "id"), S(n, "machine_id"), S(gpu, "name"), S(n, "state"),
                    S(n, "last_seen_at"), S(n, "jobs_completed"), S(n, "jobs_failed"),
                    std::to_string(Arr(n, "running_jobs").size())});
  }
  PrintTable({"ID", "MACHINE", "GPU", "STATE", "LAST_SEEN", "DONE", "FAILED", "RUNNING"}, rows);
  return kExitOk;
}

int CmdKeys(Api& api, const Args& a) {
  const std::string verb = a.words.empty() ? "" : a.words[0];
  if (verb == "list" && a.words.size() == 1) {
    Reply r;
    if (Failure f = api.Call("GET", "/v1/keys", nullptr, &r); !f.ok()) return Report(f);
    if (a.Has("json")) {
      PrintJson(r.json);
      return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const Json& k : Arr(r.json, "keys")) {
      rows.push_back(
          {S(k, "id"), S(k, "role"), S(k, "name"), S(k, "created_at"), S(k, "revoked_at")});
    }
    PrintTable({"ID", "ROLE", "NAME", "CREATED", "REVOKED"}, rows);
    return kExitOk;
  }
  if (verb == "revoke" && a.words.size() == 2) {
    Reply r;
    if (Failure f = api.Call("POST", "/v1/keys/" + Enc(a.words[1]) + "/revoke", nullptr, &r);
        !f.ok()) {
      return Report(f);
    }
    if (a.Has("json")) {
      PrintJson(r.json);
    } else {
      std::printf("%s revoked\n", S(r.json, "id").c_str());
    }
    return kExitOk;
  }
  if (verb != "create" || a.words.size() != 1 || !a.Has("role")) {
    return Report({kExitUsage,
                   "usage: gleaner keys create --role developer|enroll|operator [--name NAME] | "
                   "keys list | keys revoke ID"});
  }
  Json body = {{"role", a.Flag("role")}, {"name", a.Flag("name", a.Flag("role"))}};
  Reply r;
  if (Failure f = api.Call("POST", "/v1/keys", &body, &r); !f.ok()) return Report(f);
  if (a.Has("json")) {
    PrintJson(r.json);
  } else {
    std::printf("%s\n", S(r.json, "token").c_str());
  }
  return kExitOk;
}

}  // namespace gleaner::cli
