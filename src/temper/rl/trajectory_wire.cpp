#include "temper/rl/trajectory_wire.h"

#include "temper/core/bytes.h"

namespace temper::rl {

std::string encode_trajectories(const std::vector<Trajectory>& traj) {
  ByteWriter w;
  w.put<int64_t>(static_cast<int64_t>(traj.size()));
  for (const Trajectory& t : traj) {
    w.put(t.problem), w.put(t.group), w.put(t.member), w.put(t.parent), w.put(t.fork_pos), w.put(t.forced), w.put(t.forced_pos);
    w.put(t.prompt), w.put(t.tokens), w.put(t.sample_logprob), w.put(t.old_logprob), w.put(t.entropy);
    w.put(t.advantage), w.put(t.weight), w.put(t.loss_mask);
    w.put(t.text);
    w.put(t.reward), w.put(t.rewards);
    w.put<uint8_t>(t.correct), w.put<int32_t>(static_cast<int32_t>(t.finish));
    w.put<int64_t>(static_cast<int64_t>(t.tags.size()));
    for (const std::string& s : t.tags) w.put(s);
    w.put<uint8_t>(t.off_policy), w.put<uint8_t>(t.scored);
  }
  return std::move(w.bytes());
}

void decode_trajectories(const std::string& bytes, std::vector<Trajectory>& out) {
  ByteReader r(bytes);
  int64_t n = 0;
  r.get(n);
  for (int64_t i = 0; i < n; ++i) {
    Trajectory t;
    r.get(t.problem), r.get(t.group), r.get(t.member), r.get(t.parent), r.get(t.fork_pos), r.get(t.forced), r.get(t.forced_pos);
    r.get(t.prompt), r.get(t.tokens), r.get(t.sample_logprob), r.get(t.old_logprob), r.get(t.entropy);
    r.get(t.advantage), r.get(t.weight), r.get(t.loss_mask);
    r.get(t.text);
    r.get(t.reward), r.get(t.rewards);
    uint8_t b = 0;
    int32_t f = 0;
    r.get(b), t.correct = b != 0;
    r.get(f), t.finish = static_cast<rollout::FinishReason>(f);
    int64_t tags = 0;
    r.get(tags);
    t.tags.resize(static_cast<size_t>(tags));
    for (std::string& s : t.tags) r.get(s);
    r.get(b), t.off_policy = b != 0;
    r.get(b), t.scored = b != 0;
    out.push_back(std::move(t));
  }
  TEMPER_CHECK(r.done()) << "trajectory message: trailing bytes";
}

}  // namespace temper::rl
