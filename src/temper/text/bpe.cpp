// BPE merge loop with a priority queue over (rank, position), lazily invalidated entries, a linked
// list of symbols; the same order of merges as tokenizers' Word::merge_all (see bpe.h).
#include "temper/text/bpe.h"

#include <cstdio>
#include <queue>

#include "temper/core/error.h"
#include "temper/text/byte_level.h"
#include "temper/text/utf8.h"

namespace temper::text {

namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct Symbol {
  int32_t id;
  int32_t prev, next;  // -1 at the ends
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

BpeModel::BpeModel(const std::unordered_map<std::string, int32_t>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, const BpeOptions& opt,
                   const std::string& what)
    : vocab_(vocab), opt_(opt) {
  merges_.reserve(merges.size() * 2);
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [a, b] = merges[i];
    auto ia = vocab.find(a), ib = vocab.find(b), iab = vocab.find(a + b);
    TEMPER_CHECK(ia != vocab.end()) << what << "[" << i << "] = '" << a << " " << b << "': '" << a
                                    << "' is not in the vocabulary";
    TEMPER_CHECK(ib != vocab.end()) << what << "[" << i << "] = '" << a << " " << b << "': '" << b
                                    << "' is not in the vocabulary";
    TEMPER_CHECK(iab != vocab.end()) << what << "[" << i << "] = '" << a << " " << b << "': the merged token '" << a + b
                                     << "' is not in the vocabulary";
    merges_[pair_key(ia->second, ib->second)] = {static_cast<int32_t>(i), iab->second};
  }
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    utf8_append(ch, byte_level_char(static_cast<uint8_t>(b)));
    auto it = vocab.find(ch);
    byte_id_[b] = it == vocab.end() ? -1 : it->second;
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    it = vocab.find(hex);
    fallback_id_[b] = it == vocab.end() ? -1 : it->second;
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (opt_.ignore_merges) {
    auto it = vocab_.find(opt_.byte_level ? byte_level_encode(word) : std::string(word));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kCacheMaxWord;
  if (cacheable) {
    std::shared_lock lock(cache_mu_);
    auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::unique_lock lock(cache_mu_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::move(ids));
  }
}

void BpeModel::push_char(std::string_view ch, int32_t id, std::vector<int32_t>& ids, bool& pending_unk) const {
  if (id >= 0) {
    if (pending_unk) ids.push_back(opt_.unk_id), pending_unk = false;
    ids.push_back(id);
    return;
  }
  if (opt_.byte_fallback) {
    bool all = true;
    for (unsigned char c : ch) all = all && fallback_id_[c] >= 0;
    if (all) {
      if (pending_unk) ids.push_back(opt_.unk_id), pending_unk = false;
      for (unsigned char c : ch) ids.push_back(fallback_id_[c]);
      return;
    }
  }
  if (opt_.unk_id >= 0) {
    if (pending_unk && !opt_.fuse_unk) ids.push_back(opt_.unk_id);
    pending_unk = true;
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // Initial symbols: one per character (byte-level: per byte). A character missing from the
  // vocabulary becomes its UTF-8 bytes' <0xAB> tokens (byte_fallback), else the unk token (fused
  // with a preceding unk if fuse_unk), else it is dropped, as tokenizers' BPE::merge_word does.
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  bool pending_unk = false;
  if (opt_.byte_level) {
    for (unsigned char b : word) {
      const int32_t id = byte_id_[b];
      if (id >= 0 && !pending_unk) {
        ids.push_back(id);
        continue;
      }
      std::string ch;
      utf8_append(ch, byte_level_char(b));
      push_char(ch, id, ids, pending_unk);
    }
  } else {
    std::string ch;
    for (size_t i = 0; i < word.size();) {
      const size_t len = static_cast<size_t>(utf8_next(word, i).len);
      ch.assign(word.substr(i, len));
      auto it = vocab_.find(ch);
      push_char(ch, it == vocab_.end() ? -1 : it->second, ids, pending_unk);
      i += len;
    }
  }
  if (pending_unk) ids.push_back(opt_.unk_id);
  std::vector<Symbol> sym;
  sym.reserve(ids.size());
  for (int32_t id : ids) sym.push_back({id, static_cast<int32_t>(sym.size()) - 1, -1, true});
  const int32_t n = static_cast<int32_t>(sym.size());
  for (int32_t i = 0; i < n; ++i) sym[i].next = i + 1 < n ? i + 1 : -1;

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t left) {
    const int32_t right = sym[left].next;
    if (right < 0) return;
    auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
    if (it != merges_.end()) queue.push({it->second.first, left, it->second.second});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    // Stale entry: the pair at this position changed since it was queued.
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.second != top.new_id || it->second.first != top.rank) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i < n; i = sym[i].next) {
    out.push_back(sym[i].id);
    if (sym[i].next < 0) break;
  }
}

}  // namespace temper::text
