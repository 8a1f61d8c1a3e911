// DRE's answer detector and forced close as recipe keys (rl.dre.detector, rl.dre.regex, rl.dre.close): where a
// partial completion first states an answer, what text closes the reasoning, and where the answer section starts.
// Presets: the task's own rule (procedural families), gsm8k ("####"), boxed (\boxed{}), think (</think>) and a
// user regex (PCRE2). Leaves out the verification itself (Task::accepts) and the rollout hook (dre.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "temper/core/settings.h"
#include "temper/tasks/task.h"

namespace temper::text {
class Regex;
}

namespace temper::rl {

enum class DreDetector { task, gsm8k, boxed, think, regex };
inline constexpr EnumNames<DreDetector, 5> kDreDetectorNames{{{DreDetector::task, "task"},
                                                              {DreDetector::gsm8k, "gsm8k"},
                                                              {DreDetector::boxed, "boxed"},
                                                              {DreDetector::think, "think"},
                                                              {DreDetector::regex, "regex"}}};

// The close a preset forces when rl.dre.close is empty (task: the task's answer_close()).
std::string dre_default_close(DreDetector d, const tasks::Task& task);

// Whether a task states its answers in a form the task's own detector reads (Task::answer_candidate: the text after a
// line's last '=' in the procedural families). Datasets, code, user simulators and environment episodes do not:
// DRE on them needs rl.dre.detector. Looks through filtered tasks and into mixtures (every member must have one).
bool task_has_answer_detector(const tasks::Task& task);

// Step boundaries are line ends: a candidate is read from the last complete line of the text so far.
//   task   Task::answer_candidate (default: the text after the line's last '='); answer section: the task's close mark
//   gsm8k  the line's last number ("<<48/2=24>>24 clips" -> "24"); close "#### "; answer section: "####"
//   boxed  the content of the line's last \boxed{...}; close "The final answer is \boxed{"; no answer marker while
//          generating; on a finished completion the answer section is the line of its last \boxed{
//   think  inside the thinking: the line's last \boxed{}, else "the answer is X", else its last number; close
//          "</think>\n\n"; answer section: "</think>"
//   regex  the last match of rl.dre.regex in the line (\K or a lookbehind leaves a prefix out of the match); close
//          rl.dre.close (default "#### "); answer section: the close without surrounding blanks
// rl.dre.close, when set, replaces a preset's close (and its marker, the close trimmed; boxed keeps its rule).
class AnswerDetector {
 public:
  AnswerDetector(DreDetector kind, const std::string& regex, const std::string& close,
                 std::shared_ptr<const tasks::Task> task);
  ~AnswerDetector();
  AnswerDetector(AnswerDetector&&) noexcept;
  AnswerDetector& operator=(AnswerDetector&&) noexcept;

  // The answer the last complete line of `partial` (it ends with '\n') states, or nullopt (also once the answer
  // section has started).
  std::optional<std::string> candidate(const tasks::Problem& p, std::string_view partial) const;
  // Whether `candidate` is the problem's answer (the task's verifier: Task::accepts).
  bool accepts(const tasks::Problem& p, const std::string& candidate) const;
  // The text forced to close the reasoning before the answer.
  const std::string& close() const { return close_; }
  // Byte offset where the answer section starts, npos when it has not. `finished`: the whole completion (boxed
  // then takes the line of the last \boxed{); otherwise text generated so far.
  size_t answer_section(std::string_view text, bool finished) const;
  DreDetector kind() const { return kind_; }

 private:
  DreDetector kind_;
  std::shared_ptr<const tasks::Task> task_;
  std::unique_ptr<text::Regex> regex_;
  std::string close_, mark_;  // mark_: the marker of the answer section ("" = none)
};

}  // namespace temper::rl
