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
#include <memory>
#include <optional>
#include <thread>

#include "engine/scoped_ms.h"
#include "graft/atomic_file.h"
#include "graft/error.h"
#include "graft/sampling.h"

namespace graft {
namespace fs = std::filesystem;
namespace {

// 2: each curve's passes follow a settling pass (MedianCurves); version 1 priced the
// first size of each curve too dear, so such profiles are measured again.
// 3: some sizes are also timed at a longer cache (long_prefix), for ContextCost, and
// the smallest sizes three times a round (MedianCurves).
// 4: passes timed up to their root's logits, and with lazy_logits a row read after it
// (read_row_ms).
// 5: a 1-row sample no longer follows a larger pass (MedianCurves): llama.cpp rebuilds
// its graph then, and decoding's 1-row passes follow 1-row passes.
// 6: with lazy_logits also rows read ahead with the one asked for (read_ahead_ms).
// 7: a product over each number of rows (read_product_ms): linear from a product of 4
// priced one of 2 at 11.3 ms where it took 15.1 (2-core EPYC).
// 8: llama.cpp with graft's multi-row kernels (ggml-patch/), whose rows cost far less;
// the key names the kernel set, so a build without them keeps a profile of its own.
constexpr int kProfileVersion = 8;

// The sizes of a curve that MedianCurves times three times a round.
constexpr size_t kSmallSizes = 4;

// The sizes timed at the long prefix: enough to fit ContextCost's two slopes.
std::vector<int32_t> LongSizes(int32_t max_rows) {
  std::vector<int32_t> out;
  for (int32_t n : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256}) {
    if (n < max_rows) out.push_back(n);
  }
  out.push_back(max_rows);
  return out;
}

// Reads `name` as a curve of at most `size` values >= 0 (a missing key: empty).
std::vector<double> LongCurve(const nlohmann::json& j, const char* name, size_t size) {
  if (!j.contains(name)) return {};
  std::vector<double> v = j.at(name).get<std::vector<double>>();
  if (v.size() > size) throw Error("long curve longer than its base");
  for (double x : v) {
    if (!(x >= 0)) throw Error("negative cost");
  }
  return v;
}

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

// Times passes over random trees on a scratch context of `model` holding `prefix`
// random tokens; every pass is rolled back, so the cache does not grow.
class PassTimer {
 public:
  PassTimer(const Model& model, int32_t max_rows, const CostProfileOptions& o, int32_t prefix_tokens, bool lazy)
      : model_(model), ctx_(model, Options(max_rows, o.n_threads, prefix_tokens, lazy)), rng_(12345), max_rows_(max_rows) {
    std::vector<Token> prefix(prefix_tokens);
    for (Token& t : prefix) t = RandomToken();
    ctx_.Prefill(prefix, false);
    ctx_.Prefill(std::vector<Token>{RandomToken()}, true);  // a 1-row pass: lets a lazy context check itself
    ctx_.Truncate(prefix_tokens);
    base_ = ctx_.n_past();
    // Warm-up: the largest pass sizes the compute buffers once, so no later pass pays
    // for an allocation; then a 1-row pass.
    Time(max_rows);
    Time(1);
  }

  // With lazy logits: ms of one product over the logits of `c` rows (c = 1: a row read
  // alone), read after the root's in a pass over a chain of kMaxReadBlock + 1 nodes
  // (Context::HintReads). The backend checks the first product of each size against
  // its rows alone: that one is not timed.
  double TimeProduct(int32_t c) {
    TokenTree t;
    t.Reset(RandomToken());
    const int32_t nodes = std::min(max_rows_, Context::kMaxReadBlock + 1);
    for (int32_t i = 1; i < nodes; ++i) t.Add(i - 1, RandomToken(), 0.5f, Source::kDraft);
    c = std::clamp(c, 1, nodes - 1);
    double ms = 0;
    for (int attempt = c == 1 || checked_[c] ? 1 : 0; attempt < 2; ++attempt) {
      ctx_.EvalTree(t);
      ctx_.Logits(0);
      if (c > 1) {
        std::vector<int32_t> rows(c);
        for (int32_t i = 0; i < c; ++i) rows[i] = i + 1;
        ctx_.HintReads(rows);
      }
      ms = 0;
      {
        ScopedMs timer(&ms);
        ctx_.Logits(1);
      }
      ctx_.CommitPath({0});
      ctx_.Truncate(base_);
    }
    checked_[c] = true;
    return ms;
  }

  // ms of one pass over a random tree of n nodes (depth <= 8, like a draft tree).
  double Time(int32_t n) {
    TokenTree t;
    t.Reset(RandomToken());
    while (t.size() < n) {
      const int32_t p = static_cast<int32_t>(rng_.Next() % t.size());
      const Token x = RandomToken();
      if (t.depth[p] < 8 && t.FindChild(p, x) < 0) t.Add(p, x, 0.5f, Source::kDraft);
    }
    double ms = 0;
    {
      ScopedMs timer(&ms);
      ctx_.EvalTree(t);
      ctx_.Logits(0);  // waits for the pass; the root's row is read by every verification
    }
    ctx_.CommitPath({0});
    ctx_.Truncate(base_);
    return ms;
  }

 private:
  static ContextOptions Options(int32_t max_rows, int32_t n_threads, int32_t prefix, bool lazy) {
    ContextOptions co;
    co.lazy_logits = lazy;
    co.n_ctx = prefix + max_rows + 16;
    co.n_threads = n_threads;
    co.n_seq_max = std::clamp(max_rows, 1, 256);
    co.max_tree = max_rows;
    return co;
  }
  Token RandomToken() { return static_cast<Token>(rng_.Next() % model_.n_vocab()); }

  const Model& model_;
  Context ctx_;
  Rng rng_;
  int32_t base_ = 0;
  int32_t max_rows_ = 1;
  bool checked_[Context::kMaxReadBlock + 1] = {};
};

// The cached profile at `path` if it is readable, matches `key` and covers the sizes
// asked for; nullopt otherwise (a stale or foreign file is simply re-measured).
std::optional<CostProfile> TryLoad(const std::string& path, const std::string& key, const CostProfileOptions& o,
                                   bool need_draft) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    if (j.at("version").get<int>() != kProfileVersion || j.at("key").get<std::string>() != key) return std::nullopt;
    CostProfile p = CostProfileFromJson(j);
    if (p.prefix != o.prefix || p.long_prefix != o.long_prefix) return std::nullopt;
    if (static_cast<int32_t>(p.verify_ms.size()) < o.max_rows + 1) return std::nullopt;
    if (need_draft && static_cast<int32_t>(p.draft_ms.size()) < o.max_draft_rows + 1) return std::nullopt;
    for (size_t n = 1; n < p.verify_ms.size(); ++n) if (!(p.verify_ms[n] > 0)) return std::nullopt;
    for (size_t n = 1; n < p.draft_ms.size(); ++n) if (!(p.draft_ms[n] > 0)) return std::nullopt;
    if (o.lazy_logits != (p.read_row_ms > 0) && o.max_rows >= 2) return std::nullopt;
    return p;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

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

std::string UtcTimestamp() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string DefaultProfileDir() {
  if (const char* d = std::getenv("GRAFT_PROFILE_DIR"); d != nullptr && *d != '\0') return d;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/graft/profiles";
}

std::string CostProfileKey(const Model& target, const Model* draft, const CostProfileOptions& o) {
  return "target " + ModelKey(target) + "; draft " + (draft != nullptr ? ModelKey(*draft) : "none") + "; threads " +
         std::to_string(o.n_threads) + "; prefix " + std::to_string(o.prefix) +
         (o.long_prefix > 0 ? " and " + std::to_string(o.long_prefix) : std::string()) +
         (o.lazy_logits ? "; lazy output layer" : "") + "; cpu " + CpuName() + " x" +
         std::to_string(std::thread::hardware_concurrency()) + "; " + LlamaBuildInfo();
}

std::string CostProfilePath(const std::string& key, const CostProfileOptions& o) {
  char name[40];
  snprintf(name, sizeof(name), "%016llx.json", static_cast<unsigned long long>(Fnv1a(key)));
  return (fs::path(o.dir.empty() ? DefaultProfileDir() : o.dir) / name).string();
}

std::vector<std::vector<double>> MedianCurves(const std::vector<CurveSampler>& curves, int32_t repeats) {
  std::vector<std::vector<std::vector<double>>> samples(curves.size());
  std::vector<std::vector<int32_t>> sizes(curves.size());
  for (size_t c = 0; c < curves.size(); ++c) {
    samples[c].resize(std::max(0, curves[c].max_rows) + 1);
    for (int32_t n : curves[c].sizes) GRAFT_CHECK(n >= 1 && n <= curves[c].max_rows, "curve size out of range");
    sizes[c] = curves[c].sizes;
    if (sizes[c].empty()) {
      for (int32_t n = 1; n <= curves[c].max_rows; ++n) sizes[c].push_back(n);
    }
  }
  // Each round times a curve's first kSmallSizes sizes three times, before, between
  // and after the halves of its other sizes: they are cheap, most steps verify that
  // few rows, and every ratio is taken against the 1-row pass, so a spell that slows
  // one part of a round must not make them its samples.
  for (int32_t r = 0; r < std::max(1, repeats); ++r) {
    for (size_t c = 0; c < curves.size(); ++c) {
      if (curves.size() > 1 && curves[c].max_rows >= 1) curves[c].time_pass(1);  // settling pass, not timed
      const size_t small = std::min(sizes[c].size(), kSmallSizes);
      const size_t half = small + (sizes[c].size() - small) / 2;
      const auto time = [&](size_t from, size_t to) {
        for (size_t i = from; i < to; ++i) samples[c][sizes[c][i]].push_back(curves[c].time_pass(sizes[c][i]));
      };
      // A 1-row pass after a larger one pays for llama.cpp's graph rebuild (measured on
      // a 2-core EPYC: 46.7-47.0 ms after 18 or 32 rows, 44.8 after one row), while
      // decoding's 1-row passes follow 1-row passes and a tree's pass mostly follows
      // one. So the small sizes after a half follow an untimed 1-row pass.
      const auto half_then_small = [&](size_t from, size_t to) {
        time(from, to);
        if (to > from && sizes[c][0] == 1) curves[c].time_pass(1);
        time(0, small);
      };
      time(0, small);
      half_then_small(small, half);
      half_then_small(half, sizes[c].size());
    }
  }
  std::vector<std::vector<double>> out(curves.size());
  for (size_t c = 0; c < curves.size(); ++c) {
    out[c].assign(samples[c].size(), 0.0);
    for (size_t n = 1; n < samples[c].size(); ++n) {
      std::vector<double>& ms = samples[c][n];
      if (ms.empty()) continue;
      std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
      out[c][n] = std::max(0.001, std::round(ms[ms.size() / 2] * 1000.0) / 1000.0);
    }
  }
  return out;
}

CostProfile MeasureCostProfile(const Model& target, const Model* draft, const CostProfileOptions& o) {
  if (o.max_rows < 1 || o.max_draft_rows < 1 || o.prefix < 1) throw Error("cost profile sizes must be at least 1");
  if (o.long_prefix != 0 && o.long_prefix <= o.prefix) throw Error("the long prefix must exceed the prefix");
  CostProfile p;
  p.key = CostProfileKey(target, draft, o);
  p.prefix = o.prefix;
  p.long_prefix = o.long_prefix;
  // Every curve's timer (a scratch context each), then the curves in rounds: target,
  // target at the long prefix, draft, draft at the long prefix.
  std::vector<std::unique_ptr<PassTimer>> timers;
  std::vector<CurveSampler> curves;
  auto add = [&](const Model& m, bool lazy, int32_t max_rows, int32_t prefix, std::vector<int32_t> sizes) {
    timers.push_back(std::make_unique<PassTimer>(m, max_rows, o, prefix, lazy));
    curves.push_back({max_rows, [t = timers.back().get()](int32_t n) { return t->Time(n); }, std::move(sizes)});
  };
  add(target, o.lazy_logits, o.max_rows, o.prefix, {});
  if (o.long_prefix > 0) add(target, o.lazy_logits, o.max_rows, o.long_prefix, LongSizes(o.max_rows));
  if (draft != nullptr) {
    add(*draft, false, o.max_draft_rows, o.prefix, {});
    if (o.long_prefix > 0) add(*draft, false, o.max_draft_rows, o.long_prefix, LongSizes(o.max_draft_rows));
  }
  // A lazy pass's products over 1 .. kMaxReadBlock rows read after its root (as many
  // "curves" of one size; fewer when the largest pass has fewer rows after its root).
  const int32_t products = o.lazy_logits ? std::min(o.max_rows - 1, Context::kMaxReadBlock) : 0;
  PassTimer* reader = timers.front().get();
  for (int32_t k = 1; k <= products; ++k) curves.push_back({1, [reader, k](int32_t) { return reader->TimeProduct(k); }, {}});
  auto measured = MedianCurves(curves, o.repeats);
  if (products >= 1) {
    p.read_product_ms.assign(products + 1, 0.0);
    for (int32_t k = products; k >= 1; --k) {
      p.read_product_ms[k] = measured.back()[1];
      measured.pop_back();
    }
    p.read_row_ms = p.read_product_ms[1];
    // The mean per row after the first of the largest product; none when it costs as
    // much as its rows alone (the context then computes them alone too, if they
    // differ in their bits).
    if (products >= 2) {
      p.read_ahead_ms = std::max(0.0, (p.read_product_ms[products] - p.read_row_ms) / (products - 1));
      if (p.read_ahead_ms >= p.read_row_ms) p.read_ahead_ms = 0;
    }
    if (p.read_ahead_ms <= 0) p.read_product_ms.resize(2);
  }
  size_t c = 0;
  p.verify_ms = std::move(measured[c++]);
  if (o.long_prefix > 0) p.verify_ms_long = std::move(measured[c++]);
  if (draft != nullptr) {
    p.draft_ms = std::move(measured[c++]);
    if (o.long_prefix > 0) p.draft_ms_long = std::move(measured[c++]);
  }
  p.measured_at = UtcTimestamp();
  return p;
}

nlohmann::json CostProfileJson(const CostProfile& p) {
  return {{"version", kProfileVersion},
          {"key", p.key},
          {"measured_at", p.measured_at},
          {"prefix", p.prefix},
          {"verify_ms", p.verify_ms},
          {"draft_ms", p.draft_ms},
          {"long_prefix", p.long_prefix},
          {"verify_ms_long", p.verify_ms_long},
          {"draft_ms_long", p.draft_ms_long},
          {"read_row_ms", p.read_row_ms},
          {"read_ahead_ms", p.read_ahead_ms},
          {"read_product_ms", p.read_product_ms}};
}

CostProfile CostProfileFromJson(const nlohmann::json& j) {
  CostProfile p;
  p.key = j.value("key", "");
  p.verify_ms = j.at("verify_ms").get<std::vector<double>>();
  p.draft_ms = j.at("draft_ms").get<std::vector<double>>();
  p.measured_at = j.value("measured_at", "");
  p.prefix = j.value("prefix", 0);
  p.long_prefix = j.value("long_prefix", 0);
  p.verify_ms_long = LongCurve(j, "verify_ms_long", p.verify_ms.size());
  p.draft_ms_long = LongCurve(j, "draft_ms_long", p.draft_ms.size());
  p.read_row_ms = j.value("read_row_ms", 0.0);
  p.read_ahead_ms = j.value("read_ahead_ms", 0.0);
  if (!(p.read_row_ms >= 0) || !(p.read_ahead_ms >= 0)) throw Error("negative cost");
  if (j.contains("read_product_ms")) {
    p.read_product_ms = j.at("read_product_ms").get<std::vector<double>>();
    for (double x : p.read_product_ms) {
      if (!(x >= 0)) throw Error("negative cost");
    }
    if (p.read_product_ms.size() == 1 || p.read_product_ms.size() > Context::kMaxReadBlock + 1) {
      throw Error("read products must be of 1 to " + std::to_string(Context::kMaxReadBlock) + " rows");
    }
  }
  return p;
}

void SaveCostProfile(const CostProfile& p, const CostProfileOptions& o) {
  const fs::path path = CostProfilePath(p.key, o);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) throw Error("cannot create the profile folder " + path.parent_path().string() + ": " + ec.message());
  try {
    WriteFileAtomic(path.string(), CostProfileJson(p).dump(1) + "\n");
  } catch (const Error& e) {
    throw Error(std::string("cannot write the cost profile: ") + e.what());
  }
}

CostProfile LoadOrMeasureCostProfile(const Model& target, const Model* draft, const CostProfileOptions& o,
                                     double* measured_ms) {
  if (measured_ms != nullptr) *measured_ms = 0;
  const std::string key = CostProfileKey(target, draft, o);
  const std::string path = CostProfilePath(key, o);
  if (auto p = TryLoad(path, key, o, draft != nullptr)) return *p;
  if (o.on_measure) o.on_measure(path);
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
