// The peers' plumbing without llama.cpp: report parsing on outputs captured from the
// real tools (pinned source), command lines, process running (exit codes, timeouts,
// cancellation, missing programs) and PeerRunner against fake tools.
#include "bench/peers.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "graft/error.h"

namespace graft::bench {
namespace {

namespace fs = std::filesystem;

// Captured from llama-completion -no-cnv --no-display-prompt (qwen2.5-coder-1.5b, -n 24).
const char* kCompletionOut = "Rust's cold embrace,\nSteel forms, a silent dance,\nSilent rust. [end of text]\n\n\n";
const char* kCompletionErr =
    "0.03.573.117 I common_perf_print:    sampling time =       8.31 ms\n"
    "0.03.573.127 I common_perf_print: prompt eval time =     272.96 ms /    15 tokens (   18.20 ms per token,    "
    "54.95 tokens per second)\n"
    "0.03.573.129 I common_perf_print:        eval time =    1166.12 ms /    17 runs   (   68.59 ms per token,    "
    "14.58 tokens per second)\n"
    "0.03.573.131 I common_perf_print: unaccounted time =       1.77 ms /   0.1 %      (total - sampling - prompt "
    "eval - eval) / (total)\n";

// Captured from llama-speculative-simple --spec-type ngram-mod (same prompt); the
// numbers of n_drafted / n_accept changed to be non-zero.
const char* kEcho = "<|im_start|>user\nWrite a haiku about rust.<|im_end|>\n<|im_start|>assistant\n";
const char* kSpecOut =
    "\n\n<|im_start|>user\nWrite a haiku about rust.<|im_end|>\n<|im_start|>assistant\nRust's cold embrace,\n"
    "Steel forms, a silent dance,\nSilence in steel.\n\n\n\n";
const char* kSpecErr =
    "0.02.830.976 I encoded   15 tokens in    0.250 seconds, speed:   59.984 t/s\n"
    "0.02.830.990 I decoded   19 tokens in    1.321 seconds, speed:   14.384 t/s\n"
    "0.02.831.000 I \n"
    "0.02.831.010 I n_draft   = 3\n"
    "0.02.831.011 I n_predict = 19\n"
    "0.02.831.018 I n_drafted = 9\n"
    "0.02.831.025 I n_accept  = 6\n"
    "0.02.831.030 I accept    = 66.667%\n";

TEST(PeersTest, ParsesLlamaCompletion) {
  PeerReport r = ParsePeerOutput(PeerTool::kCompletion, kCompletionOut, kCompletionErr, "", 24);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.n_prompt, 15);
  EXPECT_DOUBLE_EQ(r.prefill_ms, 272.96);
  // 17 decodes (the prompt's 15 tokens are not among them): the first token came from
  // the prefill, the 17th decode yielded the end token, so 16 tokens in 17 passes.
  EXPECT_TRUE(r.eog);
  EXPECT_EQ(r.n_passes, 17);
  EXPECT_EQ(r.n_generated, 16);
  EXPECT_DOUBLE_EQ(r.decode_ms, 1166.12);
  EXPECT_EQ(r.n_drafted, -1);
  EXPECT_EQ(r.text, "Rust's cold embrace,\nSteel forms, a silent dance,\nSilent rust.");
  // Without the end marker it ran to -n: every decode yielded a token.
  const std::string cut = std::string(kCompletionOut).substr(0, 60) + "\n\n";
  r = ParsePeerOutput(PeerTool::kCompletion, cut, kCompletionErr, "", 18);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_FALSE(r.eog);
  EXPECT_EQ(r.n_generated, 17);
}

TEST(PeersTest, ParsesSpeculativeTools) {
  for (PeerTool tool : {PeerTool::kSpeculativeSimple, PeerTool::kLookup}) {
    const bool lookup = tool == PeerTool::kLookup;
    PeerReport r = ParsePeerOutput(tool, kSpecOut, kSpecErr, kEcho, 24);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.n_prompt, 15);
    EXPECT_DOUBLE_EQ(r.prefill_ms, 250.0);
    EXPECT_DOUBLE_EQ(r.decode_ms, 1321.0);
    EXPECT_EQ(r.n_drafted, 9);
    EXPECT_EQ(r.n_accepted, 6);
    // 19 sampled with -n 24: the 19th was the end token. speculative-simple: 19 - 6
    // accepted = 13 passes made all 18; llama-lookup's prefill made the first, 12 passes.
    EXPECT_TRUE(r.eog);
    EXPECT_EQ(r.n_passes, lookup ? 12 : 13);
    EXPECT_EQ(r.n_generated, lookup ? 17 : 18);
    EXPECT_EQ(r.text, "Rust's cold embrace,\nSteel forms, a silent dance,\nSilence in steel.");
    r = ParsePeerOutput(tool, kSpecOut, kSpecErr, kEcho, 18);  // 19 = -n + 1: ran to the length
    EXPECT_FALSE(r.eog);
    EXPECT_EQ(r.n_generated, lookup ? 18 : 19);
  }
}

TEST(PeersTest, BrokenReportsAreErrorsNotCrashes) {
  struct Case {
    PeerTool tool;
    std::string out, err, echo;
  };
  const std::string spec_err(kSpecErr);
  const std::vector<Case> cases = {
      {PeerTool::kCompletion, kCompletionOut, "", ""},                                  // no report
      {PeerTool::kCompletion, kCompletionOut, "prompt eval time = 1.0 ms / 3 tokens\n", ""},  // half of it
      {PeerTool::kSpeculativeSimple, kSpecOut, "", kEcho},
      {PeerTool::kSpeculativeSimple, kSpecOut, spec_err.substr(0, spec_err.find("n_draft ")), kEcho},
      {PeerTool::kSpeculativeSimple, kSpecOut, kSpecErr, "<|im_start|>system\n"},       // prompt not echoed
      {PeerTool::kSpeculativeSimple, "", kSpecErr, kEcho},
      {PeerTool::kSpeculativeSimple, kSpecOut,
       "encoded 15 tokens in 0.1 seconds\ndecoded 0 tokens in 0.000 seconds\nn_drafted = 0\nn_accept = 0\n", kEcho},
      {PeerTool::kCompletion, "", "prompt eval time = 1e999999 ms / 3 tokens\n eval time = 5 ms / 2 runs\n", ""},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const PeerReport r = ParsePeerOutput(cases[i].tool, cases[i].out, cases[i].err, cases[i].echo, 64);
    EXPECT_FALSE(r.ok()) << "case " << i;
  }
}

TEST(PeersTest, TableAndCommandLines) {
  EXPECT_EQ(ParsePeer("llama-ngram-mod").tool, PeerTool::kSpeculativeSimple);
  EXPECT_THROW(ParsePeer("llama-nope"), Error);
  for (const PeerSpec& p : AllPeers()) {
    EXPECT_EQ(p.name.rfind("llama-", 0), 0u) << p.name;
    EXPECT_FALSE(p.about.empty());
  }
  PeerRun run;
  run.n_predict = 64;
  run.n_threads = 2;
  run.n_ctx = 1024;
  run.target_path = "/m/t.gguf";
  run.draft_path = "/m/d.gguf";
  auto has = [](const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == flag && argv[i + 1] == value) return true;
    }
    return false;
  };
  const auto ar = PeerArgv(ParsePeer("llama-ar"), "/bin/dir", run, "/tmp/p");
  EXPECT_EQ(ar[0], "/bin/dir/llama-completion");
  for (auto [f, v] : std::vector<std::pair<std::string, std::string>>{
           {"-m", "/m/t.gguf"}, {"-f", "/tmp/p"}, {"-n", "64"}, {"-c", "1024"}, {"-t", "2"}, {"--temp", "0"}}) {
    EXPECT_TRUE(has(ar, f, v)) << f;
  }
  EXPECT_FALSE(has(ar, "-md", "/m/d.gguf"));
  EXPECT_TRUE(has(ar, "-b", "2048"));  // llama.cpp's default, for prompts that fit it
  run.prompt_tokens = 5996;            // a long prompt: the whole of it in one batch
  for (const PeerSpec& p : AllPeers()) EXPECT_TRUE(has(PeerArgv(p, "/bin/dir", run, "/tmp/p"), "-b", "5996")) << p.name;
  run.prompt_tokens = 0;
  const auto tuned = PeerArgv(ParsePeer("llama-draft-tuned"), "/bin/dir", run, "/tmp/p");
  EXPECT_EQ(tuned[0], "/bin/dir/llama-speculative-simple");
  EXPECT_TRUE(has(tuned, "-md", "/m/d.gguf"));
  EXPECT_TRUE(has(tuned, "-td", "2"));
  EXPECT_TRUE(has(tuned, "--spec-draft-p-min", "0.9"));
}

class FakeToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("graft_peers_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Script(const std::string& name, const std::string& body) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    chmod(p.c_str(), 0755);
  }
  fs::path dir_;
};

TEST_F(FakeToolsTest, RunProcessCapturesExitsAndKills) {
  Script("t", "echo out; echo err >&2; exit 3\n");
  ProcessResult r = RunProcess({(dir_ / "t").string()}, 10, nullptr);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");

  Script("slow", "sleep 30\n");
  auto t0 = std::chrono::steady_clock::now();
  r = RunProcess({(dir_ / "slow").string()}, 0.3, nullptr);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));

  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = true;
  });
  t0 = std::chrono::steady_clock::now();
  r = RunProcess({(dir_ / "slow").string()}, 60, &stop);
  stopper.join();
  EXPECT_TRUE(r.cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));

  r = RunProcess({(dir_ / "missing").string()}, 10, nullptr);
  EXPECT_FALSE(r.spawn_error.empty());
}

TEST_F(FakeToolsTest, RunnerReportsWhatTheToolSaid) {
  // A fake llama-speculative-simple: echoes the prompt file like the real one (the file
  // holds the prompt plus one newline, which -f drops) and prints a report.
  Script("llama-speculative-simple",
         "while [ $# -gt 0 ]; do [ \"$1\" = -f ] && F=$2; shift; done\n"
         "printf '\\n\\n'; head -c -1 \"$F\"; printf 'an answer\\n\\n\\n\\n'\n"
         "echo 'encoded   7 tokens in    0.100 seconds, speed: 70 t/s' >&2\n"
         "echo 'decoded  10 tokens in    0.500 seconds, speed: 20 t/s' >&2\n"
         "echo 'n_drafted = 8' >&2; echo 'n_accept  = 4' >&2\n");
  Script("llama-completion", "echo 'error: model not found' >&2; exit 1\n");
  const PeerRunner runner(dir_.string(), 30);
  EXPECT_EQ(runner.Missing({ParsePeer("llama-ngram-mod"), ParsePeer("llama-ar")}).size(), 0u);
  EXPECT_EQ(runner.Missing({ParsePeer("llama-lookup")}).size(), 1u);

  PeerRun run;
  run.prompt_text = "<s>user\nhello\n";
  run.prompt_echo = run.prompt_text;
  run.prompt_tokens = 7;
  run.target_path = "/m/t.gguf";
  PeerReport r = runner.Run(ParsePeer("llama-ngram-mod"), run, nullptr);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.text, "an answer");
  EXPECT_TRUE(r.eog);  // 10 tokens of -n 128: the last was the end token, not counted
  EXPECT_EQ(r.n_generated, 9);
  EXPECT_EQ(r.n_passes, 6);
  run.n_predict = 9;  // 10 = -n + 1: stopped at the length, all 10 count
  r = runner.Run(ParsePeer("llama-ngram-mod"), run, nullptr);
  EXPECT_FALSE(r.eog);
  EXPECT_EQ(r.n_generated, 10);

  run.prompt_tokens = 8;  // the tool tokenized differently: not a comparable row
  r = runner.Run(ParsePeer("llama-ngram-mod"), run, nullptr);
  EXPECT_NE(r.error.find("7 tokens, ours 8"), std::string::npos) << r.error;

  r = runner.Run(ParsePeer("llama-ar"), run, nullptr);
  EXPECT_NE(r.error.find("model not found"), std::string::npos) << r.error;
  r = runner.Run(ParsePeer("llama-lookup"), run, nullptr);
  EXPECT_FALSE(r.ok());
  r = runner.Run(ParsePeer("llama-draft"), run, nullptr);  // no draft model given
  EXPECT_NE(r.error.find("draft"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace graft::bench
