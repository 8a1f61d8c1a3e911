#include "temper/rl/methods/prompt_buffer.h"

#include <algorithm>
#include <sstream>

#include "temper/core/error.h"
#include "temper/core/rng.h"
#include "temper/tasks/task.h"

namespace temper::rl {

PromptBuffer::Event PromptBuffer::visit(int64_t index, double accuracy, double threshold) {
  auto it = pos_.find(index);
  if (it != pos_.end()) {
    if (accuracy < threshold) return Event::stayed;
    Entry& e = fifo_[it->second - head_];
    e.live = false;
    graduated_ += 1;
    graduated_zero_ += e.zero ? 1 : 0;
    pos_.erase(it);
    --live_;
    compact();
    return Event::graduated;
  }
  if (accuracy >= threshold || capacity_ <= 0) return Event::none;
  while (live_ >= static_cast<size_t>(capacity_)) {  // evict the oldest live entry
    compact();
    Entry& e = fifo_.front();
    pos_.erase(e.index);
    e.live = false;
    --live_;
    ++evicted_;
    compact();
  }
  fifo_.push_back({index, accuracy <= 0.0, true});
  pos_[index] = head_ + fifo_.size() - 1;
  ++live_;
  ++admitted_;
  admitted_zero_ += accuracy <= 0.0 ? 1 : 0;
  return Event::admitted;
}

void PromptBuffer::compact() {  // drop tombstones at the front
  while (!fifo_.empty() && !fifo_.front().live) {
    fifo_.pop_front();
    ++head_;
  }
  if (fifo_.size() > 2 * live_ + 64) {  // too many tombstones inside: rebuild
    std::deque<Entry> keep;
    for (const Entry& e : fifo_)
      if (e.live) keep.push_back(e);
    fifo_.swap(keep);
    head_ = 0;
    pos_.clear();
    for (size_t i = 0; i < fifo_.size(); ++i) pos_[fifo_[i].index] = i;
  }
}

std::vector<int64_t> PromptBuffer::entries() const {
  std::vector<int64_t> out;
  for (const Entry& e : fifo_)
    if (e.live) out.push_back(e.index);
  return out;
}

std::vector<int64_t> PromptBuffer::sample(int64_t k, uint64_t seed) const {
  std::vector<int64_t> all = entries();
  k = std::min<int64_t>(k, static_cast<int64_t>(all.size()));
  Rng rng(seed, 0);
  for (int64_t i = 0; i < k; ++i) {  // partial Fisher-Yates
    size_t j = static_cast<size_t>(tasks::rand_int(rng, i, static_cast<int64_t>(all.size()) - 1));
    std::swap(all[static_cast<size_t>(i)], all[j]);
  }
  all.resize(static_cast<size_t>(std::max<int64_t>(k, 0)));
  return all;
}

std::string PromptBuffer::save() const {
  std::ostringstream o;
  o << "admitted=" << admitted_ << "\ngraduated=" << graduated_ << "\nevicted=" << evicted_ << "\nadmitted_zero=" << admitted_zero_
    << "\ngraduated_zero=" << graduated_zero_ << "\nentries=";
  bool first = true;
  for (const Entry& e : fifo_)
    if (e.live) o << (first ? "" : ",") << e.index << (e.zero ? "z" : ""), first = false;
  o << "\n";
  return o.str();
}

void PromptBuffer::load(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  bool got_entries = false;
  fifo_.clear();
  pos_.clear();
  head_ = live_ = 0;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "admitted") admitted_ = std::stoll(v);
    else if (k == "graduated") graduated_ = std::stoll(v);
    else if (k == "evicted") evicted_ = std::stoll(v);
    else if (k == "admitted_zero") admitted_zero_ = std::stoll(v);
    else if (k == "graduated_zero") graduated_zero_ = std::stoll(v);
    else if (k == "entries") {
      got_entries = true;
      std::istringstream es(v);
      std::string tok;
      while (std::getline(es, tok, ',')) {
        if (tok.empty()) continue;
        bool zero = tok.back() == 'z';
        if (zero) tok.pop_back();
        int64_t idx = std::stoll(tok);
        pos_[idx] = fifo_.size();
        fifo_.push_back({idx, zero, true});
        ++live_;
      }
    }
  }
  TEMPER_CHECK(got_entries) << "zppo: the checkpointed prompt buffer has no 'entries' line";
}

}  // namespace temper::rl
