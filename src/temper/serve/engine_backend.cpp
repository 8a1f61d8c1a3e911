#include "temper/serve/engine_backend.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/serve/openai_schema.h"

namespace temper::serve {

EngineBackend::EngineBackend(Transformer& model, KvPool& pool, rollout::EngineConfig cfg)
    : model_(model), pool_(pool), engine_(model, pool, std::move(cfg)) {}

EngineBackend::~EngineBackend() {
  shutdown();
}

void EngineBackend::start() {
  TEMPER_CHECK(!thread_.joinable()) << "EngineBackend::start: already running";
  thread_ = std::thread([this] { loop(); });
}

void EngineBackend::shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineBackend::submit(std::shared_ptr<GenJob> job) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closing_) throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
    pending_.push_back(std::move(job));
  }
  cv_.notify_all();
}

// One run for the server's life; a run that throws fails the jobs it held and the next run takes the
// queue (request indices start again at 0 in a new run).
void EngineBackend::loop() {
  for (;;) {
    next_index_ = 0;
    try {
      engine_.run({}, this, this);
      for (Scoring& s : scoring_) score(s);
      scoring_.clear();
    } catch (const std::exception& e) {
      TEMPER_LOG(error) << "temper serve: the engine failed: " << e.what();
      fail_running(e.what());
    }
    std::lock_guard<std::mutex> l(mu_);
    if (closing_ && pending_.empty()) break;
  }
}

void EngineBackend::fail_running(const std::string& what) {
  auto fail = [&](GenJob& j) {
    GenEvent e;
    e.kind = GenEvent::Kind::error;
    e.error = what;
    j.push(std::move(e));
  };
  for (auto& [idx, r] : running_) fail(*r.job);
  for (Scoring& s : scoring_) fail(*s.job);
  running_.clear();
  scoring_.clear();
}

void EngineBackend::incoming(std::vector<rollout::RolloutRequest>& add) {
  std::deque<std::shared_ptr<GenJob>> jobs;
  {
    std::lock_guard<std::mutex> l(mu_);
    jobs.swap(pending_);
  }
  for (auto& j : jobs) {
    Running r;
    r.members_left = j->request.group_size;
    r.sent.assign(static_cast<size_t>(j->request.group_size), 0);
    add.push_back(j->request);
    r.job = std::move(j);
    running_.emplace(next_index_++, std::move(r));
  }
}

void EngineBackend::poll(std::vector<rollout::Continuation>& /*out*/, bool wait) {
  if (!scoring_.empty()) {
    for (Scoring& s : scoring_) score(s);
    scoring_.clear();
    return;  // the step boundary is taken; incoming() looks at the queue next
  }
  if (!wait) return;
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !pending_.empty() || closing_; });
}

// Besides the shutdown: a run that has taken kRequestsPerRun requests ends once it is idle, and the
// next one starts empty (a run keeps every request it was given and a shell per completion).
bool EngineBackend::closed() const {
  if (next_index_ >= kRequestsPerRun && running_.empty() && scoring_.empty()) return true;
  std::lock_guard<std::mutex> l(mu_);
  return closing_ && pending_.empty();
}

rollout::HookDecision EngineBackend::after_token(const rollout::RolloutRequest& /*req*/, const rollout::Completion& c) {
  rollout::HookDecision d;
  auto it = running_.find(c.request);
  if (it == running_.end()) return d;
  Running& r = it->second;
  if (r.job->cancelled()) {
    d.stop = true;
    return d;
  }
  if (!r.job->stream || r.job->top_logprobs > 0) return d;
  size_t& sent = r.sent[static_cast<size_t>(c.member)];
  for (; sent < c.tokens.size(); ++sent) {
    GenEvent e;
    e.member = c.member;
    e.token = c.tokens[sent];
    e.logprob = c.policy_logprob[sent];
    r.job->push(std::move(e));
  }
  return d;
}

void EngineBackend::after_step(int64_t /*step*/) {
  steps_.fetch_add(1);
}

void EngineBackend::finished(rollout::Completion& c) {
  auto it = running_.find(c.request);
  if (it == running_.end()) return;
  Running& r = it->second;
  GenEvent e;
  e.kind = GenEvent::Kind::done;
  e.member = c.member;
  e.tokens = std::move(c.tokens);
  e.logprobs = std::move(c.policy_logprob);
  e.finish = c.finish;
  e.stop_string = c.stop_string;
  std::vector<float>().swap(c.sample_logprob);  // the run keeps an empty shell
  std::vector<float>().swap(c.entropy);
  std::vector<int64_t>().swap(c.act_slots);
  if (r.job->top_logprobs > 0 && !e.tokens.empty()) {
    scoring_.push_back({r.job, r.job->request.prompt, std::move(e)});
  } else {
    r.job->push(std::move(e));
  }
  if (--r.members_left == 0) {
    running_.erase(it);
    jobs_done_.fetch_add(1);
  }
}

// The policy's top-k at each generated position: one forward over prompt + completion (all but the last
// token), the log-softmax of each completion row, its k largest.
void EngineBackend::score(Scoring& s) {
  GenEvent& e = s.done;
  try {
    std::vector<int32_t> seq = s.prompt;
    seq.insert(seq.end(), e.tokens.begin(), e.tokens.end() - 1);
    const int64_t T = static_cast<int64_t>(seq.size()), P = static_cast<int64_t>(s.prompt.size());
    const int64_t V = model_.config().vocab_size;
    logits_.resize(static_cast<size_t>(T * V));
    model_.forward_logits(seq.data(), 1, T, logits_.data());
    const int64_t k = std::min<int64_t>(s.job->top_logprobs, V);
    std::vector<int32_t> idx(static_cast<size_t>(V));
    e.top.assign(e.tokens.size(), {});
    for (size_t j = 0; j < e.tokens.size(); ++j) {
      const float* z = logits_.data() + (P - 1 + static_cast<int64_t>(j)) * V;
      const float mx = *std::max_element(z, z + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(z[v] - mx));
      const float lse = mx + static_cast<float>(std::log(sum));
      for (int64_t v = 0; v < V; ++v) idx[static_cast<size_t>(v)] = static_cast<int32_t>(v);
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                        [z](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
      for (int64_t i = 0; i < k; ++i)
        e.top[j].emplace_back(idx[static_cast<size_t>(i)], z[idx[static_cast<size_t>(i)]] - lse);
    }
    s.job->push(std::move(e));
  } catch (const std::exception& ex) {
    GenEvent err;
    err.kind = GenEvent::Kind::error;
    err.error = std::string("top_logprobs: ") + ex.what();
    s.job->push(std::move(err));
  }
}

}  // namespace temper::serve
