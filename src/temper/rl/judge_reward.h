// LLM-as-judge (issue 34 point 3): a second, generation-only model that reads a prompt made from a template
// and answers with a score or a label. JudgeModel holds the model, its own codec (its chat template) and a
// rollout engine; the [[reward]] judge term (make_judge_term), [rl.turing] judge = "model" and [rl.rcsd]
// rubric_writer use it. Models are loaded by the app (app/judge_setup.h installs the loader); this file
// leaves loading out. Templates and parsers are plain functions, tested without a model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "temper/model/transformer.h"
#include "temper/rl/prompt_codec.h"
#include "temper/rl/reward_set.h"
#include "temper/rollout/pooled_engine.h"

namespace temper::rl {

// A prompt template compiled once: literal text and {name} placeholders among `names`; "{{" and "}}" are
// literal braces, a lone "}" is literal too. An unknown {name} or an unclosed "{" throws naming it and `where`.
class JudgeTemplate {
 public:
  JudgeTemplate() = default;
  JudgeTemplate(const std::string& text, const std::vector<std::string>& names, const std::string& where);
  // values[i] replaces names[i]; the values are never scanned for placeholders.
  std::string fill(const std::vector<std::string>& values) const;
  bool uses(size_t name) const;  // whether names[name] occurs

 private:
  std::vector<std::pair<std::string, int>> pieces_;  // (literal, -1) or ("", name index)
};

// The [[reward]] judge's placeholders, in this order: {question} (Problem::shown()), {completion}, {answer},
// {rubric}.
const std::vector<std::string>& judge_placeholders();

// parse = "score": the judgement's score. Chosen, in this order: the number after the word "score" (any case,
// e.g. "Score: 7", "**score** = 7.5", "final score is 8"); else the numerator of the first "N/M" or "N out of
// M" ("7/10"); else the first number in the text. Numbers: an optional sign ('-' or '+' not after a letter or
// digit), digits, an optional fraction (".5"). None: nullopt.
std::optional<double> parse_judge_score(std::string_view text);
// parse = "choice": the index of the label occurring first in the judgement, matched whole-word (not inside a
// longer word of letters, digits or '_') and case-insensitively; at one position the longest label wins
// ("not correct" over "not"). None: nullopt.
std::optional<size_t> parse_judge_choice(std::string_view text, const std::vector<std::string>& labels);
// The judgement as info: whitespace collapsed, cut to `max_chars` with "...".
std::string judge_info(std::string_view text, size_t max_chars = 200);

// A generation-only model with its own codec and engine (KV cache of kv_memory_mb).
struct JudgeModelConfig {
  int64_t kv_memory_mb = 1024;
  int64_t max_seqs = 64;
};

struct JudgeAnswer {
  std::string text;
  bool cut = false;       // stopped at max_new
  bool too_long = false;  // the prompt left no room in the judge's context: not asked (text empty)
};

class JudgeModel {
 public:
  JudgeModel(std::unique_ptr<Transformer> model, PromptCodec codec, JudgeModelConfig cfg = {},
             std::string name = "judge");
  // One answer to each user turn (rendered through the judge's chat template), all in one engine run:
  // greedy when temperature == 0, else sampled from Philox (seed, streams[i]) (streams empty: i).
  std::vector<JudgeAnswer> ask(const std::vector<std::string>& user_turns, int64_t max_new, double temperature,
                               uint64_t seed = 0, const std::vector<uint64_t>& streams = {});
  const std::string& name() const { return name_; }
  Transformer& model() { return *model_; }
  const PromptCodec& codec() const { return codec_; }
  const rollout::EngineStats& stats() const { return engine_->engine().stats(); }  // of the last ask()

 private:
  std::unique_ptr<Transformer> model_;
  PromptCodec codec_;
  std::string name_;
  std::unique_ptr<rollout::PooledEngine> engine_;
};

// Loading a judge model by path, for the parts of rl that name one in their keys ([rl.turing] judge_model,
// [rl.rcsd] rubric_writer): the app installs the loader (app/judge_setup.h); without one, loading throws
// naming `who`. device: "cpu" or "cuda" (the policy's GPU).
using JudgeModelLoader = std::function<std::shared_ptr<JudgeModel>(const std::string& path, const std::string& device)>;
void set_judge_model_loader(JudgeModelLoader loader);
std::shared_ptr<JudgeModel> load_judge_model(const std::string& path, const std::string& device,
                                             const std::string& who);

// The [[reward]] judge term: every query of a batch rendered with the template and judged in one engine run,
// greedy at temperature 0, else sampled from a seed fixed by the step and a stream by the query's id (a
// sample's score does not depend on the batch around it). parse = "score": reward (score - min) / (max - min),
// a score outside [min_score, max_score] is a failure; parse = "choice": the label's reward (label_rewards, by
// default 1 for the first label, 0 for the others). An unparseable judgement, or a prompt the judge's context
// cannot hold, is a failure with the judgement in info. The config is validated and the template compiled
// here (an unknown placeholder throws naming it).
std::unique_ptr<RewardTerm> make_judge_term(const RewardTermConfig& c, std::shared_ptr<JudgeModel> model);

// The Philox stream the judge term samples a query's judgement from: FNV-1a of the query's id with
// kFnv1aShortBasis (core/fnv1a.h), the value runs have drawn with so far.
uint64_t judge_stream(std::string_view query_id);

// The value of one judgement under `j` (what the term does per sample); nullopt: a failure, `why` says what.
std::optional<double> judge_value(const JudgeConfig& j, std::string_view judgement, std::string* why = nullptr);

}  // namespace temper::rl
