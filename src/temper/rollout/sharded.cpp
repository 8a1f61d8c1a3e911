#include "temper/rollout/sharded.h"

#include <algorithm>
#include <map>
#include <utility>

#include "temper/core/bytes.h"

namespace temper::rollout {

std::vector<int64_t> shard_requests(int64_t n, const dist::Communicator* comm, Sharding how) {
  const int64_t size = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  std::vector<int64_t> mine;
  if (how == Sharding::blocks) {
    const dist::Range r = dist::shard(n, static_cast<int>(rank), static_cast<int>(size));
    for (int64_t j = r.begin; j < r.end; ++j) mine.push_back(j);
  } else {
    for (int64_t j = rank; j < n; j += size) mine.push_back(j);
  }
  return mine;
}

std::vector<Completion> run_sharded(RolloutEngine& engine, const std::vector<RolloutRequest>& reqs,
                                    dist::Communicator* comm, RolloutHook* hook, Sharding how) {
  if (!comm || comm->size() == 1) return engine.run(reqs, hook);
  const std::vector<int64_t> mine = shard_requests(static_cast<int64_t>(reqs.size()), comm, how);
  std::vector<RolloutRequest> local;
  for (int64_t j : mine) local.push_back(reqs[static_cast<size_t>(j)]);
  std::vector<Completion> done = engine.run(local, hook);
  for (Completion& c : done) c.request = mine[static_cast<size_t>(c.request)];
  std::vector<std::string> parts = comm->allgather(encode_completions(done));
  std::vector<Completion> drawn;
  drawn.swap(done);
  for (const std::string& p : parts) decode_completions(p, done);
  // This rank's own completions keep their activation slots (they index this rank's store): the
  // update's rows of this rank are mostly the ones it rolled out.
  std::map<std::pair<int64_t, int64_t>, Completion*> own;
  for (Completion& l : drawn)
    if (!l.act_slots.empty()) own[{l.request, l.member}] = &l;
  if (!own.empty())
    for (Completion& c : done)
      if (auto it = own.find({c.request, c.member}); it != own.end()) c.act_slots = std::move(it->second->act_slots);
  // Each request's completions come from one rank in engine order: a stable sort by request restores
  // the one-process order.
  std::stable_sort(done.begin(), done.end(),
                   [](const Completion& a, const Completion& b) { return a.request < b.request; });
  return done;
}

std::string encode_completions(const std::vector<Completion>& done) {
  ByteWriter w;
  w.put<int64_t>(static_cast<int64_t>(done.size()));
  for (const Completion& c : done) {
    w.put(c.request), w.put(c.member), w.put(c.parent), w.put(c.fork_pos), w.put(c.forced), w.put(c.forced_pos),
        w.put(c.stream);
    w.put(c.tokens), w.put(c.sample_logprob), w.put(c.policy_logprob), w.put(c.entropy);
    w.put<int32_t>(static_cast<int32_t>(c.finish)), w.put(c.stop_string);
    put_appended(w, c.appended);
  }
  return std::move(w.bytes());
}

void decode_completions(const std::string& bytes, std::vector<Completion>& out) {
  ByteReader r(bytes);
  int64_t n = 0;
  r.get(n);
  TEMPER_CHECK(n >= 0) << "completion message: negative count";
  for (int64_t i = 0; i < n; ++i) {
    Completion c;
    int32_t finish = 0;
    r.get(c.request), r.get(c.member), r.get(c.parent), r.get(c.fork_pos), r.get(c.forced), r.get(c.forced_pos),
        r.get(c.stream);
    r.get(c.tokens), r.get(c.sample_logprob), r.get(c.policy_logprob), r.get(c.entropy);
    r.get(finish), r.get(c.stop_string);
    c.appended = get_appended(r, "completion message");
    TEMPER_CHECK(finish >= 0 && finish <= static_cast<int32_t>(FinishReason::hook))
        << "completion message: bad finish reason " << finish;
    c.finish = static_cast<FinishReason>(finish);
    out.push_back(std::move(c));
  }
  TEMPER_CHECK(r.done()) << "completion message: trailing bytes";
}

void put_appended(ByteWriter& w, const std::vector<std::pair<int64_t, int64_t>>& spans) {
  std::vector<int64_t> flat;
  flat.reserve(2 * spans.size());
  for (auto [at, n] : spans) flat.push_back(at), flat.push_back(n);
  w.put(flat);
}

std::vector<std::pair<int64_t, int64_t>> get_appended(ByteReader& r, const char* what) {
  std::vector<int64_t> flat;
  r.get(flat);
  TEMPER_CHECK(flat.size() % 2 == 0) << what << ": odd appended-span list (" << flat.size() << " numbers)";
  std::vector<std::pair<int64_t, int64_t>> spans;
  spans.reserve(flat.size() / 2);
  for (size_t k = 0; k < flat.size(); k += 2) spans.emplace_back(flat[k], flat[k + 1]);
  return spans;
}

}  // namespace temper::rollout
