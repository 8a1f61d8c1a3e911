// MirrorDevice; see mirror_device.h.
#include "temper/model/mirror_device.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "temper/kernels/adamw.h"
#include "temper/kernels/classifier.h"
#include "temper/kernels/draw.h"

namespace temper {

MirrorDevice::MirrorDevice(const ModelConfig& cfg, bool replay_copies)
    : m_(cfg), mom_m_(static_cast<size_t>(m_.flat_size())), mom_v_(mom_m_.size()), replay_(replay_copies) {}

void MirrorDevice::set_params(const float* host) {
  std::memcpy(m_.params(), host, sizeof(float) * static_cast<size_t>(m_.flat_size()));
  m_.params_updated();
  ++pushes;
}

void MirrorDevice::get_params(float* host) const {
  std::memcpy(host, m_.params(), sizeof(float) * static_cast<size_t>(m_.flat_size()));
  ++pulls;
}

void MirrorDevice::get_grads(float* host) const {
  std::memcpy(host, const_cast<Transformer&>(m_).grads(), sizeof(float) * static_cast<size_t>(m_.flat_size()));
}

void MirrorDevice::get_moments(float* m, float* v) const {
  std::copy(mom_m_.begin(), mom_m_.end(), m);
  std::copy(mom_v_.begin(), mom_v_.end(), v);
}

void MirrorDevice::set_moments(const float* m, const float* v) {
  std::copy(m, m + mom_m_.size(), mom_m_.begin());
  std::copy(v, v + mom_v_.size(), mom_v_.begin());
}

size_t MirrorDevice::memory_bytes() const { return sizeof(float) * static_cast<size_t>(4 * m_.flat_size()); }

void MirrorDevice::forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                    const kernels::ClassifierLoss& loss, float* lp, float* ent) {
  m_.forward_backward(tokens, targets, B, T, loss, lp, ent);
}

void MirrorDevice::forward_logprobs(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float* lp,
                                    float* ent) {
  m_.forward_logprobs(tokens, targets, B, T, lp, ent);
}

KvPool& MirrorDevice::mirror(KvPool& pool) {
  if (!mine_ || mine_->num_blocks() != pool.num_blocks() || mine_->block_size() != pool.block_size() ||
      mine_->dtype() != pool.dtype())
    mine_ = std::make_unique<KvPool>(m_.config(), pool.block_size(), pool.num_blocks(), pool.dtype());
  pool.set_mirrored();
  if (replay_)
    for (const auto& [from, to] : pool.block_copies()) {
      ++copies;
      mine_->copy_block(from, to);
    }
  pool.clear_block_copies();
  return *mine_;
}

void MirrorDevice::forward_paged(const PagedStep& st, KvPool& pool) {
  m_.forward_paged(st, mirror(pool));  // writes K/V into the mirrored blocks of the same ids
}

// The drafter reads this copy's embeddings and norms, which equal the host model's.
void MirrorDevice::forward_paged_draft(const PagedStep& st, KvPool& pool, const Int4Drafter& drafter) {
  ++drafted_steps;
  m_.forward_paged(st, mirror(pool), &drafter);
}

// The logits stay here; each row's choice with the host engine's arithmetic (the same bits).
void MirrorDevice::forward_paged_choose(const PagedStep& st, KvPool& pool, DeviceChoice* choices) {
  const int64_t V = m_.config().vocab_size;
  ++chosen_steps;
  logits_.resize(static_cast<size_t>(st.n_out * V));
  PagedStep here = st;
  here.logits = logits_.data();
  forward_paged(here, pool);
  for (int64_t r = 0; r < st.n_out; ++r) {
    DeviceChoice& c = choices[r];
    const float* z = logits_.data() + r * V;
    if (c.forced >= 0) {
      c.token = c.forced;
      kernels::logit_row_stats(z, V, c.token, &c.policy_logprob, &c.entropy);
      c.sample_logprob = c.policy_logprob;
      continue;
    }
    const float mx = kernels::max_logit(z, V);
    const kernels::Draw x = c.greedy ? kernels::draw_greedy(z, V, mx) : kernels::draw_tempered(z, V, mx, c.temperature, c.u, weights_);
    c.token = x.token;
    c.sample_logprob = x.logprob;
    kernels::logit_row_stats(z, V, c.token, &c.policy_logprob, &c.entropy);
  }
}

double MirrorDevice::optimizer_step(dist::Communicator* comm, const kernels::AdamWConfig& c, float lr, int64_t step,
                                    double max_grad_norm) {
  if (comm && comm->size() > 1) comm->allreduce_sum(m_.grads(), m_.flat_size());
  const double norm = kernels::clip_grad_norm(m_.grads(), m_.flat_size(), max_grad_norm);
  if (!std::isfinite(norm)) return norm;
  kernels::adamw_step(m_.params(), m_.grads(), mom_m_.data(), mom_v_.data(), m_.flat_size(), c, lr, step);
  m_.params_updated();
  return norm;
}

}  // namespace temper
