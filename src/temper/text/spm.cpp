// llama.cpp's SPM merge loop (llama-vocab.cpp llm_tokenizer_spm_session::tokenize and resegment):
// the same pair order (score, then the leftmost), the same stale-pair test (the symbols' lengths),
// and the same output of the final symbols.
#include "temper/text/spm.h"

#include <cstdio>
#include <queue>

#include "temper/text/utf8.h"

namespace temper::text {

namespace {

struct Symbol {
  int32_t prev, next;
  size_t offset, len;  // bytes of the text; len 0 once merged into its left neighbour
};

struct Bigram {
  int32_t left, right;
  float score;
  size_t len;
  // std::priority_queue pops the largest: the highest score, then the smallest left.
  bool operator<(const Bigram& o) const { return score < o.score || (score == o.score && left > o.left); }
};

// Length of the UTF-8 sequence a lead byte starts (llama.cpp's unicode_len_utf8: 1 for a stray byte).
size_t utf8_len_of_lead(unsigned char c) {
  static const size_t kLookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[c >> 4];
}

}  // namespace

SpmModel::SpmModel(const std::unordered_map<std::string, int32_t>& token_ids, std::vector<float> scores, int32_t unk_id)
    : token_ids_(token_ids), scores_(std::move(scores)) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    auto it = token_ids.find(hex);
    if (it == token_ids.end()) it = token_ids.find(std::string(1, static_cast<char>(b)));
    byte_id_[b] = it == token_ids.end() ? unk_id : it->second;
  }
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_len_of_lead(static_cast<unsigned char>(text[off])), text.size() - off);
    const int32_t index = static_cast<int32_t>(sym.size());
    sym.push_back({index - 1, off + len == text.size() ? -1 : index + 1, off, len});
    off += len;
  }
  std::priority_queue<Bigram> queue;
  std::string pair;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    pair.assign(text.substr(sym[left].offset, sym[left].len + sym[right].len));
    auto it = token_ids_.find(pair);
    if (it == token_ids_.end() || it->second < 0 || static_cast<size_t>(it->second) >= scores_.size()) return;
    queue.push({left, right, scores_[it->second], pair.size()});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // one side merged since
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  // Every merged symbol is a token; a single character may not be: then its bytes.
  for (int32_t i = 0; i != -1; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].offset, sym[i].len);
    auto it = token_ids_.find(std::string(piece));
    if (it != token_ids_.end()) {
      out.push_back(it->second);
    } else {
      for (unsigned char c : piece) {
        if (byte_id_[c] >= 0) out.push_back(byte_id_[c]);  // no byte token and no unk: dropped
      }
    }
  }
}

}  // namespace temper::text
