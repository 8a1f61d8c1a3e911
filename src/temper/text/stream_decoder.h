// Token-by-token decoding for generation output (see StreamDecoder below). Follows Hugging Face's
// DecodeStream: a window of recent ids decoded with and without the new one, text held back until valid UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  size_t pending_bytes() const { return pending_.size(); }  // raw bytes of an unfinished character

 private:
  std::string decode_from(size_t begin, size_t end) const;  // decode(ids_[begin, end))
  size_t window_start(size_t released) const;
  Tokenizer tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // since the last flush
  size_t released_ = 0;       // ids_[0, released_) are out as text
  std::string pending_;
};

}  // namespace temper::text
