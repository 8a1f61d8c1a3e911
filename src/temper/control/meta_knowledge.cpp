#include "temper/control/meta_knowledge.h"

#include <algorithm>

#include "temper/control/context_window.h"
#include "temper/control/control_env.h"
#include "temper/core/error.h"

namespace temper::control {

void HierarchySpec::validate(const std::string& where) const {
  TEMPER_CHECK(context >= 1 && context <= 64) << where << ": context must be in 1..64, got " << context;
  TEMPER_CHECK(latent >= 1 && latent <= 64) << where << ": latent must be in 1..64, got " << latent;
  TEMPER_CHECK(max_modes >= 1 && max_modes <= 64) << where << ": max_modes must be in 1..64, got " << max_modes;
  TEMPER_CHECK(new_mode_distance > 0) << where << ": new_mode_distance must be > 0, got " << new_mode_distance;
  TEMPER_CHECK(prior == "dp_means" || prior == "stick_breaking")
      << where << ": prior must be \"dp_means\" or \"stick_breaking\", got \"" << prior << "\"";
  TEMPER_CHECK(sb_alpha > 0 && sb_sigma > 0)
      << where << ": sb_alpha and sb_sigma must be > 0, got " << sb_alpha << ", " << sb_sigma;
  TEMPER_CHECK(message_window >= 1 && message_window <= 64)
      << where << ": message_window must be in 1..64, got " << message_window;
  TEMPER_CHECK(adaptor_hidden >= 1) << where << ": adaptor_hidden must be >= 1, got " << adaptor_hidden;
}

namespace {
PolicySpec high_spec(const HierarchySpec& h, std::vector<int64_t> hidden) {
  PolicySpec s;
  s.obs_dim = ControlEnv::kAbstractDim + h.latent;
  s.hidden = std::move(hidden);
  return s;
}
EncoderSpec encoder_spec(const HierarchySpec& h) {
  EncoderSpec s;
  s.context_dim = h.context * ContextWindow::kItem;
  s.latent = h.latent;
  s.hidden = h.encoder_hidden;
  return s;
}
}  // namespace

MetaKnowledge::MetaKnowledge(HierarchySpec h, std::vector<int64_t> high_hidden)
    : encoder(encoder_spec(h)),
      high_level(high_spec(h, std::move(high_hidden))),
      clusters(h.latent, h.max_modes),
      encoder_params(static_cast<size_t>(encoder.param_count()), 0.f),
      high_params(static_cast<size_t>(high_level.param_count()), 0.f),
      h_(std::move(h)) {}

int64_t MetaKnowledge::high_in() const {
  return ControlEnv::kAbstractDim + h_.latent;
}

void MetaKnowledge::latents(const float* ctx, int64_t N, float* e) const {
  encoder.encode(encoder_params.data(), ctx, N, e);
}

void MetaKnowledge::high_rows(const float* abstract, const float* e, int64_t N, int64_t L, float* rows) {
  const int64_t A = ControlEnv::kAbstractDim;
  for (int64_t i = 0; i < N; ++i) {
    std::copy(abstract + i * A, abstract + (i + 1) * A, rows + i * (A + L));
    std::copy(e + i * L, e + (i + 1) * L, rows + i * (A + L) + A);
  }
}

void MetaKnowledge::messages(const float* abstract, const float* ctx, int64_t N, float* msg) const {
  const int64_t L = h_.latent, M = h_.msg_dim();
  std::vector<float> e(N * L), rows(N * high_in()), guide(N * 2);
  latents(ctx, N, e.data());
  high_rows(abstract, e.data(), N, L, rows.data());
  high_level.mean(high_params.data(), rows.data(), N, guide.data());
  std::fill(msg, msg + N * M, 0.f);
  for (int64_t i = 0; i < N; ++i) {
    if (clusters.modes() > 0) msg[i * M + clusters.assign(&e[i * L])] = 1.f;
    msg[i * M + h_.max_modes] = guide[2 * i], msg[i * M + h_.max_modes + 1] = guide[2 * i + 1];
  }
}

MetaKnowledge::Tensors MetaKnowledge::tensors() const {
  return {{"meta.encoder", encoder_params}, {"meta.high_level", high_params}, {"meta.clusters", clusters.to_vector()}};
}

MetaKnowledge MetaKnowledge::from_tensors(HierarchySpec h, std::vector<int64_t> high_hidden, const Tensors& t,
                                          int64_t meta_env_steps, const std::string& where) {
  MetaKnowledge k(std::move(h), std::move(high_hidden));
  auto get = [&](const std::string& name, size_t size) -> const std::vector<float>& {
    for (auto& [n, v] : t)
      if (n == name) {
        TEMPER_CHECK(v.size() == size) << where << ": tensor " << name << " has " << v.size() << " values, expected "
                                       << size << " (the hierarchy's sizes differ from the run that wrote it)";
        return v;
      }
    TEMPER_FAIL() << where << ": no tensor " << name << " (not a meta run's checkpoint?)";
  };
  k.encoder_params = get("meta.encoder", k.encoder_params.size());
  k.high_params = get("meta.high_level", k.high_params.size());
  k.clusters.from_vector(get("meta.clusters", static_cast<size_t>(k.h_.max_modes * k.h_.latent + 1)));
  k.meta_env_steps = meta_env_steps;
  return k;
}

MessageWindow::MessageWindow(int64_t n, int64_t window, int64_t item)
    : n_(n), w_(window), item_(item), buf_(static_cast<size_t>(n * window * item), 0.f) {}

void MessageWindow::clear() {
  std::fill(buf_.begin(), buf_.end(), 0.f);
}

void MessageWindow::push(const float* msg) {
  for (int64_t i = 0; i < n_; ++i) {
    float* row = buf_.data() + i * w_ * item_;
    std::copy_backward(row, row + (w_ - 1) * item_, row + w_ * item_);
    std::copy(msg + i * item_, msg + (i + 1) * item_, row);
  }
}

}  // namespace temper::control
