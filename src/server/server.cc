#include "server/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <random>
#include <thread>

#include "graft/error.h"
#include "server/peer_socket.h"

namespace graft::server {
namespace {

using nlohmann::json;

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(Dump(body), "application/json");
}

void SendError(httplib::Response& res, const ApiError& e) {
  if (e.status == 503) res.set_header("Retry-After", "1");
  SendJson(res, e.status, ErrorJson(e));
}

std::string SseEvent(const json& j) { return "data: " + Dump(j) + "\n\n"; }

// `usage` (its prompt tokens) completed by what the generation did.
Usage UsageAfter(Usage usage, const GenerationStats& st) {
  usage.completion_tokens = st.n_generated;
  usage.cached_tokens = st.n_prompt_cached;
  return usage;
}

// Known paths keep their label in /metrics; anything else is "other" (bounded labels).
std::string PathLabel(const std::string& path) {
  for (const char* p : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"}) {
    if (path == p) return path;
  }
  return "other";
}

}  // namespace

struct Server::Impl {
  const Model& target;
  ServerOptions opt;
  Metrics metrics;
  std::unique_ptr<Scheduler> scheduler;
  httplib::Server http;
  std::atomic<bool> stopping{false};
  std::atomic<bool> http_stopped{false};
  std::atomic<bool> listen_called{false};
  std::atomic<bool> listen_returned{false};
  std::atomic<uint64_t> next_id{0};
  uint64_t id_base = 0;
  int64_t started = 0;  // unix seconds

  Impl(const Model& t, std::unique_ptr<EngineGroup> engines, const ServerOptions& o) : target(t), opt(o) {
    const size_t slots = static_cast<size_t>(engines->slots());
    scheduler = std::make_unique<Scheduler>(t, std::move(engines), o.queue_max, &metrics);
    id_base = std::random_device{}() * 0x9E3779B97F4A7C15ull;
    started = static_cast<int64_t>(std::time(nullptr));
    // Every admitted request holds a connection thread while it waits or streams;
    // the rest answer /health, /metrics and refusals.
    const size_t threads = slots + static_cast<size_t>(o.queue_max) + 16;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(o.max_body_bytes);
    Routes();
  }

  std::string NewId(Endpoint ep) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(id_base + next_id.fetch_add(1) * 7919));
    return std::string(ep == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + buf;
  }

  void Routes() {
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Guarded(res, [&] { Complete(req, res, Endpoint::kCompletions); });
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Guarded(res, [&] { Complete(req, res, Endpoint::kChat); });
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json model = {{"id", opt.policy.model_names.front()}, {"object", "model"}, {"created", started},
                    {"owned_by", "graft"},
                    {"graft", {{"target", target.path()}, {"draft", opt.draft_name}, {"n_ctx", opt.n_ctx},
                               {"slots", scheduler->gauges().slots},
                               {"default_method", MethodName(opt.policy.decode.method)},
                               {"aliases", opt.policy.model_names}}}};
      SendJson(res, 200, {{"object", "list"}, {"data", json::array({model})}});
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const QueueGauges g = scheduler->gauges();
      SendJson(res, stopping ? 503 : 200,
               {{"status", stopping ? "shutting_down" : "ok"}, {"slots", g.slots}, {"in_flight", g.in_flight},
                {"queued", g.queued}});
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.Render(scheduler->gauges()), "text/plain; version=0.0.4");
    });
    // httplib's own refusals (404 route, 413 body, 400 unparsable request) in our shape.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                         httplib::Response& res) {
      if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
      ApiError e{res.status, "", "", ""};
      switch (res.status) {
        case 404: e.message = "no route for " + req.method + " " + req.path; e.code = "not_found"; break;
        case 413:
          e.message = "the request body exceeds " + std::to_string(opt.max_body_bytes) + " bytes (--max-body-bytes)";
          e.code = "request_too_large";
          break;
        default: e.message = "bad request (HTTP " + std::to_string(res.status) + ")"; break;
      }
      SendError(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics.CountHttp(PathLabel(req.path), res.status);
    });
  }

  template <typename F>
  void Guarded(httplib::Response& res, F&& f) {
    try {
      f();
    } catch (const ApiError& e) {
      SendError(res, e);
    } catch (const std::exception& e) {
      SendError(res, {500, std::string("internal error: ") + e.what(), "", "", "server_error"});
    }
  }

  // Prompt tokens of a validated request; throws ApiError for a prompt the model
  // cannot take (no chat template, token ids out of range, too long, empty).
  std::vector<Token> Encode(const ParsedRequest& p) {
    std::vector<Token> tokens;
    if (p.endpoint == Endpoint::kChat) {
      std::string formatted;
      try {
        formatted = target.ApplyChatTemplate(p.messages, /*add_assistant=*/true);
      } catch (const Error& e) {
        throw ApiError{400, std::string(e.what()) + " (use /v1/completions)", "messages", "invalid_value"};
      }
      tokens = target.Tokenize(formatted, /*add_special=*/true, /*parse_special=*/true);
    } else if (!p.prompt_tokens.empty()) {
      for (Token t : p.prompt_tokens) {
        if (t >= target.n_vocab()) {
          throw ApiError{400, "token id " + std::to_string(t) + " is not in the vocabulary (size " +
                                  std::to_string(target.n_vocab()) + ")", "prompt", "invalid_value"};
        }
      }
      tokens = p.prompt_tokens;
    } else {
      // Same as `graft generate --raw`: BOS + text, special-token text stays text.
      tokens = target.Tokenize(p.prompt, /*add_special=*/true, /*parse_special=*/false);
    }
    const char* param = p.endpoint == Endpoint::kChat ? "messages" : "prompt";
    if (tokens.empty()) throw ApiError{400, "the prompt is empty", param, "invalid_value"};
    if (static_cast<int32_t>(tokens.size()) >= opt.n_ctx) {
      throw ApiError{400, "the prompt is " + std::to_string(tokens.size()) + " tokens but the context holds " +
                              std::to_string(opt.n_ctx) + " (shorten it, or restart the server with a larger -c)",
                     param, "context_length_exceeded"};
    }
    return tokens;
  }

  void Complete(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
    if (stopping) throw ApiError{503, "the server is shutting down", "", "shutting_down", "server_error"};
    ParsedRequest p = ParseRequest(req.body, ep, opt.policy);
    try {
      scheduler->engine().Validate(p.decode);
    } catch (const Error& e) {
      throw ApiError{400, e.what(), "graft", "invalid_value"};
    }
    auto job = std::make_shared<Job>();
    job->request.prompt = Encode(p);
    job->request.n_predict = p.max_tokens;
    job->request.sampling = p.sampling;
    job->request.reuse_prefix = p.cache_prompt;
    job->options = p.decode;
    job->stop = p.stop;
    switch (scheduler->Submit(job)) {
      case Scheduler::Admit::kOk: break;
      case Scheduler::Admit::kQueueFull:
        metrics.CountRejected();
        throw ApiError{503, "the server is busy: all slots and the wait queue (--queue-max " +
                                std::to_string(opt.queue_max) + ") are full; retry later",
                       "", "queue_full", "server_error"};
      case Scheduler::Admit::kShuttingDown:
        throw ApiError{503, "the server is shutting down", "", "shutting_down", "server_error"};
    }
    ResponseMeta meta{ep, NewId(ep), static_cast<int64_t>(std::time(nullptr)), opt.policy.model_names.front()};
    const Usage usage{static_cast<int32_t>(job->request.prompt.size()), 0};
    if (p.stream) {
      Stream(res, job, meta, usage, p.include_usage);
      return;
    }
    // The response goes out at the end, so no failed write tells us the client left:
    // watch its socket between waits and cancel the generation when it hangs up.
    // The peek (the first one scans /proc/self/fd) runs outside the job's lock, which
    // the worker takes to publish text.
    PeerSocket peer(req.remote_addr, req.remote_port);
    std::unique_lock lk(job->mu, std::defer_lock);
    for (;;) {
      if (!job->cancel && peer.Closed()) job->cancel = true;
      lk.lock();
      if (job->cv.wait_for(lk, std::chrono::milliseconds(50), [&] { return job->done; })) break;
      lk.unlock();
    }
    if (job->finish_reason == "error") throw ApiError{500, job->error, "", "", "server_error"};
    if (job->finish_reason == "cancelled") {
      throw ApiError{503, job->error.empty() ? "cancelled" : job->error, "", "cancelled", "server_error"};
    }
    SendJson(res, 200, CompletionJson(meta, job->text, job->finish_reason, UsageAfter(usage, job->stats),
                                      GraftStatsJson(job->stats, job->options.method)));
  }

  // Server-sent events: the connection thread drains the job's text at the client's
  // pace; a failed write cancels the job.
  void Stream(httplib::Response& res, const std::shared_ptr<Job>& job, const ResponseMeta& meta, const Usage& usage,
              bool include_usage) {
    struct State {
      size_t sent = 0;     // bytes of job->text already sent
      bool first = true;   // chat: the role chunk is still due
    };
    auto state = std::make_shared<State>();
    const auto keepalive = std::chrono::milliseconds(opt.keepalive_ms);
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    auto provider = [job, meta, usage, include_usage, state, keepalive](size_t, httplib::DataSink& sink) {
      std::string delta, finish, error;
      GenerationStats stats;
      bool finished = false;
      const bool role_due = meta.endpoint == Endpoint::kChat && state->first;
      {
        std::unique_lock lk(job->mu);
        if (!role_due) job->cv.wait_for(lk, keepalive, [&] { return job->text.size() > state->sent || job->done; });
        delta = job->text.substr(state->sent);
        state->sent = job->text.size();
        finished = job->done;
        if (finished) {
          finish = job->finish_reason;
          error = job->error;
          stats = job->stats;
        }
      }
      std::string out;
      if (!delta.empty() || role_due) out += SseEvent(ChunkJson(meta, delta, role_due, std::nullopt));
      state->first = false;
      if (finished) {
        if (finish == "error" || finish == "cancelled") {
          out += SseEvent(ErrorJson({500, error.empty() ? "cancelled" : error, "", finish, "server_error"}));
        } else {
          json last = ChunkJson(meta, "", false, finish);
          last["usage"] = UsageJson(UsageAfter(usage, stats));
          last["graft"] = GraftStatsJson(stats, job->options.method);
          out += SseEvent(last);
          if (include_usage) {
            json tail = ChunkJson(meta, "", false, std::nullopt);
            tail["choices"] = json::array();
            tail["usage"] = last["usage"];
            out += SseEvent(tail);
          }
        }
        out += "data: [DONE]\n\n";
      }
      if (out.empty()) out = ": keep-alive\n\n";  // an SSE comment; a gone client fails the next write
      if (!sink.write(out.data(), out.size())) {
        job->cancel = true;
        return false;
      }
      if (finished) sink.done();
      return true;
    };
    // Runs when the response ends; success = false means the client went away.
    auto releaser = [job](bool success) {
      if (!success) job->cancel = true;
    };
    res.set_chunked_content_provider("text/event-stream", provider, releaser);
  }
};

Server::Server(const Model& target, std::unique_ptr<EngineGroup> engines, const ServerOptions& options)
    : impl_(std::make_unique<Impl>(target, std::move(engines), options)) {}

Server::~Server() { Stop(); }

int Server::Bind() {
  Impl& s = *impl_;
  int port = s.opt.port;
  if (port == 0) {
    port = s.http.bind_to_any_port(s.opt.host);
    if (port < 0) port = 0;
  } else if (!s.http.bind_to_port(s.opt.host, port)) {
    port = 0;
  }
  if (port <= 0) {
    throw Error("cannot listen on " + s.opt.host + ":" + std::to_string(s.opt.port) +
                " (address in use or not local? pick another --port, or --port 0 for any free one)");
  }
  return port;
}

bool Server::Listen() {
  Impl& s = *impl_;
  bool ok = true;
  s.listen_called = true;  // before reading `stopping`; Stop() does the reverse
  if (!s.stopping) ok = s.http.listen_after_bind();
  s.listen_returned = true;
  return ok || s.stopping;
}

void Server::Stop() {
  Impl& s = *impl_;
  s.stopping = true;
  s.scheduler->Shutdown();  // wakes every connection thread waiting on a job
  if (s.http_stopped.exchange(true)) return;
  // Stop() may race with Listen() starting: wait (briefly) until it is running.
  for (int i = 0; i < 500 && s.listen_called && !s.http.is_running() && !s.listen_returned; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (s.http.is_running()) s.http.stop();
}

}  // namespace graft::server
