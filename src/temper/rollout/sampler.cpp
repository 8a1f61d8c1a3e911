#include "temper/rollout/sampler.h"

#include <algorithm>
#include <cmath>

#include "temper/core/error.h"
#include "temper/kernels/draw.h"

namespace temper::rollout {

void SamplerConfig::visit(KeyVisitor& v) {
  v("temperature", temperature, "sampling temperature (> 0)");
  v("top_p", top_p, "nucleus: keep the smallest set of tokens with this much probability (1: off)");
  v("top_k", top_k, "keep the k most likely tokens (0: off)");
  v("min_p", min_p, "drop tokens below min_p x the most likely one's probability (0: off)");
}

void SamplerConfig::validate() const {
  TEMPER_CHECK(greedy || temperature > 0.f) << "sampler: temperature must be > 0, got " << temperature;
  TEMPER_CHECK(top_k >= 0) << "sampler: top_k must be >= 0, got " << top_k;
  TEMPER_CHECK(top_p > 0.f && top_p <= 1.f) << "sampler: top_p must be in (0, 1], got " << top_p;
  TEMPER_CHECK(min_p >= 0.f && min_p < 1.f) << "sampler: min_p must be in [0, 1), got " << min_p;
  TEMPER_CHECK(repetition_penalty > 0.f) << "sampler: repetition_penalty must be > 0, got " << repetition_penalty;
  TEMPER_CHECK(std::isfinite(presence_penalty) && std::isfinite(frequency_penalty))
      << "sampler: presence/frequency penalties must be finite";
  TEMPER_CHECK(penalty_last_n >= -1) << "sampler: penalty_last_n must be >= -1 (-1: whole history), got " << penalty_last_n;
}

namespace {
bool truncating(const SamplerConfig& c);
}

Sampler::Sampler(const SamplerConfig& c) : cfg_(c) { cfg_.validate(); }

Sample Sampler::sample(const float* logits, int64_t V, Rng& rng, const History& history) {
  TEMPER_CHECK(V > 0) << "sampler: empty vocabulary";
  if (cfg_.penalties()) logits = apply_penalties(logits, V, history);
  return draw(logits, V, rng);
}

const float* Sampler::apply_penalties(const float* logits, int64_t V, const History& h) {
  if (static_cast<int64_t>(penalised_.size()) != V) {
    penalised_.assign(static_cast<size_t>(V), 0.f);
    count_.assign(static_cast<size_t>(V), 0);
  }
  std::copy(logits, logits + V, penalised_.begin());
  const int64_t np = static_cast<int64_t>(h.prompt.size()), nc = static_cast<int64_t>(h.completion.size());
  const int64_t n = cfg_.penalty_last_n < 0 ? np + nc : std::min(cfg_.penalty_last_n, np + nc);
  auto at = [&](int64_t i) { return i < np ? h.prompt[static_cast<size_t>(i)] : h.completion[static_cast<size_t>(i - np)]; };
  for (int64_t i = np + nc - n; i < np + nc; ++i) {
    int32_t t = at(i);
    TEMPER_CHECK(t >= 0 && t < V) << "sampler: history token " << t << " outside the vocabulary [0, " << V << ")";
    ++count_[static_cast<size_t>(t)];
  }
  for (int64_t i = np + nc - n; i < np + nc; ++i) {
    size_t t = static_cast<size_t>(at(i));
    int32_t c = count_[t];
    if (c == 0) continue;  // already applied
    float& z = penalised_[t];
    z = z > 0 ? z / cfg_.repetition_penalty : z * cfg_.repetition_penalty;
    z -= static_cast<float>(c) * cfg_.frequency_penalty + cfg_.presence_penalty;
    count_[t] = 0;
  }
  return penalised_.data();
}

float Sampler::max_logit(const float* logits, int64_t V) const { return kernels::max_logit(logits, V); }

namespace {
bool truncating(const SamplerConfig& c) { return c.top_k != 0 || c.top_p < 1.f || c.min_p > 0.f; }
}  // namespace

size_t Sampler::truncate(const float* logits, int64_t V, double* top_out) {
  // Tempered log-weights sorted descending (ties by id for determinism).
  const float inv_t = 1.0f / cfg_.temperature;
  cand_.resize(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v)  // non-finite logits never win: -inf keeps the sort a strict weak order
    cand_[static_cast<size_t>(v)] = {std::isfinite(logits[v]) ? logits[v] * inv_t : -INFINITY, static_cast<int32_t>(v)};
  auto by_weight = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t n = cand_.size();
  if (cfg_.top_k > 0 && static_cast<size_t>(cfg_.top_k) < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + cfg_.top_k, cand_.end(), by_weight);
    n = static_cast<size_t>(cfg_.top_k);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_weight);
  }
  double top = cand_[0].first, z = 0;
  for (size_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(cand_[i].first) - top);
  // top-p: the smallest prefix whose mass reaches top_p; min-p: p >= min_p * p_max.
  size_t keep = n;
  if (cfg_.top_p < 1.f || cfg_.min_p > 0.f) {
    double cum = 0;
    for (size_t i = 0; i < n; ++i) {
      double p = std::exp(static_cast<double>(cand_[i].first) - top) / z;
      if (cfg_.min_p > 0.f && p < cfg_.min_p * (1.0 / z)) {
        keep = i;
        break;
      }
      cum += p;
      if (cum >= cfg_.top_p) {
        keep = i + 1;
        break;
      }
    }
    if (keep == 0) keep = 1;
  }
  *top_out = top;
  return keep;
}

Sample Sampler::draw(const float* logits, int64_t V, Rng& rng) {
  const float mx = max_logit(logits, V);
  if (cfg_.greedy) {
    int64_t best = 0;
    while (!(logits[best] == mx)) ++best;
    return {static_cast<int32_t>(best), 0.f};
  }
  if (!truncating(cfg_)) return draw_untruncated(logits, V, mx, rng.uniform_f64());
  double top = 0;
  const size_t keep = truncate(logits, V, &top);
  double zk = 0;
  for (size_t i = 0; i < keep; ++i) zk += std::exp(static_cast<double>(cand_[i].first) - top);
  double u = rng.uniform_f64() * zk, acc = 0;
  size_t pick = keep - 1;
  for (size_t i = 0; i < keep; ++i) {
    acc += std::exp(static_cast<double>(cand_[i].first) - top);
    if (u < acc) {
      pick = i;
      break;
    }
  }
  float lp = static_cast<float>(static_cast<double>(cand_[pick].first) - top - std::log(zk));
  return {cand_[pick].second, lp};
}

// The untruncated draw (temperature alone) at a given uniform: the tempered softmax inverted in
// vocabulary order, no sort (O(V), not O(V log V)).
Sample Sampler::draw_untruncated(const float* logits, int64_t V, float mx, double uniform) {
  const kernels::Draw d = kernels::draw_tempered(logits, V, mx, cfg_.temperature, uniform, weights_);
  return {d.token, d.logprob};
}

bool Sampler::simple() const { return !cfg_.penalties() && (cfg_.greedy || !truncating(cfg_)); }  // greedy ignores truncation


void Sampler::distribution(const float* logits, int64_t V, const History& history, float* p) {
  TEMPER_CHECK(V > 0) << "sampler: empty vocabulary";
  if (cfg_.penalties()) logits = apply_penalties(logits, V, history);
  const float mx = max_logit(logits, V);
  std::fill(p, p + V, 0.f);
  if (cfg_.greedy) {
    int64_t best = 0;
    while (!(logits[best] == mx)) ++best;
    p[best] = 1.f;
    return;
  }
  const float inv_t = 1.0f / cfg_.temperature;
  if (!truncating(cfg_)) {
    double z = 0;
    for (int64_t v = 0; v < V; ++v)
      if (std::isfinite(logits[v])) z += std::exp(static_cast<double>(logits[v] - mx) * inv_t);
    for (int64_t v = 0; v < V; ++v)
      if (std::isfinite(logits[v])) p[v] = static_cast<float>(std::exp(static_cast<double>(logits[v] - mx) * inv_t) / z);
    return;
  }
  double top = 0;
  const size_t keep = truncate(logits, V, &top);
  double zk = 0;
  for (size_t i = 0; i < keep; ++i) zk += std::exp(static_cast<double>(cand_[i].first) - top);
  for (size_t i = 0; i < keep; ++i)
    p[cand_[i].second] = static_cast<float>(std::exp(static_cast<double>(cand_[i].first) - top) / zk);
}

}  // namespace temper::rollout
