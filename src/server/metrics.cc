#include "server/metrics.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace graft::server {
namespace {
constexpr const char* kPhases[7] = {"prefill", "draft", "retrieve", "graft", "verify", "commit", "decode"};

void Header(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}
}  // namespace

void Metrics::CountHttp(const std::string& path, int status) {
  std::lock_guard lk(mu_);
  ++http_[{path, status}];
}

void Metrics::CountGeneration(const GenerationStats& st, Method m, const std::string& finish, double queue_ms,
                              double first_token_ms) {
  std::lock_guard lk(mu_);
  ++finish_[{MethodName(m), finish}];
  prompt_tokens_ += st.n_prompt;
  prompt_tokens_cached_ += st.n_prompt_cached;
  generated_tokens_ += st.n_generated;
  target_passes_ += st.n_passes;
  draft_passes_ += st.n_draft_passes;
  for (int s = 0; s < kNumSources; ++s) {
    proposed_[s] += st.per_source[s].proposed;
    accepted_[s] += st.per_source[s].accepted;
  }
  const double ms[7] = {st.t_prefill_ms, st.t_draft_ms, st.t_retrieve_ms, st.t_graft_ms,
                        st.t_verify_ms,  st.t_commit_ms, st.t_decode_ms};
  for (int i = 0; i < 7; ++i) phase_ms_[i] += ms[i];
  queue_ms_sum_ += queue_ms;
  ++queue_count_;
  if (first_token_ms >= 0) {
    ttft_ms_sum_ += first_token_ms;
    ++ttft_count_;
  }
  const double request_ms = st.t_prefill_ms + st.t_decode_ms;
  if (st.n_generated > 0 && request_ms > 0) {
    recent_tps_.push_back(st.n_generated * 1000.0 / request_ms);
    if (recent_tps_.size() > kRecent) recent_tps_.pop_front();
  }
}

void Metrics::CountStep(double ms, int64_t draft_passes, double target_pass_ms, double draft_ms) {
  std::lock_guard lk(mu_);
  ++steps_;
  busy_ms_ += ms;
  step_draft_passes_ += draft_passes;
  step_target_ms_ += target_pass_ms;
  step_draft_ms_ += draft_ms;
}

void Metrics::CountDropped() {
  std::lock_guard lk(mu_);
  ++dropped_;
}

void Metrics::CountRejected() {
  std::lock_guard lk(mu_);
  ++rejected_;
}

std::string Metrics::Render(const QueueGauges& g) const {
  std::lock_guard lk(mu_);
  std::ostringstream o;
  Header(o, "graft_http_requests_total", "counter", "HTTP requests by path and status");
  for (const auto& [k, v] : http_) {
    o << "graft_http_requests_total{path=\"" << k.first << "\",status=\"" << k.second << "\"} " << v << '\n';
  }
  Header(o, "graft_generations_total", "counter", "generations run on an engine, by method and finish reason");
  for (const auto& [k, v] : finish_) {
    o << "graft_generations_total{method=\"" << k.first << "\",finish_reason=\"" << k.second << "\"} " << v << '\n';
  }
  int64_t cancelled = dropped_;
  for (const auto& [k, v] : finish_) {
    if (k.second == "cancelled") cancelled += v;
  }
  Header(o, "graft_requests_cancelled_total", "counter",
         "generations cancelled because the client disconnected or the server stopped (queued or running)");
  o << "graft_requests_cancelled_total " << cancelled << '\n';
  Header(o, "graft_requests_rejected_total", "counter", "requests refused with 503 because the wait queue was full");
  o << "graft_requests_rejected_total " << rejected_ << '\n';
  Header(o, "graft_prompt_tokens_total", "counter", "prompt tokens of generations");
  o << "graft_prompt_tokens_total " << prompt_tokens_ << '\n';
  Header(o, "graft_prompt_tokens_cached_total", "counter", "of those, tokens whose cache a slot kept (cache_prompt)");
  o << "graft_prompt_tokens_cached_total " << prompt_tokens_cached_ << '\n';
  Header(o, "graft_generated_tokens_total", "counter", "tokens generated");
  o << "graft_generated_tokens_total " << generated_tokens_ << '\n';
  Header(o, "graft_target_passes_total", "counter", "target verification passes (prefill excluded)");
  o << "graft_target_passes_total " << target_passes_ << '\n';
  Header(o, "graft_draft_passes_total", "counter", "draft-model decode calls");
  o << "graft_draft_passes_total " << draft_passes_ << '\n';
  Header(o, "graft_tau", "gauge", "mean tokens per target pass over all generations so far");
  o << "graft_tau " << (target_passes_ ? static_cast<double>(generated_tokens_) / target_passes_ : 0.0) << '\n';
  Header(o, "graft_proposed_tokens_total", "counter", "proposed tree nodes verified, by source");
  for (int s = 1; s < kNumSources; ++s) {
    o << "graft_proposed_tokens_total{source=\"" << SourceName(static_cast<Source>(s)) << "\"} " << proposed_[s] << '\n';
  }
  Header(o, "graft_accepted_tokens_total", "counter", "proposed tree nodes accepted by the target, by source");
  for (int s = 1; s < kNumSources; ++s) {
    o << "graft_accepted_tokens_total{source=\"" << SourceName(static_cast<Source>(s)) << "\"} " << accepted_[s] << '\n';
  }
  Header(o, "graft_phase_seconds_total", "counter",
         "request time by phase, summed over requests (decode = everything after prefill); a pass shared by "
         "several requests counts in each: see graft_step_seconds_total for the engine's own time");
  for (int i = 0; i < 7; ++i) o << "graft_phase_seconds_total{phase=\"" << kPhases[i] << "\"} " << phase_ms_[i] / 1000 << '\n';
  Header(o, "graft_queue_wait_seconds", "summary", "time from admission to an engine");
  o << "graft_queue_wait_seconds_sum " << queue_ms_sum_ / 1000 << "\ngraft_queue_wait_seconds_count " << queue_count_ << '\n';
  Header(o, "graft_first_token_seconds", "summary", "time from engine start to the first generated token");
  o << "graft_first_token_seconds_sum " << ttft_ms_sum_ / 1000 << "\ngraft_first_token_seconds_count " << ttft_count_
    << '\n';
  Header(o, "graft_steps_total", "counter", "engine steps: one target pass shared by every running request");
  o << "graft_steps_total " << steps_ << '\n';
  Header(o, "graft_busy_seconds_total", "counter", "wall time spent in engine steps");
  o << "graft_busy_seconds_total " << busy_ms_ / 1000 << '\n';
  Header(o, "graft_step_seconds_total", "counter",
         "wall time of engine steps by part, each shared pass counted once: target passes, drafting (shared "
         "draft passes and draft prompt prefills), other (proposing, verifying, committing)");
  o << "graft_step_seconds_total{part=\"target_pass\"} " << step_target_ms_ / 1000 << '\n';
  o << "graft_step_seconds_total{part=\"draft\"} " << step_draft_ms_ / 1000 << '\n';
  o << "graft_step_seconds_total{part=\"other\"} " << std::max(0.0, busy_ms_ - step_target_ms_ - step_draft_ms_) / 1000
    << '\n';
  Header(o, "graft_step_draft_passes_total", "counter",
         "draft-model passes run by engine steps, each shared by every request drafting in its step");
  o << "graft_step_draft_passes_total " << step_draft_passes_ << '\n';
  Header(o, "graft_throughput_tokens_per_second", "gauge",
         "tokens generated per second of engine steps, all requests together, since start");
  o << "graft_throughput_tokens_per_second " << (busy_ms_ > 0 ? generated_tokens_ * 1000.0 / busy_ms_ : 0.0) << '\n';
  Header(o, "graft_request_tokens_per_second", "summary",
         "tokens per second of one request (prefill and decode), over the last 128 generations");
  {
    std::vector<double> v(recent_tps_.begin(), recent_tps_.end());
    std::sort(v.begin(), v.end());
    for (double q : {0.1, 0.5, 0.9}) {
      const double x = v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
      o << "graft_request_tokens_per_second{quantile=\"" << q << "\"} " << x << '\n';
    }
    o << "graft_request_tokens_per_second_count " << v.size() << '\n';
  }
  Header(o, "graft_queue_length", "gauge", "requests waiting for a slot");
  o << "graft_queue_length " << g.queued << '\n';
  Header(o, "graft_in_flight", "gauge", "requests generating now");
  o << "graft_in_flight " << g.in_flight << '\n';
  Header(o, "graft_slots", "gauge", "engines serving requests (--parallel)");
  o << "graft_slots " << g.slots << '\n';
  return o.str();
}

}  // namespace graft::server
