// Merges <-> scores for SentencePiece BPE (see spm_merges.h).
#include "temper/text/spm_merges.h"

#include <algorithm>
#include <unordered_set>

#include "temper/core/error.h"
#include "temper/text/utf8.h"

namespace temper::text {

namespace {

// Byte offsets of the character boundaries inside s (not 0, not s.size()).
std::vector<size_t> inner_boundaries(const std::string& s) {
  std::vector<size_t> b;
  for (size_t i = 0; i < s.size();) {
    i += static_cast<size_t>(utf8_next(s, i).len);
    if (i < s.size()) b.push_back(i);
  }
  return b;
}

bool single_char(const std::string& s) {
  return !s.empty() && static_cast<size_t>(utf8_next(s, 0).len) == s.size();
}

}  // namespace

MergeList spm_merges_from_scores(const std::vector<std::string>& tokens, const std::vector<float>& scores) {
  // Python's {token: score} dict: first position of a token, its last score.
  std::unordered_map<std::string, float> score_of;
  std::vector<size_t> first_ids;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (score_of.find(tokens[i]) == score_of.end()) first_ids.push_back(i);
    score_of[tokens[i]] = scores[i];
  }
  struct Entry {
    const std::string* token;
    size_t cut;
    float score, left, right;
  };
  std::vector<Entry> all;
  for (size_t i : first_ids) {
    const std::string& t = tokens[i];
    std::vector<Entry> local;
    for (size_t cut : inner_boundaries(t)) {
      auto l = score_of.find(t.substr(0, cut)), r = score_of.find(t.substr(cut));
      if (l != score_of.end() && r != score_of.end()) local.push_back({&t, cut, score_of[t], l->second, r->second});
    }
    std::stable_sort(local.begin(), local.end(), [](const Entry& a, const Entry& b) {
      return a.left != b.left ? a.left > b.left : a.right > b.right;
    });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.score > b.score; });
  MergeList merges;
  merges.reserve(all.size());
  for (const Entry& e : all) merges.emplace_back(e.token->substr(0, e.cut), e.token->substr(e.cut));
  return merges;
}

std::vector<float> spm_scores_from_merges(const std::vector<std::string>& tokens,
                                          const std::unordered_map<std::string, int32_t>& vocab,
                                          const MergeList& merges, const std::string& fail) {
  std::unordered_map<std::string, size_t> first_rank;  // merged token -> its first merge's rank
  std::unordered_set<std::string> pairs;               // "left\x01right"
  std::string previous;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string merged = merges[rank].first + merges[rank].second;
    auto [it, inserted] = first_rank.emplace(merged, rank);
    TEMPER_CHECK(inserted || merged == previous)
        << fail << "the merges making '" << merged << "' are not consecutive (ranks " << it->second << " and " << rank
        << "); llama.cpp orders merges by the merged token's score only";
    pairs.insert(merges[rank].first + '\x01' + merges[rank].second);
    previous = merged;
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& t = tokens[id];
    for (size_t cut : inner_boundaries(t)) {
      const std::string l = t.substr(0, cut), r = t.substr(cut);
      const bool l_symbol = vocab.count(l) || single_char(l), r_symbol = vocab.count(r) || single_char(r);
      TEMPER_CHECK(!(l_symbol && r_symbol) || pairs.count(l + '\x01' + r))
          << fail << "'" << l << "' + '" << r << "' makes the token '" << t
          << "' but is not a merge; llama.cpp merges every pair whose text is a token";
    }
    auto it = first_rank.find(t);
    if (it != first_rank.end()) scores[id] = -static_cast<float>(it->second);
  }
  return scores;
}

}  // namespace temper::text
