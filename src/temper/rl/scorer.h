// Forward passes without a gradient over the policy and its frozen starting copy: the log-probs, entropies,
// distributions and hidden states that methods ask for through MethodEnv (score_tokens, score_batch, embed,
// hidden), and the update's reference log-probs for the KL term. Data-parallel batch passes score this
// rank's block of rows and sum over ranks. Leaves out the update's own forward/backward (policy_update.h).
#pragma once

#include <cstdint>
#include <vector>

#include "temper/dist/communicator.h"
#include "temper/model/transformer.h"
#include "temper/rl/batch.h"
#include "temper/rl/method.h"
#include "temper/rl/token_rows.h"

namespace temper::rl {

class Scorer {
 public:
  // reference: the frozen starting policy (null: none; passes that need it refuse). micro_batch: rows per
  // batched forward (0: 16 for methods' batches, the whole batch for the reference pass); share_prompts:
  // rows with equal prompts hold the prompt once (PackedRows) where the model supports it.
  Scorer(Transformer& policy, Transformer* reference, int64_t micro_batch, bool share_prompts);
  void set_communicator(dist::Communicator* comm) { comm_ = comm; }
  // Sets MethodEnv's score_tokens, score_batch, embed and hidden to this scorer's (which must outlive env's users).
  void lend(MethodEnv& env);

  // MethodEnv::score_tokens: one completion under the current policy.
  void score_tokens(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens, std::vector<float>& logp,
                    std::vector<float>& entropy);
  // MethodEnv::score_batch: many completions, under the current policy or (initial) the reference.
  void score_batch(const std::vector<std::vector<int32_t>>& prompts, const std::vector<std::vector<int32_t>>& tokens,
                   bool initial, std::vector<std::vector<float>>& logp, std::vector<std::vector<float>>* dists);
  // MethodEnv::embed: the reference's mean final hidden state over the reply.
  std::vector<float> embed(const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply);
  // MethodEnv::hidden: the policy's final hidden states at each completion token, [tokens x hidden_size].
  std::vector<float> hidden(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens);
  // The update's KL reference: rows.ref := the reference's log-probs of rows (b's trajectories, in order).
  void reference_logprobs(const Batch& b, TokenRows& rows);

 private:
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int ranks() const { return comm_ ? comm_->size() : 1; }

  Transformer& policy_;
  Transformer* reference_;
  int64_t micro_batch_;
  bool share_prompts_;
  dist::Communicator* comm_ = nullptr;
};

}  // namespace temper::rl
