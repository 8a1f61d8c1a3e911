// Hashed character n-gram features of a reply in its context: what the CPU miniature's judge reads (spec
// methods-other section 2: "a small discriminator (logistic regression on char n-gram features)"), an
// alternative to the frozen model's embeddings (MethodEnv::embed) for the discriminator heads
// (`features = "ngrams"` in [rl.turing] and [rl.discriminator]). The same family as the held-out judge of
// experiments/turing-users/judge.py, with its own hash (FNV-1a, not CRC32), so the two judges are fitted apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace temper::rl {

// [2 dim + 2] features:
//   g(reply)                      counts of the character 1-, 2- and 3-grams of "^reply$" (bytes), hashed into
//                                 dim buckets, L2-normalised (all zero for no n-grams);
//   30 g(reply) * g(context)      elementwise: the reply's n-grams weighted by how much the context uses them
//                                 (context: its turns joined by spaces), scaled as judge.py does;
//   log(1 + w)                    w = the reply's words (tasks::word_count: whitespace-separated);
//   |log((w + 1) / (m + 1))|      m = the mean words of the context's turns (w without context).
std::vector<float> ngram_features(const std::string& reply, const std::vector<std::string>& context, int64_t dim);

}  // namespace temper::rl
