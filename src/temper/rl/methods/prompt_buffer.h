// A replay buffer of questions (not responses): ZPPO's zone of proximal development. A question enters
// when the student's group accuracy on it is below the admission threshold, leaves ("graduates") when a
// later visit reaches it, and the oldest leaves when the buffer is full (FIFO). Replay draws uniformly
// without replacement (the spec's recommendation; the paper leaves the order open). It also keeps the
// paper's graduation statistic for questions admitted at 0% accuracy. Entries are task train indices,
// so the state is a few numbers per question and survives a checkpoint as text.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace temper::rl {

class PromptBuffer {
 public:
  explicit PromptBuffer(int64_t capacity = 10000) : capacity_(capacity) {}
  enum class Event { none, admitted, graduated, stayed };
  // The student's accuracy on question `index` this visit; admit below `threshold`, graduate at or above.
  Event visit(int64_t index, double accuracy, double threshold);
  // Up to k distinct entries, uniformly, reproducible from seed.
  std::vector<int64_t> sample(int64_t k, uint64_t seed) const;
  bool contains(int64_t index) const { return pos_.count(index) != 0; }
  int64_t size() const { return static_cast<int64_t>(live_); }
  int64_t capacity() const { return capacity_; }
  int64_t admitted_total() const { return admitted_; }
  int64_t graduated_total() const { return graduated_; }
  int64_t evicted_total() const { return evicted_; }
  int64_t admitted_at_zero() const { return admitted_zero_; }
  int64_t graduated_from_zero() const { return graduated_zero_; }
  std::vector<int64_t> entries() const;  // oldest first
  std::string save() const;
  void load(const std::string& text);

 private:
  struct Entry {
    int64_t index;
    bool zero;  // admitted at accuracy 0
    bool live;
  };
  void compact();
  int64_t capacity_;
  std::deque<Entry> fifo_;                       // admission order; graduated entries are tombstones until compacted
  std::unordered_map<int64_t, size_t> pos_;      // index -> live entry's position in fifo_ (offset by head_)
  size_t head_ = 0;                              // entries popped from the front so far
  size_t live_ = 0;
  int64_t admitted_ = 0, graduated_ = 0, evicted_ = 0, admitted_zero_ = 0, graduated_zero_ = 0;
};

}  // namespace temper::rl
