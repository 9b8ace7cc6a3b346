// `graft bench` as a user runs it (the real binary, tiny models, -t 1): the files and
// their keys, clear file:line errors for malformed datasets, and a run interrupted with
// SIGINT that leaves complete, parseable files for the prompts it finished.
#include <gtest/gtest.h>

#include "common/test_models.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#ifndef GRAFT_CLI
#error "GRAFT_CLI (path of the graft binary) must be defined"
#endif

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using graft::testing::ModelPath;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("graft_bench_cli_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Write(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name) << content;
    return dir_ / name;
  }
  std::vector<std::string> Base() const {
    return {GRAFT_CLI, "bench", "-m", ModelPath("tiny-target.gguf"), "-md", ModelPath("tiny-draft.gguf"),
            "-t", "1", "--no-plots"};
  }
  // Runs argv with stdout/stderr into files; returns the exit code (128 + signal if killed).
  int Run(std::vector<std::string> argv) {
    pid_t pid = Spawn(argv);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  pid_t Spawn(const std::vector<std::string>& argv) {
    const std::string out = (dir_ / "stdout.txt").string(), err = (dir_ / "stderr.txt").string();
    pid_t pid = fork();
    if (pid == 0) {
      if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(99);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(98);
    }
    return pid;
  }
  std::string Stderr() { return Slurp(dir_ / "stderr.txt"); }

  fs::path dir_;
};

const char* kPrompts =
    "{\"question_id\": 1, \"category\": \"chat\", \"turns\": [\"Tell me about the sea.\", \"Shorter, please.\"]}\n"
    "{\"question_id\": 2, \"category\": \"code\", \"turns\": [\"def add(a, b):\\n    return a + b\\n\\nRename add.\"]}\n"
    "{\"question_id\": 3, \"category\": \"code\", \"turns\": [\"Write a function that squares a number.\"]}\n";

TEST_F(BenchCli, WritesFilesWithSummaryKeys) {
  const fs::path data = Write("p.jsonl", kPrompts);
  auto argv = Base();
  for (const char* a : {"--methods", "tree,pld", "--budgets", "4,8", "-n", "8", "--oracle", "-o"}) argv.push_back(a);
  argv.push_back((dir_ / "out").string());
  argv.push_back("--dataset");
  argv.push_back(data.string());
  ASSERT_EQ(Run(argv), 0) << Stderr();
  const json j = json::parse(Slurp(dir_ / "out" / "results.json"));
  EXPECT_EQ(j["status"]["state"], "complete");
  EXPECT_EQ(j["rows"].size(), 3u * 7);  // ar + 2 methods x 2 budgets + oracle x 2
  for (const char* k : {"ar", "tree", "tree@4", "tree@8", "pld", "pld@8", "oracle"}) {
    ASSERT_TRUE(j["summary"].contains(k)) << k;
    EXPECT_TRUE(j["summary"][k].contains("speedup"));
    EXPECT_TRUE(j["summary"][k].contains("tau"));
    EXPECT_TRUE(j["summary"][k].contains("lossless_rate"));
    EXPECT_TRUE(j["summary"][k]["categories"].contains("code"));
  }
  EXPECT_EQ(j["summary"]["ar"]["speedup"], 1.0);
  for (const char* k : {"machine", "models", "llama_cpp", "flags", "date", "command", "dataset"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_FALSE(j["machine"]["cpu"].get<std::string>().empty());
  EXPECT_GT(j["models"]["target"]["size_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "results.csv"));
  EXPECT_NE(Slurp(dir_ / "out" / "results.md").find("| Method | chat | code | Overall |"), std::string::npos);
  EXPECT_NE(Slurp(dir_ / "stdout.txt").find("| ar | 1.00x (1.00)"), std::string::npos);
  // Not a terminal: one progress line per generation, with an ETA.
  EXPECT_NE(Stderr().find("21/21 |"), std::string::npos) << Stderr();
  EXPECT_NE(Stderr().find("ETA"), std::string::npos);
}

TEST_F(BenchCli, MalformedDatasetNamesFileAndLine) {
  const fs::path bad = Write("bad.jsonl", "{\"turns\": [\"ok\"]}\n{\"turns\": [\"oops\"\n");
  auto argv = Base();
  argv.push_back("--dataset");
  argv.push_back(bad.string());
  argv.push_back("-o");
  argv.push_back((dir_ / "out").string());
  EXPECT_NE(Run(argv), 0);
  EXPECT_NE(Stderr().find(bad.string() + ":2: invalid JSON"), std::string::npos) << Stderr();

  const fs::path missing = Write("missing.jsonl", "{\"turns\": \"ok\"}\n{\"prompt\": \"no turns\"}\n");
  argv[argv.size() - 3] = missing.string();
  EXPECT_NE(Run(argv), 0);
  EXPECT_NE(Stderr().find(missing.string() + ":2: missing field \"turns\""), std::string::npos) << Stderr();

  argv.push_back("--prompt-field");
  argv.push_back("prompt");
  EXPECT_NE(Run(argv), 0);
  EXPECT_NE(Stderr().find(missing.string() + ":1: missing field \"prompt\""), std::string::npos) << Stderr();
  EXPECT_FALSE(fs::exists(dir_ / "out" / "results.json"));  // failed before any run
}

TEST_F(BenchCli, BadPeersAreClearErrors) {
  const fs::path data = Write("p.jsonl", kPrompts);
  auto argv = Base();
  for (const char* a : {"--dataset", data.c_str(), "-n", "4", "--peers", "llama-frobnicate"}) argv.push_back(a);
  EXPECT_EQ(Run(argv), 1);
  EXPECT_NE(Stderr().find("unknown peer 'llama-frobnicate' (peers: llama-ar,"), std::string::npos) << Stderr();
  // A folder of the user's choosing is never built into: the error says how to build.
  argv.back() = "llama-ar";
  for (const char* a : {"--peers-dir", "/nonexistent/peers"}) argv.push_back(a);
  EXPECT_EQ(Run(argv), 1);
  EXPECT_NE(Stderr().find("missing from /nonexistent/peers"), std::string::npos) << Stderr();
  EXPECT_NE(Stderr().find("scripts/setup.sh --peers"), std::string::npos) << Stderr();
}

// Numbers out of range, NaN included (CLI11's Range lets NaN through), are errors
// that name the flag, never a run with a silently odd setting.
TEST_F(BenchCli, BadNumbersAreClearErrors) {
  const fs::path data = Write("p.jsonl", kPrompts);
  auto argv = Base();
  for (const char* a : {"--dataset", data.c_str(), "-n", "4", "--max-prompt-tokens", "-5"}) argv.push_back(a);
  EXPECT_EQ(Run(argv), 1);
  EXPECT_NE(Stderr().find("--max-prompt-tokens must be >= 0"), std::string::npos) << Stderr();
  argv = Base();
  for (const char* a : {"--dataset", data.c_str(), "-n", "4", "--methods", "suffix", "--prune-p-min", "nan", "-o"}) {
    argv.push_back(a);
  }
  argv.push_back((dir_ / "out").string());
  EXPECT_EQ(Run(argv), 1);
  EXPECT_NE(Stderr().find("prune p-min must be a number in [0, 1] (got nan)"), std::string::npos) << Stderr();
}

// --profile-dir: graft's engines and the modelled speedups read (or measure and keep)
// their cost profile there, not in the default folder.
TEST_F(BenchCli, ProfileDirIsWhereTheProfileIsReadAndKept) {
  const fs::path data = Write("p.jsonl", kPrompts);
  const fs::path profiles = dir_ / "profiles";
  auto argv = Base();
  for (const char* a : {"--dataset", data.c_str(), "-n", "4", "--methods", "graft", "--budgets", "4", "-o"}) {
    argv.push_back(a);
  }
  argv.push_back((dir_ / "out").string());
  argv.push_back("--profile-dir");
  argv.push_back(profiles.string());
  // What would be read without the flag: an empty folder, which must stay empty.
  const fs::path fallback = dir_ / "env-profiles";
  fs::create_directories(fallback);
  setenv("GRAFT_PROFILE_DIR", fallback.c_str(), 1);
  const int rc = Run(argv);
  unsetenv("GRAFT_PROFILE_DIR");
  ASSERT_EQ(rc, 0) << Stderr();
  const auto files = [](const fs::path& d) {
    std::vector<fs::path> out;
    if (fs::exists(d)) {
      for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path());
    }
    return out;
  };
  EXPECT_EQ(files(profiles).size(), 1u) << "no profile measured into --profile-dir";
  EXPECT_TRUE(files(fallback).empty()) << "the harness or an engine read the default folder";
  const json j = json::parse(Slurp(dir_ / "out" / "results.json"));
  EXPECT_TRUE(j["summary"]["graft"]["modelled_speedup"].is_number());
  EXPECT_EQ(j["flags"]["profile_dir"], profiles.string());
  EXPECT_EQ(j["profile"]["verify_ms"].size(), 5u);  // the profile it was priced with (budget 4)
}

// --learned-state: a benchmark never starts cold by mistake (a missing or unusable
// file is an error before any run), and a good file is read, named in the flags and
// left as it was (every engine starts from it; none writes it).
TEST_F(BenchCli, LearnedStateMustBeUsableAndIsOnlyRead) {
  const fs::path data = Write("p.jsonl", kPrompts);
  const std::string state = (dir_ / "state.json").string();
  auto argv = Base();
  for (const char* a : {"--dataset", data.c_str(), "-n", "4", "--methods", "suffix", "-o"}) argv.push_back(a);
  argv.push_back((dir_ / "out").string());
  argv.push_back("--learned-state");
  argv.push_back(state);
  EXPECT_EQ(Run(argv), 1);
  EXPECT_NE(Stderr().find("no such file"), std::string::npos) << Stderr();
  Write("state.json", "{\"version\": 1");
  EXPECT_EQ(Run(argv), 1);
  EXPECT_NE(Stderr().find("not usable"), std::string::npos) << Stderr();
  EXPECT_FALSE(fs::exists(dir_ / "out" / "results.json"));
  // A state for these models, as graft generate keeps it.
  fs::remove(state);
  ASSERT_EQ(Run({GRAFT_CLI, "generate", "-m", ModelPath("tiny-target.gguf"), "-md", ModelPath("tiny-draft.gguf"), "-t",
                 "1", "-p", "one two one two one two", "-n", "8", "--method", "suffix", "--learned-state", state}),
            0)
      << Stderr();
  const std::string before = Slurp(state);
  ASSERT_FALSE(before.empty());
  ASSERT_EQ(Run(argv), 0) << Stderr();
  const json j = json::parse(Slurp(dir_ / "out" / "results.json"));
  EXPECT_EQ(j["flags"]["learned_state"], state);
  EXPECT_EQ(Slurp(state), before);
}

TEST_F(BenchCli, SigintLeavesCompleteFilesForFinishedPrompts) {
  std::string many;
  for (int i = 0; i < 400; ++i) {
    many += "{\"id\": " + std::to_string(i) + ", \"category\": \"c" + std::to_string(i % 3) +
            "\", \"turns\": \"Question number " + std::to_string(i) + ": tell me a long story.\"}\n";
  }
  const fs::path data = Write("many.jsonl", many);
  auto argv = Base();
  for (const char* a : {"--methods", "tree,suffix", "--budgets", "4", "-n", "32", "-o"}) argv.push_back(a);
  argv.push_back((dir_ / "out").string());
  argv.push_back("--dataset");
  argv.push_back(data.string());
  const pid_t pid = Spawn(argv);
  // Wait until at least two prompts are on disk, then Ctrl-C.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int done = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      done = json::parse(Slurp(dir_ / "out" / "results.json"))["status"]["prompts_done"];
    } catch (...) {
      continue;  // not written yet
    }
    if (done >= 2) break;
  }
  ASSERT_GE(done, 2) << "the run did not finish two prompts in time";
  kill(pid, SIGINT);
  // A wrapper (timeout, a shell) may forward the same Ctrl-C again: still one clean stop.
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130) << Stderr();
  EXPECT_NE(Stderr().find("interrupted"), std::string::npos);

  const json j = json::parse(Slurp(dir_ / "out" / "results.json"));
  EXPECT_EQ(j["status"]["state"], "interrupted");
  const int finished = j["status"]["prompts_done"];
  EXPECT_GE(finished, 2);
  EXPECT_LT(finished, 400);
  ASSERT_EQ(j["rows"].size(), static_cast<size_t>(finished) * 3);  // ar, tree@4, suffix@4
  std::map<std::string, int> per_prompt;
  for (const json& r : j["rows"]) ++per_prompt[r["prompt_id"].get<std::string>()];
  EXPECT_EQ(per_prompt.size(), static_cast<size_t>(finished));
  for (const auto& [id, n] : per_prompt) EXPECT_EQ(n, 3) << id;
  EXPECT_TRUE(j["summary"].contains("tree"));
  // CSV and Markdown describe the same rows.
  std::ifstream csv(dir_ / "out" / "results.csv");
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 1 + finished * 3);
  EXPECT_NE(Slurp(dir_ / "out" / "results.md").find("status: interrupted"), std::string::npos);
  for (const auto& e : fs::directory_iterator(dir_ / "out")) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "leftover " << e.path();
  }
}

TEST_F(BenchCli, QuickPresetOnSpecBench) {
  // The built-in spec_bench set over the repository's fixture subset (tests/data, same
  // layout as the data directory); a missing fixture fails, never skips.
  const char* src = std::getenv("GRAFT_SOURCE_DIR");
  ASSERT_TRUE(src != nullptr && *src != '\0') << "GRAFT_SOURCE_DIR (the source tree) is not set; run through ctest";
  const fs::path data_dir = fs::path(src) / "tests" / "data";
  ASSERT_TRUE(fs::is_regular_file(data_dir / "spec_bench" / "question.jsonl")) << "missing fixture in " << data_dir;
  auto argv = Base();
  for (const char* a : {"--quick", "-n", "4", "--no-warmup", "--methods", "pld,suffix", "-o"}) argv.push_back(a);
  argv.push_back((dir_ / "out").string());
  argv.push_back("--data-dir");
  argv.push_back(data_dir.string());
  const int rc = Run(argv);
  ASSERT_EQ(rc, 0) << Stderr();
  const json j = json::parse(Slurp(dir_ / "out" / "results.json"));
  EXPECT_EQ(j["categories"], json({"mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"}));
  EXPECT_EQ(j["rows"].size(), 6u * 3);
  EXPECT_EQ(j["flags"]["n_predict"], 4);  // explicit flags win over the preset
  EXPECT_EQ(j["flags"]["budgets"], json({16}));
  EXPECT_EQ(j["dataset"]["data_dir"], data_dir.string());
  std::set<std::string> ids;  // --quick: the first prompt of each category
  for (const json& r : j["rows"]) ids.insert(r["prompt_id"].get<std::string>());
  EXPECT_EQ(ids, (std::set<std::string>{"81", "161", "241", "321", "401", "481"}));
  for (const json& r : j["rows"]) EXPECT_LE(r["prompt_tokens"].get<int>(), r["turns"].get<int>() == 1 ? 512 : 2000);
}

// --fixed-budget: the paper's table (every method at every budget, graft drafting at
// every step), with both modelled columns and the claim, in results.md, results.json
// and on stdout; and the time the command took.
TEST_F(BenchCli, FixedBudgetWritesThePapersTable) {
  const fs::path data = Write("p.jsonl", kPrompts);
  auto argv = Base();
  for (const char* a : {"--fixed-budget", "--budgets", "4,8", "--methods", "tree,graft", "-n", "8", "--max-prompts",
                        "1", "--dataset", data.c_str(), "-o"}) {
    argv.push_back(a);
  }
  argv.push_back((dir_ / "out").string());
  ASSERT_EQ(Run(argv), 0) << Stderr();
  const json j = json::parse(Slurp(dir_ / "out" / "results.json"));
  EXPECT_EQ(j["flags"]["fixed_budget"], true);
  EXPECT_EQ(j["flags"]["skip_draft_gain"], 0.0);  // "always draft"
  EXPECT_GT(j["elapsed_s"].get<double>(), 0.0);
  ASSERT_TRUE(j.contains("fixed_budget"));
  const json& fb = j["fixed_budget"];
  EXPECT_EQ(fb["model_profiles"], json({"measured", "rows-free"}));
  std::vector<std::string> names;
  for (const json& r : fb["rows"]) names.push_back(r["config"]);
  EXPECT_EQ(names, (std::vector<std::string>{"ar", "tree@4", "tree@8", "graft@4", "graft@8"}));
  for (const json& r : fb["rows"]) {
    SCOPED_TRACE(r["config"].get<std::string>());
    // From the rows themselves (one prompt): the counts GenerationStats keeps.
    int64_t tokens = 0, passes = 0, nodes = 0, draft_passes = 0;
    for (const json& row : j["rows"]) {
      if (row["config"] != r["config"]) continue;
      tokens += row["new_tokens"].get<int64_t>();
      passes += row["target_passes"].get<int64_t>();
      nodes += row["nodes_verified"].get<int64_t>();
      draft_passes += row["draft_passes"].get<int64_t>();
    }
    ASSERT_GT(passes, 0);
    EXPECT_DOUBLE_EQ(r["tau"].get<double>(), static_cast<double>(tokens) / passes);
    EXPECT_DOUBLE_EQ(r["nodes_per_pass"].get<double>(), static_cast<double>(nodes) / passes);
    EXPECT_DOUBLE_EQ(r["draft_passes_per_step"].get<double>(), static_cast<double>(draft_passes) / passes);
    EXPECT_TRUE(r["modelled"]["measured"].is_number());
    EXPECT_TRUE(r["modelled"]["rows-free"].is_number());
    if (r["method"] != "ar") {
      EXPECT_GT(r["draft_passes_per_step"].get<double>(), 0.0);
      EXPECT_TRUE(r["per_source"].contains("draft"));
    }
  }
  // graft with the policy off drafts at every step that has a token left to draft for.
  for (const json& r : j["rows"]) {
    if (r["method"] != "graft") continue;
    EXPECT_GE(r["draft_steps"].get<int>(), r["target_passes"].get<int>() - r["turns"].get<int>()) << r["config"];
  }
  ASSERT_EQ(fb["claims"].size(), 2u);
  EXPECT_EQ(fb["claims"][0]["budget"], 4);
  const std::string md = Slurp(dir_ / "out" / "results.md");
  EXPECT_NE(md.find("## Fixed budget (the paper's table)"), std::string::npos) << md;
  EXPECT_NE(md.find("| modelled (measured) | modelled (rows-free) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| tree | 8 | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("- N=4: graft's tau"), std::string::npos) << md;
  EXPECT_NE(md.find("- took: "), std::string::npos) << md;
  const std::string out = Slurp(dir_ / "stdout.txt");
  EXPECT_NE(out.find("## Fixed budget"), std::string::npos) << out;
  EXPECT_NE(out.find("took: "), std::string::npos) << out;
}

// --fixed-budget's bad input fails before any model loads, naming the flag.
TEST_F(BenchCli, FixedBudgetBadInputIsAClearError) {
  const fs::path data = Write("p.jsonl", kPrompts);
  auto run = [&](std::vector<const char*> extra) {
    auto argv = Base();
    for (const char* a : {"--dataset", data.c_str(), "-n", "4", "-o"}) argv.push_back(a);
    argv.push_back((dir_ / "out").string());
    for (const char* a : extra) argv.push_back(a);
    return Run(argv);
  };
  EXPECT_EQ(run({"--fixed-budget", "--methods", "ar"}), 1);
  EXPECT_NE(Stderr().find("--fixed-budget needs a speculative method in --methods"), std::string::npos) << Stderr();
  EXPECT_EQ(run({"--fixed-budget", "--budgets", "8,0"}), 1);
  EXPECT_NE(Stderr().find("--budgets: every budget must be in [1, 256] (got 0)"), std::string::npos) << Stderr();
  EXPECT_EQ(run({"--fixed-budget", "--model-profile", "gpu"}), 1);
  EXPECT_NE(Stderr().find("unknown model profile 'gpu' (profiles: measured, rows-free)"), std::string::npos)
      << Stderr();
  EXPECT_EQ(run({"--model-profile", "rows-free"}), 1);
  EXPECT_NE(Stderr().find("--model-profile prices the fixed-budget table; add --fixed-budget"), std::string::npos)
      << Stderr();
  EXPECT_FALSE(fs::exists(dir_ / "out" / "results.json"));
  // The flags are in the help.
  EXPECT_EQ(Run({GRAFT_CLI, "bench", "--help"}), 0);
  const std::string help = Slurp(dir_ / "stdout.txt");
  for (const char* flag : {"--fixed-budget", "--model-profile", "rows-free", "--skip-draft-gain"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
