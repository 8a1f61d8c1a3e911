#include "temper/rl/methods/dre_detector.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/trim.h"
#include "temper/env/environment.h"
#include "temper/reward/math_answer.h"
#include "temper/text/regex.h"

namespace temper::rl {

namespace {

constexpr size_t kMaxCandidate = 128;  // bytes: a longer "answer" is a sentence, not an answer

}  // namespace

std::string dre_default_close(DreDetector d, const tasks::Task& task) {
  switch (d) {
    case DreDetector::task:
      return task.answer_close();
    case DreDetector::gsm8k:
      return "#### ";
    case DreDetector::boxed:
      return "The final answer is \\boxed{";
    case DreDetector::think:
      return "</think>\n\n";
    case DreDetector::regex:
      return "#### ";
  }
  return "#### ";
}

bool task_has_answer_detector(const tasks::Task& task) {
  return task.has_answer_lines();
}

AnswerDetector::AnswerDetector(DreDetector kind, const std::string& regex, const std::string& close,
                               std::shared_ptr<const tasks::Task> task)
    : kind_(kind), task_(std::move(task)) {
  TEMPER_CHECK(task_) << "rl.dre.detector: needs the task";
  close_ = close.empty() ? dre_default_close(kind_, *task_) : close;
  TEMPER_CHECK(!close_.empty())
      << "rl.dre.close: task '" << task_->name()
      << "' has no answer close of its own; set rl.dre.close (the text that ends the reasoning, "
         "e.g. \"#### \")";
  if (kind_ != DreDetector::boxed) mark_ = std::string(trim(close_));
  if (kind_ == DreDetector::regex) {
    TEMPER_CHECK(!regex.empty())
        << "rl.dre.regex: detector = \"regex\" needs a PCRE2 pattern whose match is the answer "
           "(e.g. \"answer: \\\\K-?[0-9]+\"), got nothing";
    regex_ = std::make_unique<text::Regex>(regex, "rl.dre.regex");
  }
}

AnswerDetector::~AnswerDetector() = default;
AnswerDetector::AnswerDetector(AnswerDetector&&) noexcept = default;
AnswerDetector& AnswerDetector::operator=(AnswerDetector&&) noexcept = default;

size_t AnswerDetector::answer_section(std::string_view text, bool finished) const {
  if (kind_ == DreDetector::boxed) {
    if (!finished) return std::string_view::npos;
    const size_t at = text.rfind("\\boxed");
    if (at == std::string_view::npos) return at;
    const size_t nl = text.rfind('\n', at);
    return nl == std::string_view::npos ? 0 : nl + 1;
  }
  if (mark_.empty()) return std::string_view::npos;
  return text.find(mark_);
}

std::optional<std::string> AnswerDetector::candidate(const tasks::Problem& p, std::string_view partial) const {
  if (partial.empty() || partial.back() != '\n') return std::nullopt;
  if (answer_section(partial, false) != std::string_view::npos) return std::nullopt;
  if (kind_ == DreDetector::task) return task_->answer_candidate(p, partial);
  std::string_view body = partial.substr(0, partial.size() - 1);
  const size_t nl = body.rfind('\n');
  const std::string_view line = nl == std::string_view::npos ? body : body.substr(nl + 1);
  std::optional<std::string> c;
  switch (kind_) {
    case DreDetector::task:
      break;
    case DreDetector::gsm8k:
      c = env::last_number(line);
      break;
    case DreDetector::boxed:
      c = reward::extract_boxed(line);
      break;
    case DreDetector::think:
      c = reward::extract_boxed(line);
      if (!c) c = reward::extract_answer_is(line);
      if (!c) c = env::last_number(line);
      break;
    case DreDetector::regex: {
      std::vector<std::pair<size_t, size_t>> m;
      regex_->find_all(line, m);
      if (!m.empty()) c = std::string(line.substr(m.back().first, m.back().second - m.back().first));
      break;
    }
  }
  if (!c) return std::nullopt;
  std::string_view v = trim(*c);
  if (v.empty() || v.size() > kMaxCandidate) return std::nullopt;
  return std::string(v);
}

bool AnswerDetector::accepts(const tasks::Problem& p, const std::string& candidate) const {
  return task_->accepts(p, candidate);
}

}  // namespace temper::rl
