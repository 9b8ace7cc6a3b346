#include "graft/cost_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "engine/scoped_ms.h"
#include "graft/error.h"
#include "graft/sampling.h"

namespace graft {
namespace fs = std::filesystem;
namespace {

constexpr int kProfileVersion = 1;

std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown cpu";
}

std::string ModelKey(const Model& m) {
  char fp[17];
  snprintf(fp, sizeof(fp), "%016llx", static_cast<unsigned long long>(m.VocabFingerprint()));
  return m.Name() + " (" + m.Description() + ", " + std::to_string(m.size_bytes()) + " bytes, vocab " + fp + ")";
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string Today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Median ms of one pass over a random tree of each size 1..max_rows, on a scratch
// context holding `prefix` random tokens. Rounded to 1 us so the values survive the
// JSON round trip exactly.
std::vector<double> MeasureCurve(const Model& model, int32_t max_rows, const CostProfileOptions& o) {
  ContextOptions co;
  co.n_ctx = o.prefix + max_rows + 16;
  co.n_threads = o.n_threads;
  co.n_seq_max = std::clamp(max_rows, 1, 256);
  co.max_tree = max_rows;
  Context ctx(model, co);
  Rng rng(12345);
  auto random_token = [&] { return static_cast<Token>(rng.Next() % model.n_vocab()); };
  std::vector<Token> prefix(o.prefix);
  for (Token& t : prefix) t = random_token();
  ctx.Prefill(prefix, false);
  const int32_t base = ctx.n_past();
  auto time_pass = [&](int32_t n) {
    TokenTree t;
    t.Reset(random_token());
    while (t.size() < n) {
      const int32_t p = static_cast<int32_t>(rng.Next() % t.size());
      const Token x = random_token();
      if (t.depth[p] < 8 && t.FindChild(p, x) < 0) t.Add(p, x, 0.5f, Source::kDraft);
    }
    double ms = 0;
    {
      ScopedMs timer(&ms);
      ctx.EvalTree(t);
      ctx.Logits(n - 1);  // waits for the pass
    }
    ctx.CommitPath({0});
    ctx.Truncate(base);
    return ms;
  };
  time_pass(1);  // warm-up: the first pass pays for allocations
  std::vector<double> curve(max_rows + 1, 0.0);
  for (int32_t n = 1; n <= max_rows; ++n) {
    std::vector<double> ms;
    for (int32_t r = 0; r < std::max(1, o.repeats); ++r) ms.push_back(time_pass(n));
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    curve[n] = std::max(0.001, std::round(ms[ms.size() / 2] * 1000.0) / 1000.0);
  }
  return curve;
}

std::string DefaultDir() {
  if (const char* d = std::getenv("GRAFT_PROFILE_DIR"); d != nullptr && *d != '\0') return d;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/graft/profiles";
}

// The cached profile at `path` if it is readable, matches `key` and covers the sizes
// asked for; nullopt otherwise (a stale or foreign file is simply re-measured).
std::optional<CostProfile> TryLoad(const std::string& path, const std::string& key, const CostProfileOptions& o,
                                   bool need_draft) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.at("version").get<int>() != kProfileVersion || j.at("key").get<std::string>() != key) return std::nullopt;
    CostProfile p;
    p.key = key;
    p.verify_ms = j.at("verify_ms").get<std::vector<double>>();
    p.draft_ms = j.at("draft_ms").get<std::vector<double>>();
    p.measured_at = j.value("measured_at", "");
    if (static_cast<int32_t>(p.verify_ms.size()) < o.max_rows + 1) return std::nullopt;
    if (need_draft && static_cast<int32_t>(p.draft_ms.size()) < o.max_draft_rows + 1) return std::nullopt;
    for (size_t n = 1; n < p.verify_ms.size(); ++n) if (!(p.verify_ms[n] > 0)) return std::nullopt;
    for (size_t n = 1; n < p.draft_ms.size(); ++n) if (!(p.draft_ms[n] > 0)) return std::nullopt;
    return p;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::string CostProfileKey(const Model& target, const Model* draft, const CostProfileOptions& o) {
  return "target " + ModelKey(target) + "; draft " + (draft != nullptr ? ModelKey(*draft) : "none") + "; threads " +
         std::to_string(o.n_threads) + "; prefix " + std::to_string(o.prefix) + "; cpu " + CpuName() + " x" +
         std::to_string(std::thread::hardware_concurrency()) + "; " + LlamaBuildInfo();
}

std::string CostProfilePath(const std::string& key, const CostProfileOptions& o) {
  char name[40];
  snprintf(name, sizeof(name), "%016llx.json", static_cast<unsigned long long>(Fnv1a(key)));
  return (fs::path(o.dir.empty() ? DefaultDir() : o.dir) / name).string();
}

CostProfile MeasureCostProfile(const Model& target, const Model* draft, const CostProfileOptions& o) {
  if (o.max_rows < 1 || o.max_draft_rows < 1 || o.prefix < 1) throw Error("cost profile sizes must be at least 1");
  CostProfile p;
  p.key = CostProfileKey(target, draft, o);
  p.verify_ms = MeasureCurve(target, o.max_rows, o);
  if (draft != nullptr) p.draft_ms = MeasureCurve(*draft, o.max_draft_rows, o);
  p.measured_at = Today();
  return p;
}

void SaveCostProfile(const CostProfile& p, const CostProfileOptions& o) {
  const fs::path path = CostProfilePath(p.key, o);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) throw Error("cannot create the profile folder " + path.parent_path().string() + ": " + ec.message());
  const nlohmann::json j = {{"version", kProfileVersion}, {"key", p.key},           {"measured_at", p.measured_at},
                            {"verify_ms", p.verify_ms},   {"draft_ms", p.draft_ms}};
  const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1) << "\n";
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      throw Error("cannot write the cost profile " + tmp);
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot write the cost profile " + path.string() + ": " + ec.message());
  }
}

CostProfile LoadOrMeasureCostProfile(const Model& target, const Model* draft, const CostProfileOptions& o,
                                     double* measured_ms) {
  if (measured_ms != nullptr) *measured_ms = 0;
  const std::string key = CostProfileKey(target, draft, o);
  const std::string path = CostProfilePath(key, o);
  if (auto p = TryLoad(path, key, o, draft != nullptr)) return *p;
  double ms = 0;
  CostProfile p;
  {
    ScopedMs timer(&ms);
    p = MeasureCostProfile(target, draft, o);
  }
  if (measured_ms != nullptr) *measured_ms = ms;
  try {
    SaveCostProfile(p, o);
  } catch (const Error& e) {
    fprintf(stderr, "graft: warning: %s (the profile will be measured again next time)\n", e.what());
  }
  return p;
}

}  // namespace graft
