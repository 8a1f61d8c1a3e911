// Data-parallel generation: with a process group of N ranks, each rank runs its share of the requests
// on its own engine and the completions of every rank are all-gathered, so every rank returns what one
// process's engine.run(reqs) returns, in its (request, member) order. A sample does not depend on the
// rank that drew it (per-request seeds and streams); its log-probs may differ by float rounding,
// because each rank's engine batches other rows. Hooks see this rank's requests: shard_requests() maps
// them back.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/bytes.h"
#include "temper/dist/communicator.h"
#include "temper/rollout/engine.h"

namespace temper::rollout {

// Shares interleave (rank r runs r, r+N, ...) so ranks get alike mixes of prompt lengths, or are
// contiguous blocks (dist::shard): the RL step's rollout, whose rows a rank trains on are a block of the
// group-ordered rows, so that it trains mostly on rows it rolled out and kept activations for
// (Completion::act_slots survive the gather on the rank that drew them).
enum class Sharding { interleaved, blocks };

// The request indices this rank runs (all of them for one process or a null group).
std::vector<int64_t> shard_requests(int64_t n, const dist::Communicator* comm, Sharding how = Sharding::interleaved);

std::vector<Completion> run_sharded(RolloutEngine& engine, const std::vector<RolloutRequest>& reqs,
                                    dist::Communicator* comm, RolloutHook* hook = nullptr,
                                    Sharding how = Sharding::interleaved);

// Completions as bytes (what run_sharded all-gathers); decoding appends.
std::string encode_completions(const std::vector<Completion>& done);
void decode_completions(const std::string& bytes, std::vector<Completion>& out);

// Appended spans (Completion::appended, rl::Trajectory::appended) as those bytes and the async checkpoint hold them:
// one int64 vector [at, n, at, n, ...]. get_appended names the message (`what`) when the list's length is odd.
void put_appended(ByteWriter& w, const std::vector<std::pair<int64_t, int64_t>>& spans);
std::vector<std::pair<int64_t, int64_t>> get_appended(ByteReader& r, const char* what);

}  // namespace temper::rollout
