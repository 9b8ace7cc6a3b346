// llama.cpp's own tools as benchmark rows ("peers"): what a llama.cpp user would run
// instead of graft, built from the same pinned source as our backend
// (scripts/setup.sh --peers) and run per prompt, interleaved with our methods.
//
//   PeerRunner runner(DefaultPeersDir());
//   PeerReport r = runner.Run(ParsePeer("llama-ngram-mod"), run, &stop);
//   if (!r.ok()) ...r.error...; else r.decode_ms, r.text, ...
//
// Each invocation is a fresh process: the tool loads the models, tokenizes the prompt
// text itself (it must come to the same tokens as ours: checked), generates greedily
// and prints its report. Decode time is the tool's own figure (prefill and model load
// excluded), as for our rows. The parsers are pure and tested with canned outputs.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace graft::bench {

// Which llama.cpp program a peer runs; each prints its own report format.
enum class PeerTool {
  kCompletion,         // llama-completion: plain decoding; "eval time" from llama_perf
  kSpeculativeSimple,  // llama-speculative-simple: any --spec-type
  kLookup,             // llama-lookup: the n-gram cache drafter
};

struct PeerSpec {
  std::string name;               // "llama-ngram-mod"
  PeerTool tool = PeerTool::kCompletion;
  std::vector<std::string> args;  // the method's flags (spec type and its settings)
  bool needs_draft = false;
  std::string about;              // one line: what it is and which settings
};

// Every peer, in table order.
const std::vector<PeerSpec>& AllPeers();
// The peer called `name`; throws graft::Error listing the names otherwise.
const PeerSpec& ParsePeer(const std::string& name);
// The program file of a tool ("llama-speculative-simple").
const char* PeerToolBinary(PeerTool tool);

// $GRAFT_PEERS_DIR, else ~/.cache/graft/peers/llama-cpp-python-<pinned version>/bin
// (where scripts/setup.sh --peers puts them).
std::string DefaultPeersDir();

// One invocation's inputs.
struct PeerRun {
  std::string prompt_text;  // what the tool tokenizes (chat template applied)
  int32_t prompt_tokens = 0;  // what our tokenizer makes of it; the tool must agree
  std::string prompt_echo;  // the prompt's pieces (special tokens rendered), as the tools echo it
  int32_t n_predict = 128;
  int32_t n_threads = 2;
  int32_t n_ctx = 4096;
  std::string target_path, draft_path;
};

struct PeerReport {
  std::string error;  // empty: ran and parsed
  int32_t n_prompt = 0;
  int32_t n_generated = 0;      // tokens its timed decode passes produced, end token excluded (as ours)
  int32_t n_passes = 0;         // its timed target passes (derived from its counts, see peers.cc)
  double prefill_ms = 0, decode_ms = 0;
  int64_t n_drafted = -1, n_accepted = -1;  // -1: the tool drafts nothing (llama-ar)
  std::string text;             // the generated text
  bool eog = false;             // it stopped at end-of-generation (not at -n)
  bool ok() const { return error.empty(); }
};

// Parses a tool's stdout and stderr, and counts tokens and passes as our rows do (run
// with -n `n_predict`). `prompt_echo`: see PeerRun (the speculative tools print the
// prompt before the output). Never throws: what cannot be parsed is an error.
//   completion:           "prompt eval time = X ms / N tokens", "eval time = X ms / N runs",
//                         stdout = the output (--no-display-prompt), " [end of text]" at EOS
//   speculative / lookup: "encoded N tokens in S seconds", "decoded N tokens in S seconds",
//                         "n_drafted = N", "n_accept = N"
PeerReport ParsePeerOutput(PeerTool tool, const std::string& out, const std::string& err,
                           const std::string& prompt_echo, int32_t n_predict);

// The command line of one invocation (the program's path first).
std::vector<std::string> PeerArgv(const PeerSpec& peer, const std::string& bin_dir, const PeerRun& run,
                                  const std::string& prompt_file);

struct ProcessResult {
  int exit_code = -1;     // the exit status; 128 + signal when killed
  bool timed_out = false;
  bool cancelled = false;  // `stop` was set
  std::string out, err;
  std::string spawn_error;  // the program could not be started
};

// Runs argv[0] with argv, stdout and stderr captured (through files: no pipe can fill
// up), stdin from /dev/null. Kills it after `timeout_s` or when `stop` is set (polled
// every 20 ms).
ProcessResult RunProcess(const std::vector<std::string>& argv, double timeout_s, const std::atomic<bool>* stop);

class PeerRunner {
 public:
  explicit PeerRunner(std::string bin_dir, double timeout_s = 900) : bin_dir_(std::move(bin_dir)), timeout_s_(timeout_s) {}

  const std::string& bin_dir() const { return bin_dir_; }
  // The programs `peers` need that are missing from bin_dir (empty: all there).
  std::vector<std::string> Missing(const std::vector<PeerSpec>& peers) const;
  // One generation. A failure of any kind is a report with an error, never an exception.
  PeerReport Run(const PeerSpec& peer, const PeerRun& run, const std::atomic<bool>* stop) const;

 private:
  std::string bin_dir_;
  double timeout_s_;
};

}  // namespace graft::bench
