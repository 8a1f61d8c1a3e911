// TokenRows (token_rows.h): building the batch's rows, and the three copies of their fields.
#include "temper/rl/token_rows.h"

#include <algorithm>

namespace temper::rl {

namespace {

// f(destination, source) for each field the loss and the forward read (not the mask: it is in the scale).
template <class F>
void each_loss_field(TokenRows& d, const TokenRowsView& s, F f) {
  f(d.tok, s.tok), f(d.tgt, s.tgt), f(d.old, s.old), f(d.adv, s.adv), f(d.weight, s.weight), f(d.scale, s.scale);
  f(d.ref, s.ref);
}

template <class V>
auto* at(V& v, size_t off) {
  return v.empty() ? nullptr : v.data() + off;
}

}  // namespace

TokenRows TokenRows::from(const Batch& b) {
  TokenRows x;
  x.rows = static_cast<int64_t>(b.traj.size());
  x.T = 2;
  for (const Trajectory& t : b.traj)
    x.T = std::max<int64_t>(x.T, static_cast<int64_t>(t.prompt.size() + t.tokens.size()));
  const size_t N = static_cast<size_t>(x.rows * x.T);
  x.tok.assign(N, 0), x.tgt.assign(N, -1);
  x.mask.assign(N, 0.f), x.old.assign(N, 0.f), x.adv.assign(N, 0.f), x.weight.assign(N, 0.f);
  for (int64_t r = 0; r < x.rows; ++r) {
    const Trajectory& t = b.traj[static_cast<size_t>(r)];
    const size_t base = static_cast<size_t>(r * x.T), P = t.prompt.size();
    std::copy(t.prompt.begin(), t.prompt.end(), x.tok.begin() + static_cast<long>(base));
    std::copy(t.tokens.begin(), t.tokens.end(), x.tok.begin() + static_cast<long>(base + P));
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      const size_t p = base + P - 1 + i;  // position predicting completion token i
      x.tgt[p] = t.tokens[i];
      x.mask[p] = t.loss_mask[i];
      x.old[p] = t.old_logprob[i];
      x.adv[p] = t.advantage[i];
      x.weight[p] = t.weight[i];
    }
  }
  return x;
}

TokenRowsView TokenRows::view(int64_t row) {
  const size_t off = static_cast<size_t>(row * T);
  return {at(tok, off),   at(tgt, off), at(old, off),  at(adv, off),    at(weight, off),
          at(scale, off), at(ref, off), at(logp, off), at(entropy, off)};
}

void TokenRows::select(const TokenRows& all, const std::vector<int64_t>& which) {
  rows = static_cast<int64_t>(which.size()), T = all.T;
  const size_t N = static_cast<size_t>(rows * T);
  for (auto* v : {&mask, &old, &adv, &weight, &scale, &logp, &entropy}) v->assign(N, 0.f);
  tok.assign(N, 0), tgt.assign(N, -1);
  if (all.ref.empty())
    ref.clear();
  else
    ref.assign(N, 0.f);
  auto copy = [&](auto& dst, const auto& src) {
    if (src.empty()) return;
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(src.begin() + which[static_cast<size_t>(i)] * T, T, dst.begin() + i * T);
  };
  copy(tok, all.tok), copy(tgt, all.tgt), copy(mask, all.mask), copy(old, all.old), copy(adv, all.adv);
  copy(weight, all.weight), copy(ref, all.ref);
}

void TokenRows::compact(const TokenRowsView& src, int64_t src_T, int64_t n, int64_t Tm) {
  rows = n, T = Tm;
  const size_t N = static_cast<size_t>(n * Tm);
  each_loss_field(*this, src, [&](auto& dst, const auto* from) {
    if (!from) return dst.clear();
    dst.resize(N);
    for (int64_t i = 0; i < n; ++i) std::copy_n(from + i * src_T, Tm, dst.begin() + i * Tm);
  });
  logp.resize(N), entropy.resize(N);
}

void TokenRows::pack(const TokenRowsView& src, const PackedRows& packed) {
  rows = packed.size(), T = 1;
  each_loss_field(*this, src, [&](auto& dst, const auto* from) {
    if (!from) return dst.clear();
    packed.gather(from, &dst);
  });
  logp.assign(static_cast<size_t>(rows), 0.f), entropy.assign(static_cast<size_t>(rows), 0.f);
}

}  // namespace temper::rl
