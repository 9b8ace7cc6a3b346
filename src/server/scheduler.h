// Slots and the wait queue. The slots are an EngineGroup's (graft/engine.h): one
// thread drives it, and each of its steps is one target pass over every running
// request (continuous batching), so the process never runs two llama.cpp thread
// teams at once. Admitted jobs wait in a FIFO bounded by `queue_max`; beyond that
// Submit refuses (the server answers 503). A job takes a slot between two steps.
//
// A job produces text into its own buffer; the HTTP thread that owns the request
// drains it at the client's pace. So a slow client never stalls the engines, and a
// gone client (write failed, or socket closed) sets `cancel`, which the group sees
// before its next step (prefill included) or the loop sees before starting it.
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
  // `target` renders token text; `group`'s slots serve the jobs.
  Scheduler(const Model& target, std::unique_ptr<EngineGroup> group, int32_t queue_max, Metrics* metrics);
  ~Scheduler();  // Shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Admit { kOk, kQueueFull, kShuttingDown };
  // Admits `job` when fewer than slots + queue_max jobs are queued or running. O(1).
  Admit Submit(const std::shared_ptr<Job>& job);

  // Refuses new jobs, finishes queued ones as cancelled, cancels running ones and
  // joins the loop (running jobs stop at the next step). Idempotent.
  void Shutdown();

  // For Engine::Validate (same configuration on every slot).
  const Engine& engine() const { return group_->engine(0); }
  QueueGauges gauges() const;

 private:
  struct Running;  // a job on a slot: its text stream and timings
  void Loop();
  // The free slot (not busy, not in `taken`) for `request`, or -1 when none is free.
  // For a request that reuses its prompt's cache (GenerateRequest::reuse_prefix, the
  // API's cache_prompt) the slot whose cache holds the longest prefix of the prompt,
  // when that is at least half of it: a conversation's next turn goes back to the slot
  // that holds its start (llama-server's --slot-prompt-similarity 0.5). Otherwise the
  // slot started least recently, whose cache is the stalest. O(slots x common prefix).
  int32_t PickSlot(const GenerateRequest& request, const std::vector<bool>& taken) const;
  // Starts `job` on free slot `slot` (or finishes it when it was cancelled or the
  // group refuses it).
  void Begin(int32_t slot, const std::shared_ptr<Job>& job);
  // Finishes the job of `f.slot` from the group's result.
  void End(EngineGroup::Finished& f);
  // EngineGroup::SaveLearned when a request finished since the last save (a warning
  // when the file cannot be written: the server goes on).
  void SaveLearned();

  const Model& target_;
  std::unique_ptr<EngineGroup> group_;
  const int32_t queue_max_;
  Metrics* metrics_;
  std::vector<std::unique_ptr<Running>> slots_;  // [slot], null = free; touched by the loop only
  bool learned_dirty_ = false;                   // requests finished since the last SaveLearned (loop only)
  std::vector<uint64_t> started_;                // [slot]: when its last job started, in starts (loop only)
  uint64_t starts_ = 0;                          // jobs started so far (loop only)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;         // admitted, not started
  std::vector<std::shared_ptr<Job>> running_;      // started, not finished
  bool stopping_ = false;
  std::mutex shutdown_mu_;                         // serialises Shutdown (signal thread vs destructor)
  std::thread loop_;
};

// Marks `job` finished and wakes its reader.
void FinishJob(Job& job, const std::string& finish_reason, const std::string& error = "");

}  // namespace graft::server
