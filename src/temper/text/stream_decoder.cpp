// Streaming decode (see stream_decoder.h): the bytes of each token are appended to a pending buffer
// and everything up to a trailing unfinished UTF-8 sequence is released through the same lossy
// conversion as Tokenizer::decode, so the pieces concatenate to decode(ids) exactly.
#include "temper/text/stream_decoder.h"

#include "temper/text/utf8.h"

namespace temper::text {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tok_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  if (skip_special_ && tok_.is_special(id)) return {};
  pending_ += tok_.token_bytes(id);
  const size_t keep = utf8_incomplete_tail(pending_);
  std::string out = utf8_lossy(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace temper::text
