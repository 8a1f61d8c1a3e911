// Sequential revision (REVES, ../shared/specs/methods-llm-rl.md section 4): an attempt is checked; a wrong
// one comes back in a revision prompt (the question, the previous attempt, the binary feedback "the
// previous answer is incorrect") and the policy tries again, up to R rounds. The same prompts serve
// REVES's training-time augmentation and `temper eval --revisions K`. A verification prompt asks
// whether an attempt is correct; its completion ends with the task's answer line holding True or False.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "temper/core/settings.h"
#include "temper/rl/prompt_codec.h"
#include "temper/rollout/engine.h"
#include "temper/tasks/task.h"

namespace temper::rl {

struct RevisionConfig {
  // {question}: the problem's prompt; {attempt}: the previous attempt (cut to its last attempt_tokens tokens).
  std::string revision_template =
      "{question}\nPrevious attempt:\n{attempt}\nFeedback: The previous answer is incorrect.\nWrite a corrected solution.\n";
  std::string verification_template =
      "{question}\nProposed answer:\n{attempt}\nIs the proposed answer correct? Answer with #### True or #### False.\n";
  int64_t attempt_tokens = 256;
  void validate() const;
};

// The revision prompt of `p` after a wrong `attempt`: same answer and checker; id + "#rev", index -1.
tasks::Problem revision_problem(const tasks::Problem& p, const std::string& attempt, const RevisionConfig& cfg,
                                const PromptCodec& codec);
// The verification prompt of `attempt`: answer "True" or "False" (the label), id + "#ver", index -1.
tasks::Problem verification_problem(const tasks::Problem& p, const std::string& attempt, bool label,
                                    const RevisionConfig& cfg, const PromptCodec& codec);
bool is_verification(const tasks::Problem& p);
bool is_revision(const tasks::Problem& p);
// The verdict a completion states: the text after its last "####" (or inside \boxed{...}), "True" or
// "False" in any case; nullopt otherwise.
std::optional<bool> parse_verdict(const std::string& completion);
// A verification completion's score: 1 when its verdict equals the label.
tasks::Verdict verify_verdict(const tasks::Problem& verification, const std::string& completion);

// The attempts of one problem through the revise loop: attempts[r] is round r's (0: the first try);
// solved_at: the round of the first correct attempt (-1: none within the rounds).
struct RevisionTrace {
  std::vector<std::string> attempts;
  std::vector<bool> correct;
  int64_t solved_at = -1;
};

using GenerateFn = std::function<std::vector<rollout::Completion>(const std::vector<rollout::RolloutRequest>&)>;
using VerifyFn = std::function<tasks::Verdict(const tasks::Problem&, const std::string&)>;

struct ReviseSettings {
  int64_t rounds = 8;  // revisions after the first attempt
  rollout::SamplerConfig sampler;
  bool greedy = false;
  int64_t max_new = 64, context = 0;
  uint64_t seed = 0;
};

// Runs first attempts and up to `rounds` revisions for every problem (each round one batched
// generation over the problems still unsolved). Problems whose revision prompt no longer fits the
// context stop there.
std::vector<RevisionTrace> revise(const std::vector<tasks::Problem>& problems, const ReviseSettings& s,
                                  const RevisionConfig& cfg, const PromptCodec& codec, const GenerateFn& generate,
                                  const VerifyFn& verify);

// The revision curve: entry r (0..rounds) is the share of the traces solved within r revisions (solved_at <= r; an
// unsolved trace counts nowhere), so entry 0 is first-attempt accuracy.
std::vector<double> solved_within(const std::vector<RevisionTrace>& traces, int64_t rounds);

}  // namespace temper::rl
