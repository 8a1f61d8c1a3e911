// ExploredBatch's checkpoint text (async_state.h): a flat byte encoding (core/bytes.h; completions as the
// data-parallel gather encodes them) in base64, since trainer_state.json holds text.
#include "temper/rl/async_state.h"

#include <memory>
#include <optional>
#include <string_view>

#include "temper/core/base64.h"
#include "temper/core/bytes.h"
#include "temper/core/error.h"
#include "temper/rollout/sharded.h"

namespace temper::rl {

namespace {

constexpr const char* kTag = "temper-async-1:";
constexpr const char* kTag2 = "temper-async-2:";  // each batch then ends with its conversations and env metrics

void put_problem(ByteWriter& w, const tasks::Problem& p) {
  w.put(p.id), w.put(p.prompt), w.put<int64_t>(static_cast<int64_t>(p.messages.size()));
  for (const tasks::Message& m : p.messages) w.put(m.role), w.put(m.content);
  w.put(p.answer), w.put(p.gold_solution), w.put(p.teacher_response), w.put(p.rubric);
  w.put<int64_t>(p.difficulty), w.put(p.index), w.put(p.asked);
  w.put<int64_t>(static_cast<int64_t>(p.modules.size()));
  for (const std::string& m : p.modules) w.put(m);
  w.put(p.user), w.put<int64_t>(static_cast<int64_t>(p.history.size()));
  for (const std::string& h : p.history) w.put(h);
  w.put(p.context), w.put<uint8_t>(p.row ? 1 : 0);
  if (p.row) w.put(*p.row);
}

constexpr const char* kState = "trainer_state.json: the async state";

int64_t get_count(ByteReader& r, const char* what = kState) {
  int64_t n = 0;
  r.get(n);
  TEMPER_CHECK(n >= 0 && n < (int64_t{1} << 32)) << what << " holds a bad count " << n;
  return n;
}

tasks::Problem get_problem(ByteReader& r) {
  tasks::Problem p;
  r.get(p.id), r.get(p.prompt);
  p.messages.resize(static_cast<size_t>(get_count(r)));
  for (tasks::Message& m : p.messages) r.get(m.role), r.get(m.content);
  r.get(p.answer), r.get(p.gold_solution), r.get(p.teacher_response), r.get(p.rubric);
  int64_t difficulty = 0;
  r.get(difficulty), r.get(p.index), r.get(p.asked);
  p.difficulty = static_cast<int>(difficulty);
  p.modules.resize(static_cast<size_t>(get_count(r)));
  for (std::string& m : p.modules) r.get(m);
  r.get(p.user);
  p.history.resize(static_cast<size_t>(get_count(r)));
  for (std::string& h : p.history) r.get(h);
  r.get(p.context);
  uint8_t row = 0;
  r.get(row);
  if (row) {
    std::string text;
    r.get(text);
    p.row = std::make_shared<const std::string>(std::move(text));
  }
  return p;
}

}  // namespace

void put_verdict(ByteWriter& w, const Trajectory& t) {
  w.put(t.reward), w.put(t.rewards), w.put(t.reward_terms);
  w.put<int64_t>(static_cast<int64_t>(t.reward_components.size()));
  for (const auto& [name, x] : t.reward_components) w.put(name), w.put(x);
  w.put(t.reward_info), w.put<uint8_t>(t.correct ? 1 : 0);
}

void get_verdict(ByteReader& r, Trajectory& t, const char* what) {
  r.get(t.reward), r.get(t.rewards), r.get(t.reward_terms);
  t.reward_components.resize(static_cast<size_t>(get_count(r, what)));
  for (auto& [name, x] : t.reward_components) r.get(name), r.get(x);
  uint8_t correct = 0;
  r.get(t.reward_info), r.get(correct);
  t.correct = correct != 0;
}

namespace {

// A conversation's trajectory as ConversationSource::run leaves it (scored; the trainer's per-step fields, version
// included, are set after it is taken; loss_terms and act_slots are never a conversation's).
void put_trajectory(ByteWriter& w, const Trajectory& t) {
  w.put(t.problem), w.put(t.group), w.put(t.member), w.put(t.stratum);
  w.put(t.lineage.parent), w.put(t.lineage.fork_pos), w.put(t.lineage.forced), w.put(t.lineage.forced_pos);
  w.put<uint8_t>(t.lineage.off_policy ? 1 : 0);
  w.put(t.prompt), w.put(t.tokens), w.put(t.sample_logprob), w.put(t.old_logprob), w.put(t.entropy);
  w.put(t.advantage), w.put(t.weight), w.put(t.loss_mask);
  w.put(t.text);
  put_verdict(w, t);
  w.put<int32_t>(static_cast<int32_t>(t.finish));
  w.put<int64_t>(static_cast<int64_t>(t.tags.size()));
  for (const std::string& tag : t.tags) w.put(tag);
  w.put<uint8_t>(t.scored ? 1 : 0);
  rollout::put_appended(w, t.appended);
}

Trajectory get_trajectory(ByteReader& r) {
  Trajectory t;
  r.get(t.problem), r.get(t.group), r.get(t.member), r.get(t.stratum);
  r.get(t.lineage.parent), r.get(t.lineage.fork_pos), r.get(t.lineage.forced), r.get(t.lineage.forced_pos);
  uint8_t flag = 0;
  r.get(flag);
  t.lineage.off_policy = flag != 0;
  r.get(t.prompt), r.get(t.tokens), r.get(t.sample_logprob), r.get(t.old_logprob), r.get(t.entropy);
  r.get(t.advantage), r.get(t.weight), r.get(t.loss_mask);
  r.get(t.text);
  get_verdict(r, t, kState);
  int32_t finish = 0;
  r.get(finish);
  TEMPER_CHECK(finish >= 0 && finish <= static_cast<int32_t>(rollout::FinishReason::hook))
      << "trainer_state.json: the async state holds a bad finish reason " << finish;
  t.finish = static_cast<rollout::FinishReason>(finish);
  t.tags.resize(static_cast<size_t>(get_count(r)));
  for (std::string& tag : t.tags) r.get(tag);
  r.get(flag);
  t.scored = flag != 0;
  t.appended = rollout::get_appended(r, kState);
  return t;
}

}  // namespace

void put_problems(ByteWriter& w, const std::vector<tasks::Problem>& problems) {
  w.put<int64_t>(static_cast<int64_t>(problems.size()));
  for (const tasks::Problem& p : problems) put_problem(w, p);
}

void get_problems(ByteReader& r, std::vector<tasks::Problem>& out) {
  const int64_t n = get_count(r);
  for (int64_t i = 0; i < n; ++i) out.push_back(get_problem(r));
}

void put_conversations(ByteWriter& w, const std::vector<Trajectory>& conversations,
                       const std::vector<std::pair<std::string, double>>& metrics) {
  w.put<int64_t>(static_cast<int64_t>(conversations.size()));
  for (const Trajectory& t : conversations) put_trajectory(w, t);
  w.put<int64_t>(static_cast<int64_t>(metrics.size()));
  for (const auto& [name, x] : metrics) w.put(name), w.put(x);
}

void get_conversations(ByteReader& r, std::vector<Trajectory>& conversations,
                       std::vector<std::pair<std::string, double>>& metrics) {
  const int64_t nt = get_count(r);
  for (int64_t i = 0; i < nt; ++i) conversations.push_back(get_trajectory(r));
  const size_t m0 = metrics.size();
  metrics.resize(m0 + static_cast<size_t>(get_count(r)));
  for (size_t i = m0; i < metrics.size(); ++i) r.get(metrics[i].first), r.get(metrics[i].second);
}

std::string encode_explored(const std::deque<ExploredBatch>& batches) {
  bool conversations = false;
  for (const ExploredBatch& b : batches)
    conversations = conversations || !b.conversations.empty() || !b.env_metrics.empty();
  ByteWriter w;
  w.put<int64_t>(static_cast<int64_t>(batches.size()));
  for (const ExploredBatch& b : batches) {
    w.put(b.step), w.put(b.version);
    put_problems(w, b.problems);
    w.put<int64_t>(static_cast<int64_t>(b.prompts.size()));
    for (const std::vector<int32_t>& p : b.prompts) w.put(p);
    w.put(rollout::encode_completions(b.done));
    if (conversations) put_conversations(w, b.conversations, b.env_metrics);
  }
  return (conversations ? kTag2 : kTag) + base64_encode(w.bytes());
}

std::deque<ExploredBatch> decode_explored(const std::string& text) {
  const std::string tag = kTag, tag2 = kTag2;
  const bool conversations = text.compare(0, tag2.size(), tag2) == 0;
  TEMPER_CHECK(conversations || text.compare(0, tag.size(), tag) == 0)
      << "trainer_state.json: the async state does not start with '" << tag << "' or '" << tag2
      << "' (written by another version?)";
  const std::optional<std::string> decoded =
      base64_decode(std::string_view(text).substr((conversations ? tag2 : tag).size()));
  TEMPER_CHECK(decoded) << "trainer_state.json: the async state is not base64";
  const std::string& bytes = *decoded;
  ByteReader r(bytes);
  std::deque<ExploredBatch> out(static_cast<size_t>(get_count(r)));
  for (ExploredBatch& b : out) {
    r.get(b.step), r.get(b.version);
    get_problems(r, b.problems);
    b.prompts.resize(static_cast<size_t>(get_count(r)));
    for (std::vector<int32_t>& p : b.prompts) r.get(p);
    std::string done;
    r.get(done);
    rollout::decode_completions(done, b.done);
    if (conversations) get_conversations(r, b.conversations, b.env_metrics);
  }
  TEMPER_CHECK(r.done()) << "trainer_state.json: the async state has bytes after its last batch";
  return out;
}

}  // namespace temper::rl
