#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>

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

struct Scheduler::Running {
  std::shared_ptr<Job> job;
  TextStream ts;
  Clock::time_point t_start;
  double first_token_ms = -1;
  Running(std::shared_ptr<Job> j, const std::vector<std::string>& stop) : job(std::move(j)), ts(stop) {}

  void Publish(const std::string& delta) {
    if (delta.empty()) return;
    {
      std::lock_guard lk(job->mu);
      job->text += delta;
    }
    job->cv.notify_all();
  }
};

Scheduler::Scheduler(const Model& target, std::unique_ptr<EngineGroup> group, int32_t queue_max, Metrics* metrics)
    : target_(target), group_(std::move(group)), queue_max_(queue_max), metrics_(metrics) {
  GRAFT_CHECK(group_ != nullptr && group_->slots() >= 1, "a scheduler needs an engine group");
  slots_.resize(group_->slots());
  started_.assign(group_->slots(), 0);
  loop_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() { Shutdown(); }

Scheduler::Admit Scheduler::Submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lk(mu_);
    if (stopping_) return Admit::kShuttingDown;
    const size_t capacity = slots_.size() + static_cast<size_t>(queue_max_);
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
    if (stopping_ && !loop_.joinable()) return;
    stopping_ = true;
    dropped.swap(queue_);
    for (auto& j : running_) j->cancel = true;
  }
  cv_.notify_all();
  for (auto& j : dropped) {
    metrics_->CountDropped();
    FinishJob(*j, "cancelled", "the server is shutting down");
  }
  if (loop_.joinable()) loop_.join();
}

QueueGauges Scheduler::gauges() const {
  std::lock_guard lk(mu_);
  return {static_cast<int32_t>(queue_.size()), static_cast<int32_t>(running_.size()),
          static_cast<int32_t>(slots_.size())};
}

void Scheduler::SaveLearned() {
  if (!learned_dirty_) return;
  learned_dirty_ = false;
  try {
    group_->SaveLearned();
  } catch (const std::exception& e) {
    fprintf(stderr, "graft serve: warning: %s\n", e.what());
  }
}

void Scheduler::Loop() {
  for (;;) {
    std::vector<std::pair<int32_t, std::shared_ptr<Job>>> joining;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty() || !group_->idle(); });
      if (stopping_ && group_->idle()) break;  // Shutdown finishes what is still queued
      std::vector<bool> taken(slots_.size(), false);
      while (!queue_.empty() && !stopping_) {
        const int32_t s = PickSlot(queue_.front()->request, taken);
        if (s < 0) break;
        taken[s] = true;
        started_[s] = ++starts_;
        joining.emplace_back(s, std::move(queue_.front()));
        queue_.pop_front();
        running_.push_back(joining.back().second);
      }
    }
    for (auto& [slot, job] : joining) Begin(slot, job);
    if (group_->idle()) continue;
    std::vector<EngineGroup::Finished> finished;
    const auto t0 = Clock::now();
    const int64_t draft_passes = group_->draft_passes();
    const double target_ms = group_->target_pass_ms(), draft_ms = group_->draft_ms();
    finished = group_->Step();  // fails only the requests it cannot serve, never throws for one
    metrics_->CountStep(MsBetween(t0, Clock::now()), group_->draft_passes() - draft_passes,
                        group_->target_pass_ms() - target_ms, group_->draft_ms() - draft_ms);
    for (EngineGroup::Finished& f : finished) End(f);
    learned_dirty_ = learned_dirty_ || !finished.empty();
    // What the slots learnt is kept when the server falls idle (and when it stops):
    // never in a step's way.
    if (group_->idle()) SaveLearned();
  }
  SaveLearned();
}

int32_t Scheduler::PickSlot(const GenerateRequest& request, const std::vector<bool>& taken) const {
  const std::vector<Token>& prompt = request.prompt;
  const bool reuse = request.reuse_prefix.value_or(false);
  int32_t best = -1, stalest = -1, best_common = 0;
  for (int32_t s = 0; s < static_cast<int32_t>(slots_.size()); ++s) {
    if (taken[s] || slots_[s] || group_->busy(s)) continue;
    const int32_t common = reuse ? group_->CachedPrefix(s, prompt) : 0;
    if (common > best_common) best = s, best_common = common;
    if (stalest < 0 || started_[s] < started_[stalest]) stalest = s;
  }
  return best >= 0 && 2 * static_cast<size_t>(best_common) >= prompt.size() ? best : stalest;
}

void Scheduler::Begin(int32_t slot, const std::shared_ptr<Job>& job) {
  const auto forget = [&] {
    std::lock_guard lk(mu_);
    running_.erase(std::find(running_.begin(), running_.end(), job));
  };
  if (job->cancel) {
    metrics_->CountDropped();
    FinishJob(*job, "cancelled");
    forget();
    return;
  }
  auto run = std::make_unique<Running>(job, job->stop);
  Running* r = run.get();
  r->t_start = Clock::now();
  GenerateRequest req = job->request;
  req.on_tokens = [this, r](const std::vector<Token>& toks) {
    if (r->first_token_ms < 0) r->first_token_ms = MsBetween(r->t_start, Clock::now());
    std::string delta;
    for (Token t : toks) {
      delta += r->ts.Push(target_.TokenToPiece(t));
      if (r->ts.stopped()) break;
    }
    r->Publish(delta);
    return !r->ts.stopped() && !r->job->cancel.load();
  };
  req.cancelled = [r] { return r->job->cancel.load(); };
  try {
    group_->Start(slot, std::move(req), job->options);
  } catch (const std::exception& e) {
    metrics_->CountGeneration(GenerationStats{}, job->options.method, "error", MsBetween(job->t_submit, r->t_start), -1);
    FinishJob(*job, "error", std::string("generation failed: ") + e.what());
    forget();
    return;
  }
  slots_[slot] = std::move(run);
}

void Scheduler::End(EngineGroup::Finished& f) {
  std::unique_ptr<Running> run = std::move(slots_[f.slot]);
  GRAFT_CHECK(run != nullptr, "a finished slot without a job");
  Job& job = *run->job;
  const GenerationStats& st = f.result.stats;
  std::string finish, error;
  if (!f.error.empty()) {
    finish = "error";
    error = "generation failed: " + f.error;
  } else if (run->ts.stopped()) {
    finish = "stop";
  } else if (st.stop_reason == "cancelled") {
    finish = "cancelled";
  } else if (st.stop_reason == "eog") {
    finish = "stop";
  } else {
    finish = "length";  // "length" or "context"
  }
  if (finish != "error" && finish != "cancelled") run->Publish(run->ts.Finish());
  if (finish == "cancelled" && job.cancel.load()) error = "the generation was cancelled";
  metrics_->CountGeneration(st, job.options.method, finish, MsBetween(job.t_submit, run->t_start), run->first_token_ms);
  {
    std::lock_guard lk(job.mu);
    job.stats = st;
  }
  FinishJob(job, finish, error);
  std::lock_guard lk(mu_);
  running_.erase(std::find(running_.begin(), running_.end(), run->job));
}

}  // namespace graft::server
