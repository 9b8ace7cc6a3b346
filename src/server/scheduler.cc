#include "server/scheduler.h"

#include <algorithm>

#include "graft/error.h"
#include "server/text_stream.h"

namespace graft::server {
namespace {
double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

void FinishJob(Job& job, const std::string& finish_reason, const std::string& error) {
  {
    std::lock_guard lk(job.mu);
    job.done = true;
    job.finish_reason = finish_reason;
    job.error = error;
  }
  job.cv.notify_all();
}

Scheduler::Scheduler(const Model& target, std::vector<std::unique_ptr<Engine>> engines, int32_t queue_max,
                     Metrics* metrics)
    : target_(target), engines_(std::move(engines)), queue_max_(queue_max), metrics_(metrics) {
  GRAFT_CHECK(!engines_.empty(), "a scheduler needs at least one engine");
  for (auto& e : engines_) workers_.emplace_back([this, eng = e.get()] { WorkerLoop(eng); });
}

Scheduler::~Scheduler() { Shutdown(); }

Scheduler::Admit Scheduler::Submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return Admit::kShuttingDown;
    const size_t capacity = engines_.size() + static_cast<size_t>(queue_max_);
    if (queue_.size() + running_.size() >= capacity) return Admit::kQueueFull;
    job->t_submit = Clock::now();
    queue_.push_back(job);
  }
  cv_.notify_one();
  return Admit::kOk;
}

void Scheduler::Shutdown() {
  std::lock_guard once(shutdown_mu_);
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard lk(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    dropped.swap(queue_);
    for (auto& j : running_) j->cancel = true;
  }
  cv_.notify_all();
  for (auto& j : dropped) {
    metrics_->CountDropped();
    FinishJob(*j, "cancelled", "the server is shutting down");
  }
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  std::lock_guard lk(mu_);
  workers_.clear();
}

QueueGauges Scheduler::gauges() const {
  std::lock_guard lk(mu_);
  return {static_cast<int32_t>(queue_.size()), static_cast<int32_t>(running_.size()),
          static_cast<int32_t>(engines_.size())};
}

void Scheduler::WorkerLoop(Engine* engine) {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // Shutdown finishes what is still queued
      job = std::move(queue_.front());
      queue_.pop_front();
      running_.push_back(job);
    }
    if (job->cancel) {
      metrics_->CountDropped();
      FinishJob(*job, "cancelled");
    } else {
      Run(engine, *job);
    }
    std::lock_guard lk(mu_);
    running_.erase(std::find(running_.begin(), running_.end(), job));
  }
}

void Scheduler::Run(Engine* engine, Job& job) {
  const auto t_start = Clock::now();
  double first_token_ms = -1;
  TextStream ts(job.stop);
  GenerateRequest req = job.request;
  auto publish = [&job](const std::string& delta) {
    if (delta.empty()) return;
    {
      std::lock_guard lk(job.mu);
      job.text += delta;
    }
    job.cv.notify_all();
  };
  req.on_tokens = [&](const std::vector<Token>& toks) {
    if (first_token_ms < 0) first_token_ms = MsBetween(t_start, Clock::now());
    std::string delta;
    for (Token t : toks) {
      delta += ts.Push(target_.TokenToPiece(t));
      if (ts.stopped()) break;
    }
    publish(delta);
    return !ts.stopped() && !job.cancel.load();
  };
  req.cancelled = [&job] { return job.cancel.load(); };
  GenerateResult res;
  std::string finish, error;
  try {
    res = engine->Generate(req, job.options);
    if (ts.stopped()) finish = "stop";
    else if (res.stats.stop_reason == "cancelled") finish = "cancelled";
    else if (res.stats.stop_reason == "eog") finish = "stop";
    else finish = "length";  // "length" or "context"
  } catch (const std::exception& e) {
    finish = "error";
    error = std::string("generation failed: ") + e.what();
  }
  if (finish != "error" && finish != "cancelled") publish(ts.Finish());
  if (finish == "cancelled" && job.cancel.load()) error = "the generation was cancelled";
  metrics_->CountGeneration(res.stats, job.options.method, finish, MsBetween(job.t_submit, t_start), first_token_ms);
  {
    std::lock_guard lk(job.mu);
    job.stats = res.stats;
  }
  FinishJob(job, finish, error);
}

}  // namespace graft::server
