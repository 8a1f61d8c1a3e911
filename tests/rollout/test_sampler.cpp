// Sampler: greedy is the argmax; draws follow the tempered/truncated distribution (chi-square over
// many draws, fixed seed); top-k/top-p/min-p never emit excluded tokens; the reported log-prob is
// that of the sampling distribution; the same seed and stream give the same tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "temper/core/error.h"
#include "temper/rollout/sampler.h"

using namespace temper;
using namespace temper::rollout;

namespace {
std::vector<double> softmax(const std::vector<float>& z, double t) {
  double mx = *std::max_element(z.begin(), z.end()), s = 0;
  std::vector<double> p(z.size());
  for (size_t i = 0; i < z.size(); ++i) s += (p[i] = std::exp((z[i] - mx) / t));
  for (auto& x : p) x /= s;
  return p;
}
}  // namespace

TEST(Sampler, GreedyIsArgmax) {
  std::vector<float> z = {0.1f, 2.0f, -1.f, 1.9f};
  SamplerConfig c;
  c.greedy = true;
  Sampler s(c);
  Rng r(1);
  EXPECT_EQ(s.sample(z.data(), 4, r).token, 1);
}

TEST(Sampler, DrawsFollowTheTemperedDistribution) {
  std::vector<float> z = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 2.0f};
  for (float temp : {1.0f, 0.7f}) {
    SamplerConfig c;
    c.temperature = temp;
    Sampler s(c);
    Rng r(7, 3);
    const int n = 60000;
    std::vector<int> counts(z.size(), 0);
    for (int i = 0; i < n; ++i) {
      Sample x = s.sample(z.data(), int64_t(z.size()), r);
      counts[x.token]++;
      EXPECT_NEAR(x.logprob, std::log(softmax(z, temp)[x.token]), 1e-5);
    }
    auto p = softmax(z, temp);
    double chi2 = 0;
    for (size_t k = 0; k < z.size(); ++k) chi2 += std::pow(counts[k] - n * p[k], 2) / (n * p[k]);
    EXPECT_LT(chi2, 20.5) << "temperature " << temp;  // 5 dof: p = 0.001 critical value
  }
}

TEST(Sampler, TruncationsExcludeTheTail) {
  std::vector<float> z = {3.f, 2.f, 1.f, 0.f, -1.f, -2.f};
  auto p = softmax(z, 1.0);
  Rng r(11);
  SamplerConfig k2;
  k2.top_k = 2;
  Sampler sk(k2);
  SamplerConfig tp;
  tp.top_p = static_cast<float>(p[0] + p[1] * 0.5);  // needs tokens 0 and 1
  Sampler sp(tp);
  SamplerConfig mp;
  mp.min_p = static_cast<float>(p[2] / p[0] * 1.01);  // keeps p >= just above p[2]: tokens 0, 1
  Sampler sm(mp);
  std::map<int, int> seen_k, seen_p, seen_m;
  for (int i = 0; i < 5000; ++i) {
    seen_k[sk.sample(z.data(), 6, r).token]++;
    seen_p[sp.sample(z.data(), 6, r).token]++;
    seen_m[sm.sample(z.data(), 6, r).token]++;
  }
  for (auto* s : {&seen_k, &seen_p, &seen_m}) {
    EXPECT_EQ(s->size(), 2u);
    EXPECT_TRUE(s->count(0) && s->count(1));
  }
  // Renormalised: under top-k 2 token 0 has p0 / (p0 + p1).
  EXPECT_NEAR(seen_k[0] / 5000.0, p[0] / (p[0] + p[1]), 0.03);
}

TEST(Sampler, SameStreamSameTokensAndBadConfig) {
  std::vector<float> z(50);
  for (int i = 0; i < 50; ++i) z[i] = std::sin(i * 1.3f);
  SamplerConfig c;
  Sampler a(c), b(c);
  Rng r1(5, 9), r2(5, 9);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.sample(z.data(), 50, r1).token, b.sample(z.data(), 50, r2).token);
  SamplerConfig bad;
  bad.top_p = 0.f;
  EXPECT_THROW(Sampler{bad}, Error);
  bad = SamplerConfig{};
  bad.temperature = 0.f;
  EXPECT_THROW(Sampler{bad}, Error);
}

TEST(Sampler, NonFiniteLogitsNeverWinAndAllNonFiniteIsAnError) {
  std::vector<float> z = {NAN, 1.0f, -INFINITY, 0.5f, NAN};
  Rng r(2);
  SamplerConfig g;
  g.greedy = true;
  EXPECT_EQ(Sampler(g).sample(z.data(), 5, r).token, 1);
  SamplerConfig c;
  c.top_p = 0.9f;
  Sampler s(c);
  for (int i = 0; i < 500; ++i) {
    int t = s.sample(z.data(), 5, r).token;
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  std::vector<float> bad = {NAN, NAN};
  EXPECT_THROW(s.sample(bad.data(), 2, r), Error);
}

namespace {
// Reference of llama.cpp's penalties sampler over a window of the history.
std::vector<float> penalised_ref(std::vector<float> z, const std::vector<int32_t>& hist, int64_t last_n, float rep,
                                 float presence, float freq) {
  int64_t n = last_n < 0 ? int64_t(hist.size()) : std::min<int64_t>(last_n, hist.size());
  std::map<int32_t, int> count;
  for (int64_t i = int64_t(hist.size()) - n; i < int64_t(hist.size()); ++i) count[hist[i]]++;
  for (auto [t, c] : count) {
    z[t] = z[t] > 0 ? z[t] / rep : z[t] * rep;
    z[t] -= c * freq + presence;
  }
  return z;
}
}  // namespace

TEST(Sampler, PenaltiesMatchTheReferenceAndTheReportedLogprob) {
  std::vector<float> z = {1.5f, -0.5f, 0.8f, 2.0f, 0.0f, -1.2f, 0.3f};
  std::vector<int32_t> prompt = {3, 3, 1}, completion = {0, 3, 5, 0};
  std::vector<int32_t> hist = prompt;
  hist.insert(hist.end(), completion.begin(), completion.end());
  for (int64_t last_n : {int64_t(-1), int64_t(4), int64_t(64)}) {
    SamplerConfig c;
    c.repetition_penalty = 1.3f;
    c.presence_penalty = 0.2f;
    c.frequency_penalty = 0.15f;
    c.penalty_last_n = last_n;
    c.temperature = 0.8f;
    auto zp = penalised_ref(z, hist, last_n, 1.3f, 0.2f, 0.15f);
    auto p = softmax(zp, 0.8);
    Sampler s(c);
    Rng r(5, 1);
    const int n = 40000;
    std::vector<int> counts(z.size(), 0);
    for (int i = 0; i < n; ++i) {
      Sample x = s.sample(z.data(), int64_t(z.size()), r, History{prompt, completion});
      counts[x.token]++;
      ASSERT_NEAR(x.logprob, std::log(p[x.token]), 1e-5) << "last_n " << last_n;
    }
    double chi2 = 0;
    for (size_t k = 0; k < z.size(); ++k) chi2 += std::pow(counts[k] - n * p[k], 2) / (n * p[k]);
    EXPECT_LT(chi2, 22.5) << "last_n " << last_n;  // 6 dof: p = 0.001 critical value
    // Greedy takes the argmax of the penalised logits: token 3 (2.0) loses to token 0 or 2.
    SamplerConfig g = c;
    g.greedy = true;
    Sampler sg(g);
    EXPECT_EQ(sg.sample(z.data(), int64_t(z.size()), r, History{prompt, completion}).token,
              int32_t(std::max_element(zp.begin(), zp.end()) - zp.begin()));
  }
  // The logits passed in are not modified, and bad settings are refused.
  EXPECT_EQ(z[3], 2.0f);
  SamplerConfig bad;
  bad.repetition_penalty = 0.f;
  EXPECT_THROW(Sampler{bad}, Error);
  bad = {};
  bad.penalty_last_n = -2;
  EXPECT_THROW(Sampler{bad}, Error);
}
