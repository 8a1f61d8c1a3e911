// Streaming decode (see stream_decoder.h), as Hugging Face's DecodeStream: each step decodes a short window of
// the latest ids twice, without and with the new ones, and releases the difference, so a decoder's context
// (SentencePiece's leading-space strip, byte fallback) is applied as decode(ids) applies it. Text is held back
// while the raw bytes end inside an unfinished UTF-8 character.
#include "temper/text/stream_decoder.h"

#include <algorithm>
#include <string_view>

#include "temper/text/utf8.h"

namespace temper::text {

namespace {
constexpr size_t kWindow = 6;  // ids of context before the unreleased ones (HF's prefix window is 5)
}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tok_(tokenizer), skip_special_(skip_special) {}

// The window's first id: kWindow ids before `released`, moved back off a UTF-8 continuation byte (a byte-fallback
// decoder turns a run of byte tokens that starts mid-character into one U+FFFD per byte, however it continues).
size_t StreamDecoder::window_start(size_t released) const {
  size_t from = released - std::min(released, kWindow);
  while (from > 0) {
    const std::string_view b = tok_.token_bytes(ids_[from]);
    if (b.empty() || (static_cast<unsigned char>(b[0]) & 0xC0) != 0x80) break;
    --from;
  }
  return from;
}

std::string StreamDecoder::decode_from(size_t begin, size_t end) const {
  return tok_.decode(std::span<const int32_t>(ids_).subspan(begin, end - begin), skip_special_);
}

std::string StreamDecoder::push(int32_t id) {
  if (skip_special_ && tok_.is_special(id)) return {};
  ids_.push_back(id);
  pending_ += tok_.token_bytes(id);
  if (utf8_incomplete_tail(pending_) > 0) return {};  // the character's other bytes are still to come
  pending_.clear();
  const size_t from = window_start(released_);
  const std::string before = decode_from(from, released_), after = decode_from(from, ids_.size());
  // Byte-fallback tokens (<0xF0> ...) finish a character only together: while the new text ends in U+FFFD the
  // ids stay unreleased (a real U+FFFD comes out with the next id, or on flush).
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  if (after.size() >= before.size() + kReplacement.size() &&
      std::string_view(after).substr(after.size() - kReplacement.size()) == kReplacement)
    return {};
  released_ = ids_.size();
  // ids_[0] is never in a window that starts later, so a start-of-text strip applies only at the start.
  if (after.size() < before.size() || after.compare(0, before.size(), before) != 0) return {};
  return after.substr(before.size());
}

std::string StreamDecoder::flush() {
  std::string out;
  if (released_ < ids_.size()) {
    const size_t from = window_start(released_);
    const std::string before = decode_from(from, released_), after = decode_from(from, ids_.size());
    if (after.size() >= before.size()) out = after.substr(before.size());
  }
  ids_.clear();
  pending_.clear();
  released_ = 0;
  return out;
}

}  // namespace temper::text
