// The update of one batch (policy_update.h) as a per-call object: its loops are run(), mini_batch() and
// micro_batch(); each step they take is a named function below.
#include "temper/rl/policy_update.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/core/rng.h"
#include "temper/rl/packed_rows.h"
#include "temper/rl/policy_loss.h"
#include "temper/rl/reused_activations.h"
#include "temper/rl/rl_trainer.h"
#include "temper/rl/token_rows.h"

namespace temper::rl {

namespace {

class PolicyUpdate {
 public:
  PolicyUpdate(const PolicyUpdateEnv& env, const Batch& b)
      : env_(env), cfg_(env.cfg), b_(b), pack_(cfg_.share_prompts && env.policy.packed_supported()) {}

  Metrics run() {
    if (b_.traj.empty()) return {{"updates_skipped", 1}};  // every group was dropped: nothing to learn from
    rows_ = TokenRows::from(b_);
    if (cfg_.loss.kl_coef > 0) env_.scorer.reference_logprobs(b_, rows_);
    const int64_t B = rows_.rows;
    order_.resize(static_cast<size_t>(B));
    for (int64_t e = 0; e < cfg_.epochs; ++e) {
      shuffle(e);
      for (int64_t m = 0; m < cfg_.mini_batches; ++m) {
        const int64_t r0 = B * m / cfg_.mini_batches, r1 = B * (m + 1) / cfg_.mini_batches;
        if (r1 > r0) mini_batch(r0, r1);
      }
    }
    sum_over_ranks();
    return metrics();
  }

 private:
  // Rows [r0, r1) of the epoch's order: this rank's share of them, their loss scale, then micro-batches of
  // gradients accumulated into one optimiser step.
  void mini_batch(int64_t r0, int64_t r1) {
    sort_rows(r0, r1);
    const LossNorm norm = own_rows(r0, r1);
    if (pack_) gradient_rows_first();
    mini_.select(rows_, own_);
    policy_loss_scale(cfg_.loss, mini_.mask.data(), mini_.rows, mini_.T, norm, mini_.scale.data());
    env_.opt.zero_grad();
    const int64_t Bl = mini_.rows, mb = cfg_.micro_batch > 0 ? cfg_.micro_batch : std::max<int64_t>(Bl, 1);
    for (int64_t q0 = 0; q0 < Bl; q0 += mb) micro_batch(q0, std::min(mb, Bl - q0), mb < Bl);
    optimizer_step();
  }

  // Rows [q0, q0 + rows) of the mini-batch (cut: to their longest row), packed where prompts are shared:
  // the loss on them, its forward and backward, its statistics.
  void micro_batch(int64_t q0, int64_t rows, bool cut) {
    const int64_t T = mini_.T, Tm = cut ? longest_row(q0, rows) : T;  // padding beyond Tm carries no loss
    TokenRowsView v = mini_.view(q0);
    if (Tm < T) {
      compact_.compact(v, T, rows, Tm);
      v = compact_.view();
    }
    teacher_rows(q0, rows, Tm);
    int64_t npos = rows * Tm;  // rows of the forward: padded, or packed
    bool reuse = false;        // the packed rows' activations from the rollout (no forward)
    if (pack_) {
      reuse = pack(q0, rows, Tm, v);
      npos = packed_.size();
    }
    const PolicyLossBatch pb = loss_batch(v, npos);
    positions_ += npos;
    PolicyLoss loss(cfg_.loss, pb);
    if (loss.no_gradient()) no_gradient_ += npos;
    if (reuse) {
      env_.policy.forward_backward_packed(v.tok, v.tgt, packed_.segs, loss, v.logp, v.entropy, *env_.store,
                                          slots_.data());
      reused_ += npos;
    } else if (pack_) {
      env_.policy.forward_backward_packed(v.tok, v.tgt, packed_.segs, loss, v.logp, v.entropy);
    } else {
      env_.policy.forward_backward(v.tok, v.tgt, rows, Tm, loss, v.logp, v.entropy);
    }
    total_.merge(policy_loss_forward(cfg_.loss, pb, v.logp, v.entropy));
    for (size_t n = 0; n < rkl_rows_.size(); ++n)
      if (rkl_rows_[n] && v.scale[n] != 0) rkl_sum_ += rkl_kl_[n], ++rkl_tokens_;
  }

  const Trajectory& traj(int64_t row) const { return b_.traj[static_cast<size_t>(row)]; }
  const Trajectory& own(int64_t i) const { return traj(own_[static_cast<size_t>(i)]); }

  // The epoch's row order: the batch's, or with several mini-batches a seeded shuffle so they mix groups.
  void shuffle(int64_t e) {
    std::iota(order_.begin(), order_.end(), 0);
    if (cfg_.mini_batches <= 1) return;
    Rng rng(mix_seed(cfg_.seed, 0x5EEDull), static_cast<uint64_t>(env_.step * 1000 + e));
    for (int64_t i = rows_.rows - 1; i > 0; --i)
      std::swap(order_[static_cast<size_t>(i)], order_[rng.next_u32() % static_cast<uint64_t>(i + 1)]);
  }

  // Shared prompts: a group's rows together (they share its prompt). Otherwise micro-batches of similar
  // lengths, each cut to its longest row.
  void sort_rows(int64_t r0, int64_t r1) {
    const auto first = order_.begin() + r0, last = order_.begin() + r1;
    if (pack_)
      std::stable_sort(first, last, [&](int64_t x, int64_t y) { return traj(x).group < traj(y).group; });
    else if (cfg_.micro_batch > 0 && cfg_.micro_batch < r1 - r0)
      std::stable_sort(first, last, [&](int64_t x, int64_t y) {
        const Trajectory &a = traj(x), &c = traj(y);
        return a.prompt.size() + a.tokens.size() > c.prompt.size() + c.tokens.size();
      });
  }

  // This rank's rows (own_), and the whole mini-batch's normalisers that scale them: every ranks()-th row of
  // the mini-batch after the length sort (so the shares cost alike), or with shared prompts a block of the
  // group-sorted rows (so a group's rows stay together and its prompt is held once).
  LossNorm own_rows(int64_t r0, int64_t r1) {
    own_.clear();
    LossNorm norm;
    const int64_t T = rows_.T;
    const dist::Range block = dist::shard(r1 - r0, rank(), ranks());
    for (int64_t i = 0; i < r1 - r0; ++i) {
      const int64_t row = order_[static_cast<size_t>(r0 + i)];
      LossNorm x = policy_loss_norm(rows_.mask.data() + static_cast<size_t>(row * T), 1, T);
      norm.tokens += x.tokens;
      norm.seqs += x.seqs;
      if (pack_ ? i >= block.begin && i < block.end : i % ranks() == rank()) own_.push_back(row);
    }
    return norm;
  }

  // Rows whose loss has no gradient (advantage 0: a group's rewards all equal) after the others, so their
  // micro-batches skip the backward (policy_loss.h, no_gradient); groups stay together.
  void gradient_rows_first() {
    const int64_t T = rows_.T;
    std::stable_partition(own_.begin(), own_.end(), [&](int64_t row) {
      for (int64_t t = 0; t < T; ++t) {
        const size_t k = static_cast<size_t>(row * T + t);
        if (rows_.adv[k] != 0 && rows_.mask[k] != 0) return true;
      }
      return false;
    });
  }

  int64_t longest_row(int64_t q0, int64_t rows) const {
    int64_t Tm = 2;
    for (int64_t i = 0; i < rows; ++i)
      Tm = std::max<int64_t>(Tm, static_cast<int64_t>(own(q0 + i).prompt.size() + own(q0 + i).tokens.size()));
    return Tm;
  }

  // Teacher distributions (full-vocabulary reverse KL): pointers into the trajectories, one per position.
  void teacher_rows(int64_t q0, int64_t rows, int64_t Tm) {
    rkl_rows_.clear(), rkl_kl_.clear();
    if (b_.reverse_kl_coef == 0) return;
    rkl_rows_.assign(static_cast<size_t>(rows * Tm), nullptr);
    rkl_kl_.assign(static_cast<size_t>(rows * Tm), 0.f);
    const int64_t V = env_.policy.config().vocab_size;
    for (int64_t i = 0; i < rows; ++i) {
      const Trajectory& t = own(q0 + i);
      if (t.loss_terms.teacher_logq.empty()) continue;
      TEMPER_CHECK(static_cast<int64_t>(t.loss_terms.teacher_logq.size()) == static_cast<int64_t>(t.tokens.size()) * V)
          << "rl: a trajectory's teacher distributions hold " << t.loss_terms.teacher_logq.size()
          << " values, expected " << t.tokens.size() << " x " << V;
      for (size_t k = 0; k < t.tokens.size(); ++k)
        rkl_rows_[static_cast<size_t>(i * Tm) + t.prompt.size() - 1 + k] =
            t.loss_terms.teacher_logq.data() + static_cast<int64_t>(k) * V;
    }
  }

  // Equal prompts once, no padding: every per-position field follows its row into the packed order, and v
  // then points at the packed rows. True when the rollout kept every packed row's activations (slots_).
  bool pack(int64_t q0, int64_t rows, int64_t Tm, TokenRowsView& v) {
    std::vector<const std::vector<int32_t>*> prompts(static_cast<size_t>(rows));
    std::vector<int64_t> lens(static_cast<size_t>(rows));
    std::vector<const std::vector<int64_t>*> slots_of(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) {
      const Trajectory& t = own(q0 + i);
      prompts[static_cast<size_t>(i)] = &t.prompt;
      slots_of[static_cast<size_t>(i)] = &t.act_slots;
      // The last token predicts nothing and no row reads it: left out (the rollout never forwarded it).
      lens[static_cast<size_t>(i)] = static_cast<int64_t>(t.prompt.size() + std::max<size_t>(t.tokens.size(), 1) - 1);
    }
    packed_ = pack_rows(prompts, lens, Tm);
    packed_rows_.pack(v, packed_);
    if (!rkl_rows_.empty()) {
      packed_.gather(rkl_rows_.data(), &packed_rkl_);
      rkl_rows_.swap(packed_rkl_);
      rkl_kl_.assign(static_cast<size_t>(packed_.size()), 0.f);
    }
    v = packed_rows_.view();
    ActivationStore* store = env_.store;
    return store && env_.policy.reusable(*store) && reusable_slots(*store, packed_, v.tok, slots_of, Tm, &slots_);
  }

  PolicyLossBatch loss_batch(const TokenRowsView& v, int64_t npos) {
    PolicyLossBatch pb;
    if (!rkl_rows_.empty()) {
      pb.rkl_logq = rkl_rows_.data();
      pb.rkl_coef = static_cast<float>(b_.reverse_kl_coef);
      pb.rkl_out = rkl_kl_.data();
    }
    pb.old_logp = v.old;
    pb.ref_logp = v.ref;
    pb.advantage = v.adv;
    pb.weight = v.weight;
    pb.scale = v.scale;
    pb.N = npos;
    return pb;
  }

  void optimizer_step() {
    OptimizerStep o = env_.opt.step();
    lr_ = o.lr;
    if (o.skipped) {
      ++skipped_;
      log_write(LogLevel::warn, "rl step " + std::to_string(env_.step) + ": non-finite loss or gradients (loss " +
                                    std::to_string(total_.loss) + "); the update was skipped, the run goes on");
    } else {
      ++applied_;
      grad_norm_sum_ += o.grad_norm;
    }
  }

  // The loss statistics of the whole batch.
  void sum_over_ranks() {
    if (ranks() == 1) return;
    PolicyLossStats& s = total_;
    double v[11] = {s.loss,
                    s.pg_loss,
                    s.kl_loss,
                    s.entropy_loss,
                    static_cast<double>(s.tokens),
                    static_cast<double>(s.clipped_low),
                    static_cast<double>(s.clipped_high),
                    static_cast<double>(s.dual_clipped),
                    s.ratio_sum,
                    s.kl_sum,
                    s.entropy_sum};
    env_.comm->allreduce_sum(v, 11);
    double p[3] = {static_cast<double>(positions_), static_cast<double>(reused_), static_cast<double>(no_gradient_)};
    env_.comm->allreduce_sum(p, 3);
    positions_ = static_cast<int64_t>(p[0]), reused_ = static_cast<int64_t>(p[1]);
    no_gradient_ = static_cast<int64_t>(p[2]);
    s.loss = v[0], s.pg_loss = v[1], s.kl_loss = v[2], s.entropy_loss = v[3];
    s.tokens = static_cast<int64_t>(v[4]), s.clipped_low = static_cast<int64_t>(v[5]);
    s.clipped_high = static_cast<int64_t>(v[6]), s.dual_clipped = static_cast<int64_t>(v[7]);
    s.ratio_sum = v[8], s.kl_sum = v[9], s.entropy_sum = v[10];
  }

  Metrics metrics() const {
    Metrics out;
    const double steps = static_cast<double>(cfg_.epochs * cfg_.mini_batches);
    out.emplace_back("loss", total_.loss / steps);
    out.emplace_back("pg_loss", total_.pg_loss / steps);
    out.emplace_back("kl", total_.mean_kl());
    out.emplace_back("clip_frac", total_.clip_frac());
    out.emplace_back("clip_frac_low", total_.clip_frac_low());
    out.emplace_back("clip_frac_high", total_.clip_frac_high());
    out.emplace_back("ratio_mean", total_.mean_ratio());
    out.emplace_back("grad_norm", applied_ ? grad_norm_sum_ / static_cast<double>(applied_) : NAN);
    out.emplace_back("lr", lr_);
    out.emplace_back("updates", static_cast<double>(applied_));
    out.emplace_back("updates_skipped", static_cast<double>(skipped_));
    out.emplace_back("train_tokens", static_cast<double>(total_.tokens));
    // Rows the update's forward and backward ran over (all epochs, all ranks): prompts, completions and
    // padding, or with share_prompts each shared prompt once and no padding.
    out.emplace_back("train_positions", static_cast<double>(positions_));
    // Of those, rows whose forward was skipped: their activations came from the rollout (reuse_activations).
    out.emplace_back("reused_positions", static_cast<double>(reused_));
    // And rows whose backward was skipped: their micro-batch's loss has no gradient (every advantage 0, no KL or
    // entropy term), so only their log-probs and entropies were computed.
    out.emplace_back("no_gradient_positions", static_cast<double>(no_gradient_));
    if (b_.reverse_kl_coef != 0) {
      double v[2] = {rkl_sum_, static_cast<double>(rkl_tokens_)};
      if (ranks() > 1) env_.comm->allreduce_sum(v, 2);
      out.emplace_back("reverse_kl", v[1] > 0 ? v[0] / v[1] : 0.0);  // mean over positions and epochs
    }
    return out;
  }

  int rank() const { return env_.comm ? env_.comm->rank() : 0; }
  int ranks() const { return env_.comm ? env_.comm->size() : 1; }

  const PolicyUpdateEnv& env_;
  const RlConfig& cfg_;
  const Batch& b_;
  const bool pack_;                         // micro-batches hold shared prompts once (PackedRows)
  TokenRows rows_;                          // the whole batch
  std::vector<int64_t> order_, own_;        // the epoch's row order; this rank's rows of the mini-batch
  TokenRows mini_, compact_, packed_rows_;  // this rank's mini-batch; a micro-batch cut to its longest row; packed
  PackedRows packed_;
  std::vector<int64_t> slots_;                       // store slots of the packed rows when the rollout kept them
  std::vector<const float*> rkl_rows_, packed_rkl_;  // teacher distributions per position of the micro-batch
  std::vector<float> rkl_kl_;
  PolicyLossStats total_;
  int64_t applied_ = 0, skipped_ = 0, rkl_tokens_ = 0, positions_ = 0, reused_ = 0, no_gradient_ = 0;
  double rkl_sum_ = 0;  // KL(pi || teacher) over the positions with a teacher distribution
  double grad_norm_sum_ = 0, lr_ = 0;
};

}  // namespace

Metrics update_policy(const PolicyUpdateEnv& env, const Batch& b) {
  return PolicyUpdate(env, b).run();
}

}  // namespace temper::rl
