// The task-level meta-knowledge of spec section 7, learned once on the point mass and reused frozen on other
// bodies: the context encoder (task inference), the mode clusters over its latents (the mixture prior), and the
// high-level policy pi_H(guidance | abstract state, latent). Its message each step is the semantic-magnitude
// interface: [one-hot of the inferred mode (max_modes) | the high level's guidance (a 2-D velocity, its mean)].
// Everything here is read-only to a transfer run: the test holds its parameters bitwise unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "temper/control/context_encoder.h"
#include "temper/control/gaussian_policy.h"
#include "temper/control/mode_clusters.h"

namespace temper::control {

struct HierarchySpec {
  int64_t context = 8;  // W: transitions in the encoder's window
  int64_t latent = 4;
  std::vector<int64_t> encoder_hidden = {64, 64};
  int64_t max_modes = 8;
  float new_mode_distance = 1.f;  // DP-means lambda, in RMS spreads of the latents
  // The mixture prior: "dp_means" (ModeClusters::fit) or "stick_breaking" (ModeClusters::fit_stick_breaking, its
  // concentration sb_alpha and component sd sb_sigma in RMS spreads per dimension).
  std::string prior = "dp_means";
  float sb_alpha = 1.f, sb_sigma = 0.5f;
  int64_t message_window = 4;  // k: messages the temporal adaptor sees
  int64_t adaptor_hidden = 32;
  int64_t msg_dim() const { return max_modes + 2; }
  void validate(const std::string& where) const;
};

class MetaKnowledge {
 public:
  MetaKnowledge(HierarchySpec h, std::vector<int64_t> high_hidden);
  const HierarchySpec& spec() const { return h_; }
  int64_t high_in() const;  // the high level's row: [abstract state (5) | latent]

  // e [N, latent] for contexts [N, W * 6].
  void latents(const float* ctx, int64_t N, float* e) const;
  // rows [N, 5 + L] = [abstract | e]
  static void high_rows(const float* abstract, const float* e, int64_t N, int64_t L, float* rows);
  // msg [N, msg_dim()] for abstract [N, 5] and contexts [N, W * 6].
  void messages(const float* abstract, const float* ctx, int64_t N, float* msg) const;

  // Checkpoint form: meta.encoder, meta.high_level, meta.clusters; from_tensors checks every size, naming `where`.
  using Tensors = std::vector<std::pair<std::string, std::vector<float>>>;
  Tensors tensors() const;
  static MetaKnowledge from_tensors(HierarchySpec h, std::vector<int64_t> high_hidden, const Tensors& t,
                                    int64_t meta_env_steps, const std::string& where);

  ContextEncoder encoder;
  GaussianPolicy high_level;
  ModeClusters clusters;
  std::vector<float> encoder_params, high_params;  // encoder: [encoder | reward decoder]; high: policy + log_std
  int64_t meta_env_steps = 0;                      // point-mass steps that trained it

 private:
  HierarchySpec h_;
};

// The last k messages of each env, newest first, zero before the episode's first: the temporal adaptor's input
// (the context window's twin).
class MessageWindow {
 public:
  MessageWindow(int64_t n, int64_t window, int64_t item);
  int64_t dim() const { return w_ * item_; }
  void clear();
  void push(const float* msg);                           // [N, item]
  const float* features() const { return buf_.data(); }  // [N, dim()]

 private:
  int64_t n_, w_, item_;
  std::vector<float> buf_;
};

}  // namespace temper::control
