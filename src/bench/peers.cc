#include "bench/peers.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "graft/error.h"

extern char** environ;

namespace graft::bench {
namespace {

namespace fs = std::filesystem;

// The pinned source our backend and the peers come from (scripts/setup.sh).
constexpr const char* kPinnedSource = "llama-cpp-python-0.3.36";
constexpr int32_t kPeerMinBatch = 2048;  // llama.cpp's default -b

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

bool EndsWith(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// The first match of `re` in `text`: its groups, or empty.
std::smatch Find(const std::string& text, const char* re) {
  std::smatch m;
  std::regex_search(text, m, std::regex(re));
  return m;
}

// The last lines of a tool's stderr, for an error message.
std::string Tail(const std::string& err, size_t max_chars = 400) {
  std::string t = err.size() > max_chars ? err.substr(err.size() - max_chars) : err;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  for (char& c : t) if (c == '\n') c = '|';
  return t;
}

void ParseCompletion(const std::string& out, const std::string& err, PeerReport* r) {
  const std::smatch p = Find(err, R"(prompt eval time =\s*([0-9.]+) ms /\s*([0-9]+) tokens)");
  const std::smatch e = Find(err, R"(\seval time =\s*([0-9.]+) ms /\s*([0-9]+) runs)");
  if (p.empty() || e.empty()) {
    r->error = "no 'prompt eval time' / 'eval time' lines in llama-completion's report";
    return;
  }
  r->prefill_ms = std::stod(p[1]);
  r->n_prompt = std::stoi(p[2]);
  r->decode_ms = std::stod(e[1]);
  r->n_generated = std::stoi(e[2]);  // decodes; CountLikeOurs makes them tokens
  std::string text = out;
  if (EndsWith(text, "\n\n")) text.resize(text.size() - 2);
  r->eog = EndsWith(text, " [end of text]\n");
  if (r->eog) text.resize(text.size() - 15);
  r->text = text;
}

void ParseSpeculative(const std::string& out, const std::string& err, const std::string& echo, PeerReport* r) {
  const std::smatch enc = Find(err, R"(encoded\s+([0-9]+) tokens in\s+([0-9.]+) seconds)");
  const std::smatch dec = Find(err, R"(decoded\s+([0-9]+) tokens in\s+([0-9.]+) seconds)");
  if (enc.empty() || dec.empty()) {
    r->error = "no 'encoded' / 'decoded' lines in the tool's report";
    return;
  }
  r->n_prompt = std::stoi(enc[1]);
  r->prefill_ms = std::stod(enc[2]) * 1000.0;
  r->n_generated = std::stoi(dec[1]);
  r->decode_ms = std::stod(dec[2]) * 1000.0;
  const std::string after = err.substr(static_cast<size_t>(dec.position(0)));
  const std::smatch drafted = Find(after, R"(n_drafted\s*=\s*([0-9]+))");
  const std::smatch accepted = Find(after, R"(n_accept\s*=\s*([0-9]+))");
  if (drafted.empty() || accepted.empty()) {
    r->error = "no 'n_drafted' / 'n_accept' lines in the tool's report";
    return;
  }
  r->n_drafted = std::stoll(drafted[1]);
  r->n_accepted = std::stoll(accepted[1]);
  // stdout: "\n\n" + the prompt's pieces + the output + "\n\n" (+ "\n\n" at exit).
  const size_t at = out.find(echo);
  if (echo.empty() || at == std::string::npos || out.find_first_not_of('\n') < at) {
    r->error = "the tool's output does not start with the prompt";
    return;
  }
  std::string text = out.substr(at + echo.size());
  for (int i = 0; i < 2 && EndsWith(text, "\n\n"); ++i) text.resize(text.size() - 2);
  r->text = text;
}

// Turns a tool's counts into ours: tokens are the tokens decode passes produced (an
// end-of-generation token is not one; its pass is), passes are the target passes timed.
//   completion: one decode per token after the first, which its prefill sampled; the
//               last decode yields the end token when it stopped there.
//   speculative-simple: counts every sampled token, the end token too; its prefill
//               leaves out the last prompt token, so (as ours) passes produce them all:
//               passes = sampled - accepted drafts. It stops once past -n.
//   lookup:     counts as speculative-simple, but its prefill also decodes the last
//               prompt token: the first token comes free, one pass fewer.
void CountLikeOurs(PeerTool tool, int32_t n_predict, PeerReport* r) {
  if (tool == PeerTool::kCompletion) {
    r->n_passes = r->n_generated;
    if (r->eog) --r->n_generated;
    return;
  }
  r->eog = r->n_generated <= n_predict;
  const int32_t free_first = tool == PeerTool::kLookup ? 1 : 0;
  r->n_passes = static_cast<int32_t>(r->n_generated - r->n_accepted) - free_first;
  r->n_generated -= free_first + (r->eog ? 1 : 0);
}

// -b: llama-speculative-simple refuses a prompt longer than the logical batch, and
// llama-lookup aborts adding it to one (common_batch::get_sub_batch), so the batch
// holds the whole prompt (llama.cpp's 2048 at least). The micro-batch, what one
// forward pass computes, stays llama.cpp's default (512).
std::vector<std::string> Shared(const PeerRun& run, const std::string& prompt_file) {
  const std::string t = std::to_string(run.n_threads);
  const int32_t n_batch = std::max(kPeerMinBatch, run.prompt_tokens);
  return {"-m", run.target_path, "-f", prompt_file, "-n", std::to_string(run.n_predict),
          "-c", std::to_string(run.n_ctx), "-b", std::to_string(n_batch), "-t", t, "-tb", t,
          "--temp", "0", "--seed", "1"};
}

}  // namespace

const std::vector<PeerSpec>& AllPeers() {
  // Settings: llama.cpp's defaults unless its docs give a recipe (docs/speculative.md of
  // the pinned source; llama-draft-tuned: ggml-org/llama.cpp PR #10290 / #10455, the
  // CPU advice behind llama-server's draft settings: long drafts of confident tokens only,
  // no verification of fewer than 5).
  static const std::vector<PeerSpec> peers = {
      {"llama-ar", PeerTool::kCompletion, {"-no-cnv", "--no-display-prompt"}, false,
       "plain decoding (llama-completion)"},
      {"llama-draft", PeerTool::kSpeculativeSimple, {"--spec-type", "draft-simple"}, true,
       "draft model, llama.cpp's defaults (--spec-draft-n-max 3, p-min 0)"},
      {"llama-draft-tuned", PeerTool::kSpeculativeSimple,
       {"--spec-type", "draft-simple", "--spec-draft-n-max", "16", "--spec-draft-n-min", "5", "--spec-draft-p-min", "0.9"},
       true, "draft model, CPU settings (--spec-draft-n-max 16 --spec-draft-n-min 5 --spec-draft-p-min 0.9)"},
      {"llama-ngram-mod", PeerTool::kSpeculativeSimple, {"--spec-type", "ngram-mod"}, false,
       "n-gram hash pool (llama-server's --spec-default; n-match 24, n-min 48, n-max 64)"},
      {"llama-ngram-simple", PeerTool::kSpeculativeSimple, {"--spec-type", "ngram-simple", "--spec-draft-n-max", "64"},
       false, "last-n-gram lookup in the context (docs' usage: --spec-draft-n-max 64)"},
      {"llama-ngram-map-k4v", PeerTool::kSpeculativeSimple,
       {"--spec-type", "ngram-map-k4v", "--spec-ngram-map-k4v-size-n", "8", "--spec-ngram-map-k4v-size-m", "8",
        "--spec-ngram-map-k4v-min-hits", "2", "--spec-draft-n-max", "64"},
       false, "n-gram map with 4 values per key (docs' usage: size-n 8, size-m 8, min-hits 2, n-max 64)"},
      {"llama-lookup", PeerTool::kLookup, {}, false, "n-gram cache of the context (llama-lookup, its defaults)"},
  };
  return peers;
}

const PeerSpec& ParsePeer(const std::string& name) {
  std::string names;
  for (const PeerSpec& p : AllPeers()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  throw Error("unknown peer '" + name + "' (peers: " + names + ")");
}

const char* PeerToolBinary(PeerTool tool) {
  switch (tool) {
    case PeerTool::kCompletion: return "llama-completion";
    case PeerTool::kSpeculativeSimple: return "llama-speculative-simple";
    case PeerTool::kLookup: return "llama-lookup";
  }
  return "?";
}

std::string DefaultPeersDir() {
  if (const char* d = std::getenv("GRAFT_PEERS_DIR"); d != nullptr && *d != '\0') return d;
  const char* home = std::getenv("HOME");
  return (fs::path(home != nullptr ? home : "/tmp") / ".cache" / "graft" / "peers" / kPinnedSource / "bin").string();
}

PeerReport ParsePeerOutput(PeerTool tool, const std::string& out, const std::string& err, const std::string& echo,
                           int32_t n_predict) {
  PeerReport r;
  try {
    if (tool == PeerTool::kCompletion) ParseCompletion(out, err, &r);
    else ParseSpeculative(out, err, echo, &r);
  } catch (const std::exception& e) {  // a number std::stod/stoi cannot take
    r = PeerReport{};
    r.error = std::string("unparseable report: ") + e.what();
  }
  if (!r.ok()) return r;
  CountLikeOurs(tool, n_predict, &r);
  if (r.n_passes <= 0 || r.n_generated < 0 || r.decode_ms <= 0) r.error = "the tool reports no decoded tokens";
  return r;
}

std::vector<std::string> PeerArgv(const PeerSpec& peer, const std::string& bin_dir, const PeerRun& run,
                                  const std::string& prompt_file) {
  std::vector<std::string> argv = {(fs::path(bin_dir) / PeerToolBinary(peer.tool)).string()};
  const std::vector<std::string> shared = Shared(run, prompt_file);
  argv.insert(argv.end(), shared.begin(), shared.end());
  if (peer.needs_draft) {
    const std::string t = std::to_string(run.n_threads);
    argv.insert(argv.end(), {"-md", run.draft_path, "-td", t, "-tbd", t});
  }
  argv.insert(argv.end(), peer.args.begin(), peer.args.end());
  return argv;
}

ProcessResult RunProcess(const std::vector<std::string>& argv, double timeout_s, const std::atomic<bool>* stop) {
  ProcessResult res;
  char dir_tmpl[] = "/tmp/graft-peer-XXXXXX";
  if (mkdtemp(dir_tmpl) == nullptr) {
    res.spawn_error = "cannot create a temporary folder";
    return res;
  }
  const fs::path dir(dir_tmpl);
  const std::string out_path = (dir / "stdout").string(), err_path = (dir / "stderr").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: a kill reaches its children
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    res.spawn_error = std::string("cannot run ") + argv[0] + ": " + std::strerror(rc);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int status = 0;
    for (;;) {
      const pid_t w = waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (w < 0 && errno != EINTR) break;
      const bool late = std::chrono::steady_clock::now() > deadline;
      const bool stopped = stop != nullptr && stop->load();
      if (late || stopped) {
        res.timed_out = late;
        res.cancelled = stopped;
        kill(-pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    res.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    res.out = ReadAll(out_path);
    res.err = ReadAll(err_path);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return res;
}

std::vector<std::string> PeerRunner::Missing(const std::vector<PeerSpec>& peers) const {
  std::vector<std::string> missing;
  for (const PeerSpec& p : peers) {
    const fs::path bin = fs::path(bin_dir_) / PeerToolBinary(p.tool);
    if (access(bin.c_str(), X_OK) != 0 &&
        std::find(missing.begin(), missing.end(), bin.string()) == missing.end()) {
      missing.push_back(bin.string());
    }
  }
  return missing;
}

PeerReport PeerRunner::Run(const PeerSpec& peer, const PeerRun& run, const std::atomic<bool>* stop) const {
  PeerReport r;
  if (peer.needs_draft && run.draft_path.empty()) {
    r.error = peer.name + " needs a draft model (-md)";
    return r;
  }
  // The prompt goes through a file: -f drops one trailing newline, so one is added
  // (chat prompts end in "\n").
  char tmpl[] = "/tmp/graft-prompt-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) {
    r.error = "cannot create a prompt file";
    return r;
  }
  const std::string content = run.prompt_text + "\n";
  const bool written = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  close(fd);
  ProcessResult p;
  if (written) p = RunProcess(PeerArgv(peer, bin_dir_, run, tmpl), timeout_s_, stop);
  unlink(tmpl);
  if (!written) r.error = "cannot write the prompt file";
  else if (!p.spawn_error.empty()) r.error = p.spawn_error;
  else if (p.cancelled) r.error = "cancelled";
  else if (p.timed_out) r.error = "timed out after " + std::to_string(static_cast<int>(timeout_s_)) + " s";
  else if (p.exit_code != 0) r.error = "exit status " + std::to_string(p.exit_code) + ": " + Tail(p.err);
  if (!r.ok()) return r;
  r = ParsePeerOutput(peer.tool, p.out, p.err, run.prompt_echo, run.n_predict);
  if (r.ok() && r.n_prompt != run.prompt_tokens) {
    r.error = "the tool read the prompt as " + std::to_string(r.n_prompt) + " tokens, ours " +
              std::to_string(run.prompt_tokens);
  }
  return r;
}

}  // namespace graft::bench
