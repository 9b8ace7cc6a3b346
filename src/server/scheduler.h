// Slots and the wait queue. Each slot is one Engine (its own target/draft KV caches
// and learned state) driven by one worker thread; an Engine serves one request at a
// time, so N slots run N generations at once. Admitted jobs wait in a FIFO bounded
// by `queue_max`; beyond that Submit refuses (the server answers 503).
//
// A job produces text into its own buffer; the HTTP thread that owns the request
// drains it at the client's pace. So a slow client never stalls an engine, and a
// gone client (write failed) sets `cancel`, which the engine sees at its next
// on_tokens call (within one target pass) or the worker sees before starting.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "graft/engine.h"
#include "server/metrics.h"

namespace graft::server {

using Clock = std::chrono::steady_clock;

struct Job {
  // Input, fixed before Submit.
  GenerateRequest request;        // prompt, n_predict, sampling (on_tokens is set by the worker)
  DecodeOptions options;
  std::vector<std::string> stop;  // stop sequences (TextStream)

  // Set by anyone (HTTP thread on disconnect, Shutdown); read by the worker.
  std::atomic<bool> cancel{false};

  // Output, guarded by mu; cv signals new text and completion.
  std::mutex mu;
  std::condition_variable cv;
  std::string text;            // text released so far (UTF-8 complete, cut at a stop sequence)
  bool done = false;
  std::string finish_reason;   // when done: "stop" | "length" | "cancelled" | "error"
  std::string error;           // when finish_reason is "error" or "cancelled" by shutdown
  GenerationStats stats;       // when done (zero if it never ran)
  Clock::time_point t_submit;  // set by Submit
};

class Scheduler {
 public:
  // `target` renders token text; `engines` become the slots (at least one).
  Scheduler(const Model& target, std::vector<std::unique_ptr<Engine>> engines, int32_t queue_max, Metrics* metrics);
  ~Scheduler();  // Shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Admit { kOk, kQueueFull, kShuttingDown };
  // Admits `job` when fewer than slots + queue_max jobs are queued or running. O(1).
  Admit Submit(const std::shared_ptr<Job>& job);

  // Refuses new jobs, finishes queued ones as cancelled, cancels running ones and
  // joins the workers (each stops within one target pass). Idempotent.
  void Shutdown();

  // For Engine::Validate (same configuration on every slot).
  const Engine& engine() const { return *engines_.front(); }
  QueueGauges gauges() const;

 private:
  void WorkerLoop(Engine* engine);
  void Run(Engine* engine, Job& job);

  const Model& target_;
  std::vector<std::unique_ptr<Engine>> engines_;
  const int32_t queue_max_;
  Metrics* metrics_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;         // admitted, not started
  std::vector<std::shared_ptr<Job>> running_;      // started, not finished
  bool stopping_ = false;
  std::mutex shutdown_mu_;                         // serialises Shutdown (signal thread vs destructor)
  std::vector<std::thread> workers_;               // one per engine
};

// Marks `job` finished and wakes its reader.
void FinishJob(Job& job, const std::string& finish_reason, const std::string& error = "");

}  // namespace graft::server
