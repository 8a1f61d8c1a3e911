// Data-parallel generation: with a process group of N ranks, rank r runs a contiguous block of the
// requests (dist::shard) on its own engine and the completions of every rank are all-gathered, so every
// rank returns what one process's engine.run(reqs) returns, in its (request, member) order. A sample
// does not depend on the rank that drew it (per-request seeds and streams); its log-probs may differ by
// float rounding, because each rank's engine batches other rows. Blocks, so that the rows a rank
// trains on in the update (a block of the group-ordered rows) are mostly the ones it rolled out and
// kept activations for (Completion::act_slots survive the gather on the rank that drew them). Hooks
// see this rank's requests: shard_requests() maps them back.
#pragma once

#include <string>
#include <vector>

#include "temper/dist/communicator.h"
#include "temper/rollout/engine.h"

namespace temper::rollout {

// The request indices this rank runs (all of them for one process or a null group).
std::vector<int64_t> shard_requests(int64_t n, const dist::Communicator* comm);

std::vector<Completion> run_sharded(RolloutEngine& engine, const std::vector<RolloutRequest>& reqs,
                                    dist::Communicator* comm, RolloutHook* hook = nullptr);

// Completions as bytes (what run_sharded all-gathers); decoding appends.
std::string encode_completions(const std::vector<Completion>& done);
void decode_completions(const std::string& bytes, std::vector<Completion>& out);

}  // namespace temper::rollout
