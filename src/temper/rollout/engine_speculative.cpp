// EngineRun's speculative cycle (EfficientRollout; engine.h describes it): the 4-bit drafter drafts up
// to gamma tokens per live sequence over the shared KV cache, the policy verifies all of them in one
// batched forward, and the rejection rule of rollout/spec_sampling.h emits tokens distributed exactly
// as plain sampling, through the same record() (stops, hooks, forks) as the plain step.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "temper/kernels/classifier.h"
#include "temper/model/int4_drafter.h"
#include "temper/rollout/engine_run.h"
#include "temper/rollout/spec_sampling.h"

namespace temper::rollout {

namespace {
using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}
}  // namespace

// One cycle over every live sequence (nothing queued or resuming). False, with nothing changed, when
// the pool cannot hold the draft positions or none can draft (a plain step runs instead).
bool EngineRun::speculative_cycle() {
  if (!plan_drafts()) return false;
  auto t0 = Clock::now();
  draft();
  stats_.draft_s += secs(t0);
  t0 = Clock::now();
  verify();
  stats_.verify_s += secs(t0);
  t0 = Clock::now();
  accept();
  stats_.accept_s += secs(t0);
  return true;
}

bool EngineRun::plan_drafts() {
  gamma_ = cfg_.spec->gamma();
  const size_t n = live_.size();
  glen_.assign(n, 0);
  int64_t need = 0, rows_total = 0;
  gmax_ = 0;
  for (size_t i = 0; i < n; ++i) {
    const Live& s = live_[i];
    const int64_t left = s.max_len - static_cast<int64_t>(out_[static_cast<size_t>(s.out)].tokens.size());
    glen_[i] = s.forced.empty() ? std::clamp<int64_t>(left - 1, 0, gamma_) : 0;
    need += pool_.blocks_needed(s.kv, glen_[i] + 1);
    gmax_ = std::max(gmax_, glen_[i]);
    rows_total += glen_[i] + 1;
  }
  if (gmax_ == 0 || need > pool_.free_blocks()) return false;
  for (size_t i = 0; i < n; ++i) pool_.reserve(live_[i].kv, glen_[i] + 1);
  if (drafts_.size() < n) drafts_.resize(n);
  if (qdist_.size() < n * static_cast<size_t>(gamma_ * V_)) qdist_.resize(n * static_cast<size_t>(gamma_ * V_));
  if (logits_.size() < static_cast<size_t>(rows_total * V_)) logits_.resize(static_cast<size_t>(rows_total * V_));
  return true;
}

// gmax_ passes of the drafter, each over the sequences still drafting: draft j of sequence i is
// drawn from q_at(i, j), the drafter's distribution after the sampler's processing.
void EngineRun::draft() {
  const size_t n = glen_.size();
  for (size_t i = 0; i < n; ++i) drafts_[i].clear();
  for (int64_t j = 0; j < gmax_; ++j) {
    clear_rows();
    for (size_t i = 0; i < n; ++i)
      if (glen_[i] > j) add_spec_row(live_[i], i, j, false);
    forward_spec_rows(cfg_.drafter);
    int64_t r = 0;
    for (size_t i = 0; i < n; ++i) {
      if (glen_[i] <= j) continue;
      Live& s = live_[i];
      float* q = q_at(i, j);
      s.sampler.distribution(logits_.data() + (r++) * V_, V_, history(s, &drafts_[i]), q);
      drafts_[i].push_back(sample_dense(q, V_, s.rng));
    }
  }
}

// One policy pass over [pending, drafts...] of every sequence.
void EngineRun::verify() {
  clear_rows();
  for (size_t i = 0; i < glen_.size(); ++i)
    for (int64_t j = 0; j <= glen_[i]; ++j) add_spec_row(live_[i], i, j, true);
  forward_spec_rows(nullptr);
}

// Emit accepted drafts, then the correction or the bonus token, through the usual checks; a
// sequence without drafts emits its one token from the verify row as a plain step would.
void EngineRun::accept() {
  next_.clear();
  spawned_.clear();
  int64_t base = 0;
  for (size_t i = 0; i < glen_.size(); ++i) {
    Live& s = live_[i];
    const int64_t g = glen_[i];
    bool ended = false;
    if (g == 0) {
      pool_.advance(s.kv, 1);
      ended = emit(s, logits_.data() + base * V_);
      ++stats_.decode_tokens;
    } else {
      ended = accept_drafts(s, i, base);
    }
    base += g + 1;
    if (!ended) next_.push_back(std::move(s));
  }
  adopt_spawned();
  ++stats_.spec_steps;
}

// Sequence i's verify rows start at row `base`: row base + j holds the policy's logits for draft j
// (j < glen_[i]) and, past the last draft, for the bonus token.
bool EngineRun::accept_drafts(Live& s, size_t i, int64_t base) {
  const RolloutRequest& q = rq(s.req);
  const int64_t g = glen_[i];
  ++stats_.spec_cycles;
  stats_.drafted += g;
  bool ended = false;
  for (int64_t j = 0; j <= g && !ended; ++j) {
    const float* z = logits_.data() + (base + j) * V_;
    s.sampler.distribution(z, V_, history(s, nullptr), pdist_.data());
    int32_t x;
    bool rejected = false;
    if (j < g) {
      const int32_t d = drafts_[i][static_cast<size_t>(j)];
      const float* qd = q_at(i, j);
      if (spec_accept(pdist_[static_cast<size_t>(d)], qd[d], s.rng)) {
        x = d;
        ++stats_.accepted;
      } else {
        x = spec_residual(pdist_.data(), qd, V_, s.rng);
        rejected = true;
      }
    } else {
      x = sample_dense(pdist_.data(), V_, s.rng);  // every draft accepted: the bonus token
    }
    const float px = pdist_[static_cast<size_t>(x)];
    pool_.advance(s.kv, 1);
    Choice ch;
    ch.x = Sample{x, q.sampler.greedy ? 0.f : std::log(px)};
    kernels::logit_row_stats(z, V_, x, &ch.lp, &ch.ent);
    ended = record(s, ch);
    ++stats_.decode_tokens;
    if (rejected) break;
  }
  return ended;
}

// A row of a draft or verify pass: sequence i's token at offset j past its committed length (the
// pending token, then its drafts), every row's logits wanted; verify rows keep their activations.
void EngineRun::add_spec_row(const Live& s, size_t i, int64_t j, bool verify) {
  tok_.push_back(j == 0 ? s.pending : drafts_[i][static_cast<size_t>(j - 1)]);
  pos_.push_back(static_cast<int32_t>(s.kv.len + j));
  tables_.push_back(s.kv.blocks.data());
  rows_.push_back(static_cast<int64_t>(rows_.size()));
  if (verify) keep_activation(keeps(s), out_[static_cast<size_t>(s.out)].act_slots, s.kv.len + j, tok_.back());
}

// The drafter's pass (drafter set) or the policy's verify pass (null: its rows' activations kept).
void EngineRun::forward_spec_rows(const Int4Drafter* drafter) {
  const PagedStep st = paged_step(!drafter);
  model_.forward_paged(st, pool_, drafter);
}

// The penalties' history of s: prompt, completion (+ the drafts so far); empty without penalties.
History EngineRun::history(const Live& s, const std::vector<int32_t>* extra) {
  const RolloutRequest& q = rq(s.req);
  if (!q.sampler.penalties()) return History{};
  const Completion& c = out_[static_cast<size_t>(s.out)];
  hist_.assign(c.tokens.begin(), c.tokens.end());
  if (extra) hist_.insert(hist_.end(), extra->begin(), extra->end());
  return History{q.prompt, hist_};
}

}  // namespace temper::rollout
