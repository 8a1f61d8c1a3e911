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

int64_t get_count(ByteReader& r) {
  int64_t n = 0;
  r.get(n);
  TEMPER_CHECK(n >= 0 && n < (int64_t{1} << 32)) << "trainer_state.json: the async state holds a bad count " << n;
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

std::string encode_explored(const std::deque<ExploredBatch>& batches) {
  ByteWriter w;
  w.put<int64_t>(static_cast<int64_t>(batches.size()));
  for (const ExploredBatch& b : batches) {
    w.put(b.step), w.put(b.version), w.put<int64_t>(static_cast<int64_t>(b.problems.size()));
    for (const tasks::Problem& p : b.problems) put_problem(w, p);
    w.put<int64_t>(static_cast<int64_t>(b.prompts.size()));
    for (const std::vector<int32_t>& p : b.prompts) w.put(p);
    w.put(rollout::encode_completions(b.done));
  }
  return kTag + base64_encode(w.bytes());
}

std::deque<ExploredBatch> decode_explored(const std::string& text) {
  const std::string tag = kTag;
  TEMPER_CHECK(text.compare(0, tag.size(), tag) == 0)
      << "trainer_state.json: the async state does not start with '" << tag << "' (written by another version?)";
  const std::optional<std::string> decoded = base64_decode(std::string_view(text).substr(tag.size()));
  TEMPER_CHECK(decoded) << "trainer_state.json: the async state is not base64";
  const std::string& bytes = *decoded;
  ByteReader r(bytes);
  std::deque<ExploredBatch> out(static_cast<size_t>(get_count(r)));
  for (ExploredBatch& b : out) {
    r.get(b.step), r.get(b.version);
    const int64_t np = get_count(r);
    for (int64_t i = 0; i < np; ++i) b.problems.push_back(get_problem(r));
    b.prompts.resize(static_cast<size_t>(get_count(r)));
    for (std::vector<int32_t>& p : b.prompts) r.get(p);
    std::string done;
    r.get(done);
    rollout::decode_completions(done, b.done);
  }
  TEMPER_CHECK(r.done()) << "trainer_state.json: the async state has bytes after its last batch";
  return out;
}

}  // namespace temper::rl
