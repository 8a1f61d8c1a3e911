#include "temper/serve/sample_text.h"

#include <algorithm>

namespace temper::serve {

size_t stop_prefix_suffix(const std::string& s, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    for (size_t k = std::min(s.size(), stop.size() - 1); k > best; --k)
      if (s.compare(s.size() - k, k, stop, 0, k) == 0) {
        best = k;
        break;
      }
  }
  return best;
}

SampleText::SampleText(const text::Tokenizer& tok, std::vector<std::string> stops)
    : dec_(tok, /*skip_special=*/true), stops_(std::move(stops)) {}

// Cuts held_ at the first stop string (then nothing more comes out) and returns what is safe to give out.
std::string SampleText::release() {
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_)
    if (!stop.empty()) cut = std::min(cut, held_.find(stop));
  std::string out;
  if (cut != std::string::npos) {
    out = held_.substr(0, cut);
    held_.clear();
    stopped_ = true;
  } else {
    const size_t keep = stop_prefix_suffix(held_, stops_);
    out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
  }
  emitted_ += out.size();
  return out;
}

std::string SampleText::push(int32_t id) {
  std::string piece = dec_.push(id);
  if (stopped_) return {};
  held_ += piece;
  return release();
}

std::string SampleText::finish() {
  std::string rest = dec_.flush();
  if (stopped_) return {};
  held_ += rest;
  std::string out = release();
  out += held_;  // no stop string can begin in it any more
  emitted_ += held_.size();
  held_.clear();
  return out;
}

}  // namespace temper::serve
