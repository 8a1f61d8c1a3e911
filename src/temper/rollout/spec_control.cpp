#include "temper/rollout/spec_control.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "temper/core/error.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"
#include "temper/rollout/spec_sampling.h"

namespace temper::rollout {

void SpecConfig::visit(KeyVisitor& v) {
  v("alpha_up", alpha_up, "acceptance above which the gamma ladder climbs a rung");
  v("alpha_down", alpha_down, "acceptance below which it steps down a rung");
  v("persistence", persistence, "steps the acceptance must stay past a bound before gamma moves");
  v("toggle", toggle, "when to speculate: cost (the calibrated cost model predicts a speed-up), threshold, always",
    kSpecToggleNames);
  v("margin", margin, "cost: speculate when the predicted speed-up is at least 1 + margin");
  v("threshold", threshold, "threshold: speculate while at most this many sequences are live");
}

void SpecConfig::validate() const {
  TEMPER_CHECK(!ladder.empty()) << "speculative: the gamma ladder is empty";
  for (size_t i = 0; i < ladder.size(); ++i) {
    TEMPER_CHECK(ladder[i] >= 1 && ladder[i] <= 32) << "speculative: gamma " << ladder[i] << " outside [1, 32]";
    TEMPER_CHECK(i == 0 || ladder[i] > ladder[i - 1]) << "speculative: the gamma ladder must be increasing";
  }
  TEMPER_CHECK(alpha_down >= 0 && alpha_down < alpha_up && alpha_up <= 1)
      << "speculative: need 0 <= alpha_down < alpha_up <= 1, got " << alpha_down << ", " << alpha_up;
  TEMPER_CHECK(persistence >= 1) << "speculative: persistence must be >= 1";
  TEMPER_CHECK(margin >= 0) << "speculative: margin must be >= 0";
  TEMPER_CHECK(threshold >= 1) << "speculative: threshold must be >= 1";
}

namespace {
double interp(const std::vector<double>& x, const std::vector<double>& y, double n) {
  TEMPER_CHECK(!x.empty()) << "speculative: cost model used before calibration";
  if (x.size() == 1) return y[0] * std::max(1.0, n / x[0]);
  size_t i = 1;
  while (i + 1 < x.size() && n > x[i]) ++i;  // segment [x[i-1], x[i]]; extrapolates the end segments
  const double t = (n - x[i - 1]) / (x[i] - x[i - 1]);
  return std::max(y[0], y[i - 1] + t * (y[i] - y[i - 1]));
}
}  // namespace

double SpecCostModel::policy(double n) const { return interp(rows, policy_s, n); }
double SpecCostModel::draft(double n) const { return interp(rows, draft_s, n); }

double SpecCostModel::speedup(int64_t B, int64_t gamma, double L) const {
  const double b = static_cast<double>(B), g = static_cast<double>(gamma);
  return L * (policy(b) + b * sample_s) / (g * (draft(b) + b * dist_s) + policy(b * (g + 1)) + b * (g + 1) * dist_s);
}

SpecCostModel calibrate_spec_cost(Transformer& model, KvPool& pool, const Int4Drafter& drafter, int64_t max_rows,
                                  int repeats, const SamplerConfig& sampler) {
  TEMPER_CHECK(max_rows >= 1) << "speculative calibration: max_rows must be >= 1";
  const int64_t ctx = model.config().max_position_embeddings;
  max_rows = std::min(max_rows, ctx);
  SeqKv s;
  pool.reserve(s, max_rows);  // throws (nothing changed) when the pool cannot hold the scratch rows
  std::vector<int32_t> tok(static_cast<size_t>(max_rows)), pos(static_cast<size_t>(max_rows));
  std::vector<const int32_t*> tables(static_cast<size_t>(max_rows), s.blocks.data());
  std::vector<int64_t> out(static_cast<size_t>(max_rows));
  std::vector<float> logits(static_cast<size_t>(max_rows * model.config().vocab_size));
  for (int64_t i = 0; i < max_rows; ++i) {
    tok[static_cast<size_t>(i)] = static_cast<int32_t>(i % model.config().vocab_size);
    pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    out[static_cast<size_t>(i)] = i;
  }
  SpecCostModel m;
  auto time = [&](int64_t n, const Int4Drafter* d) {
    PagedStep st;
    st.n = n;
    st.tokens = tok.data();
    st.pos = pos.data();
    st.tables = tables.data();
    st.out_rows = out.data();  // every row wants its logits, as in a decode step
    st.n_out = n;
    st.logits = logits.data();
    double best = 1e30;
    for (int r = 0; r < repeats + 1; ++r) {  // the first run warms up (arena, caches)
      auto t0 = std::chrono::steady_clock::now();
      model.forward_paged(st, pool, d);
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best = std::min(best, dt);
    }
    return best;
  };
  for (int64_t n = 1;; n = std::min(2 * n, max_rows)) {
    m.rows.push_back(static_cast<double>(n));
    m.draft_s.push_back(time(n, &drafter));
    m.policy_s.push_back(time(n, nullptr));  // last: the logits the sampler is timed on are the policy's
    if (n == max_rows) break;
  }
  pool.release(s);
  // The sampler's host work per row, on the last forward's logits (the policy's): best mean of `repeats`
  // passes over up to 16 rows, after a warm-up pass.
  const int64_t V = model.config().vocab_size, n = std::min<int64_t>(max_rows, 16);
  Sampler timed(sampler);
  std::vector<float> p(static_cast<size_t>(V));
  Rng rng(7, 0);
  auto per_row = [&](bool dense) {
    double best = 1e30;
    for (int r = 0; r < repeats + 1; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < n; ++i) {
        const float* z = logits.data() + i * V;
        if (dense) {
          timed.distribution(z, V, History{}, p.data());
          sample_dense(p.data(), V, rng);
        } else {
          timed.sample(z, V, rng);
        }
      }
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best = std::min(best, dt / static_cast<double>(n));
    }
    return best;
  };
  m.sample_s = per_row(false);
  m.dist_s = per_row(true);
  return m;
}

SpecController::SpecController(SpecConfig c) : cfg_(std::move(c)) { cfg_.validate(); }

double SpecController::predicted_speedup(int64_t n_active) const {
  return cost_.speedup(n_active, gamma(), expected_len());
}

bool SpecController::turn_on(int64_t n_active) const {
  switch (cfg_.toggle) {
    case SpecToggle::always: return true;
    case SpecToggle::threshold: return n_active <= cfg_.threshold;
    case SpecToggle::cost: return cost_.calibrated() && predicted_speedup(n_active) >= 1.0 + cfg_.margin;
  }
  return false;
}

void SpecController::end_rollout(int64_t cycles, int64_t drafted, int64_t accepted, bool ladder) {
  if (cycles <= 0 || drafted <= 0) return;
  st_.accepted_len = 1.0 + static_cast<double>(accepted) / static_cast<double>(cycles);
  if (!ladder) return;
  const double ar = static_cast<double>(accepted) / static_cast<double>(drafted);
  const int64_t top = static_cast<int64_t>(cfg_.ladder.size()) - 1;
  if (ar >= cfg_.alpha_up) {
    st_.down = 0;
    if (++st_.up >= cfg_.persistence) {
      st_.rung = std::min(st_.rung + 1, top);
      st_.up = 0;
    }
  } else if (ar <= cfg_.alpha_down) {
    st_.up = 0;
    if (++st_.down >= cfg_.persistence) {
      st_.rung = std::max<int64_t>(st_.rung - 1, 0);
      st_.down = 0;
    }
  } else {
    st_.up = st_.down = 0;
  }
}

void SpecController::set_state(const SpecState& s) {
  TEMPER_CHECK(s.rung >= 0 && s.rung < static_cast<int64_t>(cfg_.ladder.size()))
      << "speculative state: rung " << s.rung << " outside the ladder of " << cfg_.ladder.size();
  st_ = s;
}

}  // namespace temper::rollout
