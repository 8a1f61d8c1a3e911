// One RolloutEngine::run call as an object: the state of the call (completions, the queue, the live
// sequences, the step's row buffers) held as members, and each part of a step a named member.
// run() is the loop; engine_run.cpp holds the plain step, engine_speculative.cpp the speculative
// cycle. Private to rollout/: the public API stays RolloutEngine (engine.h), whose class comment
// describes the behaviour. Buffers are sized once here: the decode loop does not allocate.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "temper/core/rng.h"
#include "temper/model/device_model.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"
#include "temper/rollout/engine.h"
#include "temper/rollout/run_driver.h"
#include "temper/rollout/sampler.h"

namespace temper::rollout {

class EngineRun {
 public:
  EngineRun(Transformer& model, KvPool& pool, const EngineConfig& cfg, EngineStats& stats,
            const std::vector<RolloutRequest>& requests, RolloutHook* hook, RunDriver* driver = nullptr);
  // Completions in (request, member) order; a request's forks follow its G members.
  std::vector<Completion> run();

 private:
  struct Choice {
    Sample x{};
    float lp = 0, ent = 0;  // under the policy (temperature 1, full vocabulary)
  };
  struct Live {
    int64_t req = 0, out = 0;  // out: index into the completions
    SeqKv kv;
    Rng rng;
    Sampler sampler;
    int32_t pending = -1;  // sampled, not yet fed to the model
    int64_t forks_made = 0;
    std::string tail{};             // the completion's last bytes, for stop strings
    std::vector<int32_t> forced{};  // still to emit instead of sampling (front first: kept reversed)
    int64_t max_len = 0;            // completion tokens at most (this turn's cap with a driver)
    bool continuing = false;        // in resume_ for its next turn (its KV kept), not preempted
  };

  // Set-up (engine_run.cpp).
  void add_request(const RolloutRequest& q, int64_t r);  // validates it, creates its G completions, queues it
  void reserve_buffers();
  const RolloutRequest& rq(int64_t r) const {
    return r < n_initial_ ? requests_[static_cast<size_t>(r)] : added_[static_cast<size_t>(r - n_initial_)];
  }
  int64_t n_requests() const { return n_initial_ + static_cast<int64_t>(added_.size()); }

  // The driver (engine_turns.cpp): requests arriving, turns ending and continuing.
  bool busy() const { return !queue_.empty() || !resume_.empty() || !live_.empty(); }
  bool take_driver_input(bool wait);  // false: nothing came
  void continue_turn(Continuation& k);
  bool park(Live& s, FinishReason why);               // true: the driver keeps it (moved into parked_)
  bool make_room_for(const Live& s, int64_t blocks);  // frees waiting sequences' KV; true if `blocks` fit now
  int64_t uncached(const Live& s) const;  // tokens of prompt + completion before the pending one not in its KV

  // The plain step: decode every live sequence by one token, resume preempted ones, admit prompts.
  bool speculating();  // true when this step is a speculative cycle's to try (turns speculation on)
  void plain_step();
  void clear_rows();
  void preempt_if_full();  // room for one more token in every live sequence, else the newest leave
  void add_decode_rows();
  void add_resumed_rows();  // preempted sequences come back first, their prefix recomputed
  void admit();             // whole prompts of queued requests while the group fits
  void add_prefill_tables();
  bool forward_step();  // true when the device chose the decode rows' tokens
  bool device_can_choose() const;
  void choose_on_device(const PagedStep& st);
  void choose_all();  // choices_ of the decode rows, in parallel
  void record_step();
  void start_members(size_t a);  // the G members of the a-th admitted request, forked from its prompt
  void adopt_spawned();          // next_ += the step's forks; next_ becomes live_
  std::vector<Completion> collect();
  void abandon();  // an interrupted run: every sequence's KV back to the pool

  // A sequence's tokens (engine_run.cpp).
  Choice choose(Live& s, const float* z);
  bool record(Live& s, const Choice& ch);  // true if the sequence ends here
  bool emit(Live& s, const float* z) { return record(s, choose(s, z)); }
  bool hits_stop_string(Live& s, const RolloutRequest& q, Completion& c, int32_t token);
  void fork(Live& s, const RolloutRequest& q, const Completion& c, const HookDecision& d);
  void finish(Live& s, FinishReason why);
  Live new_live(int64_t r, int64_t out_index, SeqKv kv);
  void keep_activation(bool on, std::vector<int64_t>& slots, int64_t p, int32_t token);
  bool keeps(const Live& s) const { return rq(s.req).keep_activations; }
  bool any_kept() const;
  int64_t blocks_for(int64_t tokens) const { return (tokens + bs_ - 1) / bs_; }
  PagedStep paged_step(bool keep_rows);  // a step over the row buffers; keep_rows: with the kept slots

  // The speculative cycle (engine_speculative.cpp).
  bool speculative_cycle();
  bool plan_drafts();  // glen_ per sequence and the pool's room; false (a plain step runs) if none
  void draft();
  void verify();
  void accept();
  bool accept_drafts(Live& s, size_t i, int64_t base);  // true if the sequence ends here
  void add_spec_row(const Live& s, size_t i, int64_t j, bool verify);
  void forward_spec_rows(const Int4Drafter* drafter);
  History history(const Live& s, const std::vector<int32_t>* extra);
  float* q_at(size_t i, int64_t j) {
    return qdist_.data() + (i * static_cast<size_t>(gamma_) + static_cast<size_t>(j)) * static_cast<size_t>(V_);
  }

  Transformer& model_;
  KvPool& pool_;
  const EngineConfig& cfg_;
  EngineStats& stats_;
  const std::vector<RolloutRequest>& requests_;
  RolloutHook* const hook_;
  RunDriver* const driver_;
  const int64_t n_initial_;
  std::deque<RolloutRequest> added_;                    // requests the driver added (index n_initial_ + i)
  std::map<std::pair<int64_t, int64_t>, Live> parked_;  // (request, member) -> a sequence waiting for its next turn
  std::vector<RolloutRequest> incoming_;
  std::vector<Continuation> continuations_;
  const int64_t V_, bs_;
  ActivationStore* const store_;  // kept activations (none on a device)
  size_t max_stop_ = 0;
  int64_t max_prompt_ = 0;

  std::deque<Completion> out_;  // references stay valid while forks append
  std::vector<int64_t> first_out_, next_member_;
  std::deque<int64_t> queue_;
  std::deque<Live> resume_;  // preempted: blocks freed, prefix recomputed when they come back
  std::vector<Live> live_, next_, spawned_, resuming_;
  std::vector<std::pair<int64_t, SeqKv>> admitted_;
  std::vector<std::vector<int64_t>> admitted_slots_;  // their prompts' activation slots (keep_activations)
  // The step's rows; save_: per row, the activation slot it fills (-1: none).
  std::vector<int32_t> tok_, pos_;
  std::vector<const int32_t*> tables_;
  std::vector<int64_t> rows_, save_;
  std::vector<kernels::AttnSegment> prompt_runs_;  // rows that prefill a prompt from position 0 (PagedStep)
  std::vector<float> logits_;
  std::vector<Choice> choices_;
  std::vector<DeviceChoice> device_choices_;
  int64_t n_decode_ = 0, n_decode_rows_ = 0, seats_ = 0;  // this plain step's

  bool can_spec_ = false, spec_on_ = false;
  int64_t step_ = 0;
  // This speculative cycle's: gamma, draft lengths, drafts, the drafter's distributions
  // ([n, gamma, V]), the policy's at one position, and the penalties' history.
  int64_t gamma_ = 0, gmax_ = 0;
  std::vector<int64_t> glen_;
  std::vector<std::vector<int32_t>> drafts_;
  std::vector<float> qdist_, pdist_;
  std::vector<int32_t> hist_;
};

}  // namespace temper::rollout
