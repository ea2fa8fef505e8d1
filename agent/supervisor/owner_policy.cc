#include "agent/supervisor/owner_policy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace gleaner::agent {
namespace {

const char* const kDays[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string Lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    size_t n = s.find(sep, pos);
    out.push_back(Trim(s.substr(pos, n == std::string::npos ? std::string::npos : n - pos)));
    if (n == std::string::npos) return out;
    pos = n + 1;
  }
}

int DayIndex(const std::string& name) {
  std::string l = Lower(name);
  for (int i = 0; i < 7; ++i) {
    if (l == kDays[i]) return i;
  }
  return -1;
}

// "HH:MM" → minutes; 24:00 allowed only as an end.
bool ParseClock(const std::string& s, bool is_end, int* out) {
  if (s.size() != 5 || s[2] != ':' || !std::isdigit(static_cast<unsigned char>(s[0])) ||
      !std::isdigit(static_cast<unsigned char>(s[1])) ||
      !std::isdigit(static_cast<unsigned char>(s[3])) ||
      !std::isdigit(static_cast<unsigned char>(s[4]))) {
    return false;
  }
  int h = (s[0] - '0') * 10 + (s[1] - '0'), m = (s[3] - '0') * 10 + (s[4] - '0');
  if (m > 59 || h > 24 || (h == 24 && (m != 0 || !is_end))) return false;
  *out = h * 60 + m;
  return true;
}

bool ParseDays(const std::string& s, uint8_t* mask) {
  size_t dash = s.find('-');
  int a = DayIndex(s.substr(0, dash));
  int b = dash == std::string::npos ? a : DayIndex(s.substr(dash + 1));
  if (a < 0 || b < 0) return false;
  *mask = 0;
  for (int d = a;; d = (d + 1) % 7) {
    *mask = uint8_t(*mask | (1 << d));
    if (d == b) break;
  }
  return true;
}

bool ParseNumber(const std::string& s, double lo, double hi, double* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

std::string FormatMinutes(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", seconds / 60.0);
  return buf;
}

}  // namespace

Result<std::vector<TimeWindow>> ParseTimeWindows(const std::string& text) {
  std::vector<TimeWindow> out;
  for (const std::string& item : Split(text, ',')) {
    auto bad = [&item](const char* why) {
      return Status::Invalid("work hours '" + item + "': " + why +
                             " (expected e.g. 'Mon-Fri 22:00-07:00')");
    };
    if (item.empty()) return bad("empty window");
    TimeWindow w;
    std::string range = item;
    size_t sp = item.find(' ');
    if (sp != std::string::npos) {
      if (!ParseDays(Trim(item.substr(0, sp)), &w.days)) return bad("unknown day");
      range = Trim(item.substr(sp + 1));
    }
    size_t dash = range.find('-');
    if (dash == std::string::npos || !ParseClock(range.substr(0, dash), false, &w.start_min) ||
        !ParseClock(range.substr(dash + 1), true, &w.end_min)) {
      return bad("bad time range");
    }
    if (w.end_min == 0) w.end_min = 1440;  // "22:00-00:00" = until midnight
    if (w.start_min == w.end_min) return bad("empty time range");
    out.push_back(w);
  }
  return out;
}

bool InWindows(const std::vector<TimeWindow>& windows, int weekday, int minute_of_day) {
  if (windows.empty()) return true;
  int yesterday = (weekday + 6) % 7;
  for (const TimeWindow& w : windows) {
    if (w.start_min < w.end_min) {
      if ((w.days >> weekday & 1) && minute_of_day >= w.start_min && minute_of_day < w.end_min) {
        return true;
      }
    } else {
      // Crosses midnight: the evening part on its own day, the morning part on the next.
      if ((w.days >> weekday & 1) && minute_of_day >= w.start_min) return true;
      if ((w.days >> yesterday & 1) && minute_of_day < w.end_min) return true;
    }
  }
  return false;
}

Result<std::vector<std::string>> ParseGpuList(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& g : Split(text, ',')) {
    bool index = !g.empty() && g.size() <= 3;
    for (char c : g) index = index && std::isdigit(static_cast<unsigned char>(c));
    bool uuid =
        (g.rfind("GPU-", 0) == 0 || g.rfind("MIG-", 0) == 0) && g.size() > 4 && g.size() <= 96;
    for (size_t i = 4; uuid && i < g.size(); ++i) {
      char c = g[i];
      uuid = std::isxdigit(static_cast<unsigned char>(c)) || c == '-' || c == '/';
    }
    if (!index && !uuid) {
      return Status::Invalid("gpus: '" + g + "' is neither a GPU index nor a GPU-/MIG- UUID");
    }
    out.push_back(g);
  }
  return out;
}

std::string CudaVisibleDevices(const std::vector<std::string>& gpus) {
  std::string s;
  for (const std::string& g : gpus) s += (s.empty() ? "" : ",") + g;
  return s;
}

Result<std::vector<std::string>> ParseProgramList(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& p : Split(text, ',')) {
    if (p.empty() || p.find('/') != std::string::npos || p.size() > 255) {
      return Status::Invalid("pause-programs: '" + p +
                             "' is not a program name (a file name without '/')");
    }
    out.push_back(p);
  }
  return out;
}

bool ProgramMatches(const std::string& name, const ProcessName& p) {
  std::string n = Lower(name), comm = Lower(p.comm);
  if (!comm.empty() && (comm == n || (comm.size() == 15 && n.compare(0, 15, comm) == 0))) {
    return true;
  }
  return !p.argv0.empty() && Lower(p.argv0) == n;
}

int64_t AdvertisedVramMb(int64_t detected_mb, int64_t max_vram_mb) {
  if (max_vram_mb <= 0) return detected_mb;
  return std::min(detected_mb, max_vram_mb);
}

OwnerDecision OwnerPolicy::Evaluate(const OwnerReadings& r) {
  // Temperature first: its hysteresis state follows every reading, whatever else says no.
  if (c_.max_gpu_temp_c > 0 && r.gpu_temp_c) {
    if (!hot_ && *r.gpu_temp_c >= c_.max_gpu_temp_c) hot_ = true;
    if (hot_ && *r.gpu_temp_c <= c_.max_gpu_temp_c - c_.temp_hysteresis_c) hot_ = false;
  } else {
    hot_ = false;
  }
  if (r.paused) return {false, "paused by the owner"};
  if (!InWindows(c_.work_hours, r.weekday, r.minute_of_day)) {
    return {false, "outside work hours (" + c_.work_hours_text + ")"};
  }
  for (const std::string& name : c_.pause_programs) {
    for (const ProcessName& p : r.processes) {
      if (ProgramMatches(name, p)) return {false, "program '" + name + "' is running"};
    }
  }
  if (hot_) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "GPU at %.0f C (limit %.0f C, resumes at %.0f C)",
                  r.gpu_temp_c.value_or(0), c_.max_gpu_temp_c,
                  c_.max_gpu_temp_c - c_.temp_hysteresis_c);
    return {false, buf};
  }
  if (c_.min_idle_s > 0 && r.idle_s && *r.idle_s < c_.min_idle_s) {
    return {false, "user active (idle " + FormatMinutes(*r.idle_s) + " of " +
                       FormatMinutes(c_.min_idle_s) + " minutes)"};
  }
  return {};
}

const char* const kOwnerConfigKeys[] = {
    "gpus",         "max-vram-mb",  "work-hours",           "pause-programs",
    "max-gpu-temp", "idle-minutes", "owner-check-interval", nullptr};

Status ParseOwnerControls(const std::map<std::string, std::string>& values, OwnerControls* out) {
  OwnerControls c;
  auto get = [&values](const char* k) -> const std::string* {
    auto it = values.find(k);
    return it == values.end() ? nullptr : &it->second;
  };
  if (const std::string* v = get("gpus")) {
    Result<std::vector<std::string>> g = ParseGpuList(*v);
    if (!g.ok()) return g.status();
    c.gpus = *g;
  }
  if (const std::string* v = get("work-hours")) {
    Result<std::vector<TimeWindow>> w = ParseTimeWindows(*v);
    if (!w.ok()) return w.status();
    c.work_hours = *w;
    c.work_hours_text = Trim(*v);
  }
  if (const std::string* v = get("pause-programs")) {
    Result<std::vector<std::string>> p = ParseProgramList(*v);
    if (!p.ok()) return p.status();
    c.pause_programs = *p;
  }
  double vram = 0, idle_min = 0;
  struct Num {
    const char* key;
    double lo, hi;
    double* out;
  } nums[] = {{"max-vram-mb", 1, 1e8, &vram},
              {"max-gpu-temp", 30, 120, &c.max_gpu_temp_c},
              {"idle-minutes", 0, 10080, &idle_min},
              {"owner-check-interval", 0.05, 3600, &c.check_interval_s}};
  for (const Num& n : nums) {
    const std::string* v = get(n.key);
    if (v != nullptr && !ParseNumber(*v, n.lo, n.hi, n.out)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "--%s must be a number in [%g, %g]", n.key, n.lo, n.hi);
      return Status::Invalid(buf);
    }
  }
  c.max_vram_mb = int64_t(vram);
  c.min_idle_s = idle_min * 60;
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace gleaner::agent
