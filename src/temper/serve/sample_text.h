// The text of one generated sample as its tokens arrive: decoded token by token (special tokens
// left out, characters split across tokens held until complete: text::StreamDecoder), the tail
// that could still be the start of a stop string held back, and the text cut where a stop string
// begins (OpenAI leaves the stop string out). Pushing all tokens then finish() gives the same text
// whether a client streams or not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "temper/text/stream_decoder.h"
#include "temper/text/tokenizer.h"

namespace temper::serve {

class SampleText {
 public:
  SampleText(const text::Tokenizer& tok, std::vector<std::string> stops);
  // The text that is final after this token ("" while held back or after a stop string).
  std::string push(int32_t id);
  // The rest: held-back bytes, cut at a stop string.
  std::string finish();
  // Bytes given out so far (a token's text_offset in /v1/completions logprobs).
  size_t emitted() const { return emitted_; }

 private:
  std::string release();
  text::StreamDecoder dec_;
  std::vector<std::string> stops_;
  std::string held_;
  size_t emitted_ = 0;
  bool stopped_ = false;
};

// The length of the longest suffix of `s` that is a proper prefix of one of `stops`.
size_t stop_prefix_suffix(const std::string& s, const std::vector<std::string>& stops);

}  // namespace temper::serve
