// Token-by-token decoding for generation output (see StreamDecoder below). Follows the way
// Hugging Face's TextStreamer/DecodeStream hold back text until it is valid UTF-8.
#pragma once

#include <cstdint>
#include <string>

#include "temper/text/tokenizer.h"

namespace temper::text {

// Token-by-token decoding for generation output: push() returns the text that is complete so far
// and holds back a trailing unfinished UTF-8 sequence (an emoji split across tokens) until the
// bytes that finish it arrive. The concatenation of all push() results and flush() equals
// tokenizer.decode(all ids).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  std::string push(int32_t id);
  // The held-back bytes (as U+FFFD if they never completed); resets the decoder.
  std::string flush();
  size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace temper::text
