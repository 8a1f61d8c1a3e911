// The two directions between SentencePiece scores (GGUF model "llama") and BPE merges
// (tokenizer.json): merges from scores as transformers' GGUF converter builds them
// (integrations/ggml.py GGUFTokenizerSkeleton), and scores from merges for llama.cpp, refused where
// llama.cpp's score-ordered merging could give other ids than the merge ranks.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace temper::text {

using MergeList = std::vector<std::pair<std::string, std::string>>;

// Every split (left, right) at a character boundary of every token whose two parts are tokens, in
// the order of the merged token's score (highest first; stable), within a token by the parts' scores
// (highest first; stable). tokens in id order, scores one per token.
MergeList spm_merges_from_scores(const std::vector<std::string>& tokens, const std::vector<float>& scores);

// Scores under which llama.cpp's SPM merging (the pair forming the highest-scored token first,
// any pair whose text is a token) merges as BPE does with these ranks: -(rank of the token's first
// merge), 0 for tokens no merge makes. Throws temper::Error (message prefixed by `fail`) unless the
// merges are complete (every split of a token into tokens, or into single characters llama.cpp
// would try, is a merge) and grouped (the merges making one token are consecutive ranks).
std::vector<float> spm_scores_from_merges(const std::vector<std::string>& tokens,
                                          const std::unordered_map<std::string, int32_t>& vocab,
                                          const MergeList& merges, const std::string& fail);

}  // namespace temper::text
