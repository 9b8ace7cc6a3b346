// The OpenAI-compatible HTTP front end (layer: CLI/server -> engine).
//
//   POST /v1/completions        text prompt (BOS + text, no chat template)
//   POST /v1/chat/completions   messages through the model's chat template
//   GET  /v1/models, /health, /metrics
//
// Threads: httplib's pool (slots + queue_max + 16 threads) parses requests, tokenizes
// and validates them, admits them to the Scheduler and then waits for (or streams)
// the job's text; the Scheduler's one thread steps the engine group. See scheduler.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "graft/backend.h"
#include "server/openai_api.h"
#include "server/scheduler.h"

namespace graft::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0 = any free port (Bind returns it)
  int32_t queue_max = 16;               // admitted requests waiting for a slot
  size_t max_body_bytes = 1 << 20;      // larger bodies get 413
  int32_t n_ctx = 4096;                 // every slot's context; longer prompts get 400
  int32_t keepalive_ms = 1000;          // idle stream: send an SSE comment (detects gone clients)
  RequestPolicy policy;
  std::string draft_name;               // for /v1/models ("" = none)
};

class Server {
 public:
  // `target` tokenizes and renders text; it must outlive the server.
  Server(const Model& target, std::unique_ptr<EngineGroup> engines, const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port (the chosen one for port 0).
  // Throws graft::Error when the address cannot be bound.
  int Bind();
  // Serves until Stop(). Returns false if the listener failed.
  bool Listen();
  // Thread-safe, idempotent: refuses new requests, cancels queued and running
  // generations (streams get an error event), stops the listener. Listen() returns
  // once every connection thread has finished.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace graft::server
