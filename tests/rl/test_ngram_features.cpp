// Hashed character n-gram features (rl/ngram_features.h): the reply's 1-3-grams of "^reply$" counted and
// L2-normalised, the context-weighted copy, the two length features, and bad input named. With 65536 buckets the
// few n-grams of these strings do not collide, so bucket values are the normalised counts themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "temper/core/error.h"
#include "temper/rl/ngram_features.h"

using namespace temper;
using namespace temper::rl;

namespace {

constexpr int64_t kDim = 1 << 16;

std::vector<float> block(const std::vector<float>& f, int k) {
  return std::vector<float>(f.begin() + k * kDim, f.begin() + (k + 1) * kDim);
}

double sum_sq(const std::vector<float>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0, [](double s, float x) { return s + double(x) * x; });
}

}  // namespace

TEST(NgramFeatures, TheReplysGramsAreCountedAndNormalised) {
  // "ab": ^ a b $ ^a ab b$ ^ab ab$ -- nine distinct n-grams, each 1/3 after normalising.
  std::vector<float> f = ngram_features("ab", {}, kDim);
  ASSERT_EQ(f.size(), size_t(2 * kDim + 2));
  std::vector<float> r = block(f, 0);
  EXPECT_EQ(std::count_if(r.begin(), r.end(), [](float x) { return x != 0; }), 9);
  EXPECT_NEAR(*std::max_element(r.begin(), r.end()), 1 / 3.0, 1e-6);
  EXPECT_NEAR(sum_sq(r), 1.0, 1e-6);
  // The buckets are FNV-1a (kFnv1aShortBasis) of each n-gram mod dim, pinned: features stay comparable across
  // versions (these are the values the code drew before core/fnv1a.h).
  std::vector<int64_t> at;
  for (int64_t i = 0; i < kDim; ++i)
    if (r[static_cast<size_t>(i)] != 0) at.push_back(i);
  EXPECT_EQ(at, (std::vector<int64_t>{13509, 14034, 24373, 36999, 38739, 39174, 42220, 60688, 65496}));
  // "aa": ^ a(2) $ ^a aa a$ ^aa aa$ -- eight distinct, 'a' twice: norm sqrt(7 + 4).
  r = block(ngram_features("aa", {}, kDim), 0);
  EXPECT_EQ(std::count_if(r.begin(), r.end(), [](float x) { return x != 0; }), 8);
  EXPECT_NEAR(*std::max_element(r.begin(), r.end()), 2 / std::sqrt(11.0), 1e-6);
  // The same text gives the same features; another text other buckets.
  EXPECT_EQ(ngram_features("lol pizza!", {"x"}, 64), ngram_features("lol pizza!", {"x"}, 64));
  EXPECT_NE(block(ngram_features("ab", {}, kDim), 0), block(ngram_features("ba", {}, kDim), 0));
}

TEST(NgramFeatures, TheContextBlockWeightsTheReplysGramsByTheContexts) {
  // Context made of the reply itself: 30 r^2, summing to 30; a context sharing no letter: only the end marks
  // ^ and $ are in both.
  std::vector<float> same = block(ngram_features("ab", {"ab"}, kDim), 1);
  EXPECT_NEAR(std::accumulate(same.begin(), same.end(), 0.0), 30.0, 1e-4);
  std::vector<float> none = block(ngram_features("ab", {"xy"}, kDim), 1);
  EXPECT_EQ(std::count_if(none.begin(), none.end(), [](float x) { return x != 0; }), 2);
  EXPECT_NEAR(std::accumulate(none.begin(), none.end(), 0.0), 2 * 30 * (1 / 3.0) * (1 / 3.0), 1e-5);
  // Turns are joined by spaces: {"a", "b"} is the text "a b".
  EXPECT_EQ(block(ngram_features("zz", {"a", "b"}, kDim), 1), block(ngram_features("zz", {"a b"}, kDim), 1));
  std::vector<float> part = block(ngram_features("ab", {"a"}, kDim), 1);  // "^ab$" shares ^ a $ ^a with "^a$"
  EXPECT_EQ(std::count_if(part.begin(), part.end(), [](float x) { return x != 0; }), 4);
}

TEST(NgramFeatures, LengthFeaturesAreLogWordsAndTheLogRatioToTheContextsMeanTurn) {
  std::vector<float> f = ngram_features("one two  three", {"a b", "c d e f"}, 32);  // w = 3, m = 3
  EXPECT_NEAR(f[64], std::log1p(3.0), 1e-6);
  EXPECT_NEAR(f[65], 0.0, 1e-6);
  f = ngram_features("one two three", {"a"}, 32);  // m = 1: |log(4 / 2)|
  EXPECT_NEAR(f[65], std::log(2.0), 1e-6);
  f = ngram_features("one", {"a b c d e f g"}, 32);  // m = 7: |log(2 / 8)|
  EXPECT_NEAR(f[65], std::log(4.0), 1e-6);
  f = ngram_features("one two", {}, 32);  // no context: m = w
  EXPECT_NEAR(f[65], 0.0, 1e-6);
  EXPECT_THROW(ngram_features("x", {}, 0), Error);
}
