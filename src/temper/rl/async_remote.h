// [rl.async] with explorer ranks (rl.async.explorer_ranks = N under `mpirun -np R`): the last N ranks explore,
// the first R - N train (data-parallel among themselves on their own group, as without [rl.async]). Per version
// trainer rank 0 sends each explorer its block of the requests it drew (point-to-point bytes), then the flat f32
// weights with the version's number (a nonblocking send from a staging copy, so the trainer updates its live
// weights at once; under LoRA the adapters alone: every rank loads the frozen base from the model's path and
// quantises a bf16/int4 one to the same bytes); the explorer rolls out on them and returns the completions tagged
// with that version, which trainer rank 0 passes to the other trainers (a broadcast on the trainers' group). With
// [env] a version's job is a round's conversations instead (ConversationJob), split as the requests are: each explorer
// rank converses a contiguous block of the round's problems through its own ConversationSource, built from the same
// [env] (its own environment program, or its own agents' endpoint), its episodes named and seeded by their index in
// the whole round (ConversationJob::offset), and returns the scored trajectories and the source's metrics of its block
// (async_state.h's encoding); trainer rank 0 puts the blocks' trajectories back in (problem, member) order and merges
// their env/ metrics by the source's rules (ConversationSource::merge_metrics: counts add, means are weighted by their
// counts). The schedule is the explorer thread's (async_explorer.h): the same requests or conversations, sampling
// streams and weights give the same tokens; with one explorer rank the same batches bit for bit (with several,
// each rank decodes its block alone: batches of other sizes, log-probs equal up to rounding). Leaves out which
// requests (rl_trainer.cpp) and the launch wiring (app/train_cmd.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "temper/dist/communicator.h"
#include "temper/rl/async_explorer.h"

namespace temper::rl {

// This rank's role: `trainers` is the trainer ranks' group (null on an explorer rank); explorers are world ranks
// [first_explorer, world.size()). Every rank of `world` must call it (a collective split).
struct AsyncRoles {
  std::unique_ptr<dist::Communicator> trainers;
  std::unique_ptr<dist::Communicator> explorers;  // the explorer ranks' group (null on a trainer rank)
  int first_explorer = 0;
  bool explorer() const { return trainers == nullptr; }
};
AsyncRoles split_async_roles(dist::Communicator& world, int64_t explorer_ranks);
// temper train: the split of dist::world() made dist::group() (trainers: their group; explorers: theirs) and
// dist::role(). Nothing when explorer_ranks is 0.
void enter_async_roles(int64_t explorer_ranks);

class RemoteExplorer final : public Explorer {
 public:
  RemoteExplorer(dist::Communicator& world, dist::Communicator& trainers, int first_explorer);
  ~RemoteExplorer() override;  // collects the job in flight, then trainer rank 0 tells the explorers to stop
  void launch(const Transformer& policy, std::vector<rollout::RolloutRequest> reqs) override;
  void launch_conversations(const Transformer& policy, ConversationJob job) override;
  std::vector<rollout::Completion> wait() override;

 private:
  // Trainer rank 0: explorer e gets jobs[e] of this kind and the version's weights.
  void send_job(const Transformer& policy, uint8_t kind, const std::vector<std::string>& jobs);

  dist::Communicator& world_;
  dist::Communicator& trainers_;
  int first_;
  std::vector<float> staging_;  // the version being sent: weights or adapters (sent before the explorer replies)
  std::vector<int64_t> begin_;  // each explorer's first request (a conversation job: problem) of the job in flight
  const ConversationSource* source_ = nullptr;  // the trainer's: how the blocks' env/ metrics merge
  bool conversing_ = false;                     // the job in flight is a conversation job
  int64_t version_ = 0;
};

// An explorer rank's loop: receives a version's requests and weights from trainer rank `root` of `world`, loads
// the weights into `model` (the model `engine` runs; under LoRA into its attached adapters: both sides must run
// the same [lora]), rolls out, returns the completions (a conversation job: converses its block through `source`,
// returns the conversations and the source's metrics); until the trainer says stop. An error in a job goes back to the
// trainers, which fail naming this rank and role.
void serve_explorer(dist::Communicator& world, int root, Transformer& model, rollout::RolloutEngine& engine,
                    ConversationSource* source = nullptr);

// Problems [begin, end) of a conversation job as bytes, with its request, episode prefix and where the block starts in
// the round (the job message of explorer ranks and processes); an explorer's side: that block conversed through
// `source` on `engine`, its scored trajectories (problem and group from 0 in the block) and the source's metrics.
std::string encode_conversation_block(const ConversationJob& job, int64_t begin, int64_t end);
std::string converse_block(const std::string& bytes, ConversationSource* source, rollout::RolloutEngine& engine);

// Requests as bytes (the job message); decoding appends.
std::string encode_requests(const std::vector<rollout::RolloutRequest>& reqs, size_t begin, size_t end);
void decode_requests(const std::string& bytes, std::vector<rollout::RolloutRequest>& out);

}  // namespace temper::rl
