// graft serve: the OpenAI-compatible HTTP server (src/server) over N engines.
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cli_options.h"
#include "commands.h"
#include "graft/error.h"
#include "server/server.h"

namespace graft::cli {
namespace {

struct ServeFlags {
  ModelFlags models;
  DecodeFlags decode;
  LearnedFlags learned;
  std::string host = "127.0.0.1";
  int port = 8080;
  int32_t parallel = 1;
  int32_t queue_max = 16;
  int32_t max_tokens_limit = 4096;
  int32_t default_max_tokens = 256;
  int64_t max_body_bytes = 1 << 20;
  int32_t max_budget = 0;  // 0: 64, or less so that every slot's tree fits llama.cpp's 256 sequences
  int32_t prefill_chunk = 256;
  bool cache_prompt = false;
  std::vector<std::string> aliases;
};

// SIGINT / SIGTERM are blocked in every thread (the mask is inherited) and taken by
// one thread with sigwait, which calls the handler outside signal context.
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGUSR1);  // internal wake-up at exit
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] {
      for (;;) {
        int sig = 0;
        sigwait(&set_, &sig);
        std::lock_guard lk(mu_);
        if (exiting_) return;
        if (sig == SIGUSR1 || fired_) continue;
        fired_ = true;
        if (on_signal_) on_signal_();
      }
    });
  }
  ~SignalWatcher() {
    {
      std::lock_guard lk(mu_);
      exiting_ = true;
    }
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }
  // Runs `f` on the first signal (at once if one already came).
  void OnSignal(std::function<void()> f) {
    std::lock_guard lk(mu_);
    on_signal_ = std::move(f);
    if (fired_ && on_signal_) on_signal_();
  }
  bool fired() {
    std::lock_guard lk(mu_);
    return fired_;
  }

 private:
  sigset_t set_;
  std::thread thread_;
  std::mutex mu_;
  std::function<void()> on_signal_;
  bool fired_ = false;
  bool exiting_ = false;
};

int RunServe(const ServeFlags& f) {
  if (f.parallel < 1) throw Error("--parallel must be at least 1");
  if (f.queue_max < 0) throw Error("--queue-max must be >= 0");
  if (f.max_tokens_limit < 1) throw Error("--max-tokens-limit must be at least 1");
  if (f.max_body_bytes < 1024) throw Error("--max-body-bytes must be at least 1024");
  SignalWatcher signals;  // before any thread starts, so all inherit the mask

  if (f.prefill_chunk < 1) throw Error("--prefill-chunk must be at least 1");
  if (f.max_budget < 0) throw Error("--max-budget must be at least 1 (or 0 for the default)");
  // Every slot's tree needs its own llama.cpp sequence ids, 256 in all.
  const int32_t max_budget =
      std::max(f.max_budget > 0 ? f.max_budget : std::min(64, 256 / f.parallel), f.decode.tree_budget);
  LoadedModels lm = LoadModelFiles(f.models);
  DecodeOptions defaults = f.decode.ToOptions(lm.draft != nullptr);
  EngineGroupOptions go;
  go.slots = f.parallel;
  go.prefill_chunk = f.prefill_chunk;
  EngineConfig ec = MakeEngineConfig(f.models, max_budget);
  ec.learned_state = f.learned.PathFor(f.models, *lm.target, lm.draft.get());
  auto engines = std::make_unique<EngineGroup>(*lm.target, lm.draft.get(), ec, go);
  engines->engine(0).Validate(defaults);
  if (signals.fired()) return 0;
  // graft's cost profile before the first request, not during it (measured once per
  // machine, then read from the cache).
  if (defaults.method == Method::kGraft && defaults.adaptive) {
    const double measured_ms = engines->PrepareCostProfile();
    if (measured_ms > 0) fprintf(stderr, "graft serve: measured the cost profile in %.1f s\n", measured_ms / 1000);
  }

  server::ServerOptions so;
  so.host = f.host;
  so.port = f.port;
  so.queue_max = f.queue_max;
  so.max_body_bytes = static_cast<size_t>(f.max_body_bytes);
  so.n_ctx = f.models.ctx;
  so.draft_name = lm.draft ? lm.draft->path() : "";
  const std::filesystem::path target_path(lm.target->path());
  so.policy.model_names = {target_path.stem().string(), "graft", target_path.filename().string()};
  for (const auto& a : f.aliases) so.policy.model_names.push_back(a);
  so.policy.decode = defaults;
  so.policy.sampling = f.decode.ToSampling();
  so.policy.fresh_seed = !f.decode.SeedGiven();  // without -s, each request draws its own
  so.policy.default_max_tokens = std::min(f.default_max_tokens, f.max_tokens_limit);
  so.policy.max_tokens_limit = f.max_tokens_limit;
  so.policy.max_budget = max_budget;
  so.policy.cache_prompt = f.cache_prompt;  // every request says (GenerateRequest::reuse_prefix)

  server::Server srv(*lm.target, std::move(engines), so);
  const int port = srv.Bind();
  printf("graft serve: listening on http://%s:%d\n", f.host.c_str(), port);
  fflush(stdout);
  fprintf(stderr, "graft serve: model %s, %d slot(s), queue %d, method %s (budget %d), ctx %d\n",
          so.policy.model_names.front().c_str(), f.parallel, f.queue_max, MethodName(defaults.method).c_str(),
          defaults.tree_budget, f.models.ctx);
  signals.OnSignal([&srv] { srv.Stop(); });
  const bool ok = srv.Listen();
  srv.Stop();
  signals.OnSignal(nullptr);
  fprintf(stderr, "graft serve: stopped\n");
  return ok ? 0 : 1;
}

}  // namespace

void AddServeCommand(CLI::App& app, std::function<int()>* run) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* sub = app.add_subcommand(
      "serve",
      "OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics.\n"
      "The --parallel slots share one target KV cache (-c tokens per slot) and every step is one\n"
      "target pass over all running requests (continuous batching). Memory: per slot, the target's\n"
      "and the draft's KV cache of -c tokens, a history index and its own copy of the --index\n"
      "datastore; model weights are shared.");
  flags->models.Add(sub);
  flags->decode.Add(sub);
  flags->learned.Add(sub);
  sub->add_option("--host", flags->host, "address to listen on")->capture_default_str();
  sub->add_option("--port", flags->port, "port (0 = any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  sub->add_option("--parallel", flags->parallel, "slots: requests generated at once, batched into one pass per step")
      ->capture_default_str();
  sub->add_option("--prefill-chunk", flags->prefill_chunk,
                  "prompt tokens prefilled per step, joining requests together (bounds the others' step latency)")
      ->capture_default_str();
  sub->add_option("--queue-max", flags->queue_max, "requests that may wait for a slot; more get HTTP 503")
      ->capture_default_str();
  sub->add_option("--max-tokens-limit", flags->max_tokens_limit, "largest max_tokens a request may ask for")
      ->capture_default_str();
  sub->add_option("--default-max-tokens", flags->default_max_tokens, "max_tokens when a request gives none")
      ->capture_default_str();
  sub->add_option("--max-body-bytes", flags->max_body_bytes, "largest request body (HTTP 413 above)")
      ->capture_default_str();
  sub->add_option("--max-budget", flags->max_budget, "largest graft.budget a request may ask for (sizes the contexts; 0 = min(64, 256 / --parallel))")
      ->capture_default_str();
  sub->add_flag("--cache-prompt", flags->cache_prompt,
               "requests reuse the KV cache of a prompt prefix a slot holds unless they say "
               "\"cache_prompt\": false (without the flag only those that say true do): a prompt whose first "
               "half or more a free slot holds goes to that slot, so a chat's next turn prefills only its new "
               "tokens (llama-server's cache_prompt). A kept prefix was computed in other batches, so an "
               "output can part from an uncached run's at a near-tie");
  sub->add_option("--alias", flags->aliases, "extra names listed for the model in /v1/models (repeatable; requests may name any model)");
  sub->callback([flags, run] { *run = [flags] { return RunServe(*flags); }; });
}

}  // namespace graft::cli
