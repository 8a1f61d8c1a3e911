#include "temper/rl/methods/disc_reward.h"

#include <sstream>

#include "temper/core/error.h"
#include "temper/core/rng.h"

namespace temper::rl {

void DiscRewardConfig::validate() const {
  head.validate();
  TEMPER_CHECK(samples >= 2) << "rl.discriminator.samples must be >= 2, got " << samples;
  TEMPER_CHECK(real == "gold" || real == "teacher") << "rl.discriminator.real: expected \"gold\" or \"teacher\", got '" << real << "'";
  TEMPER_CHECK(combine == "replace" || combine == "add") << "rl.discriminator.combine: expected \"replace\" or \"add\", got '" << combine << "'";
  TEMPER_CHECK(coef > 0) << "rl.discriminator.coef must be > 0, got " << coef;
  TEMPER_CHECK(rounds >= 1) << "rl.discriminator.rounds must be >= 1, got " << rounds;
  TEMPER_CHECK(rounds == 1 || refit_every >= 1)
      << "rl.discriminator.refit_every must be >= 1 (steps between fits) when rounds > 1, got " << refit_every;
}

DiscReward::DiscReward(DiscRewardConfig cfg) : cfg_(std::move(cfg)), head_(cfg_.head) { cfg_.validate(); }

FitStats fit_real_vs_policy(const MethodEnv& env, int64_t samples, const std::function<std::string(const tasks::Problem&)>& real_text,
                            const std::function<std::string(const std::string&)>& view, Discriminator& head,
                            int64_t round) {
  const tasks::Task& task = *env.task;
  const int64_t size = task.size(tasks::Split::train);
  std::vector<rollout::RolloutRequest> reqs;
  std::vector<std::vector<float>> real, gen;
  for (int64_t i = 0; i < samples; ++i) {
    uint64_t idx = static_cast<uint64_t>(round * samples + i);
    if (size > 0) idx %= static_cast<uint64_t>(size);
    tasks::Problem p = task.problem(tasks::Split::train, idx);
    rollout::RolloutRequest r;
    r.prompt = env.codec->encode_prompt(p);
    r.group_size = 1;
    r.max_new = std::max<int64_t>(1, std::min<int64_t>(env.max_new, env.context - static_cast<int64_t>(r.prompt.size())));
    r.sampler = env.sampler;
    r.stop_ids = env.codec->stop_ids;
    r.seed = mix_seed(env.seed, 0xD15Cull);
    r.stream = static_cast<uint64_t>(round * samples + i);
    std::vector<int32_t> reply = env.codec->encode_completion(real_text(p));
    if (!reply.empty()) real.push_back(env.embed(r.prompt, reply));
    reqs.push_back(std::move(r));
  }
  for (const rollout::Completion& c : env.generate(reqs)) {  // the policy as it stands: p_0 in the first round
    const std::vector<int32_t>& prompt = reqs[static_cast<size_t>(c.request)].prompt;
    if (!view) {
      if (!c.tokens.empty()) gen.push_back(env.embed(prompt, c.tokens));
      continue;
    }
    std::vector<int32_t> seen = env.codec->encode_completion(view(env.codec->decode(c.tokens)));
    if (!seen.empty()) gen.push_back(env.embed(prompt, seen));
  }
  head.fit(real, gen);
  return {head.accuracy(real, gen), static_cast<int64_t>(real.size()), static_cast<int64_t>(gen.size())};
}

void DiscReward::fit() {
  fit_ = fit_real_vs_policy(
      env_, cfg_.samples,
      [this](const tasks::Problem& p) {
        const std::string& text = cfg_.real == "gold" ? p.gold_solution : p.teacher_response;
        TEMPER_CHECK(!text.empty()) << "rl.discriminator: problem " << p.id << " has no "
                                    << (cfg_.real == "gold" ? "gold solution" : "teacher_response") << " to serve as a real reply";
        return text;
      },
      nullptr, head_, fits_);
  ++fits_;
}

void DiscReward::after_reward(Batch& b) {
  // Every round of a step sees the same head: a refit is due when the step count reaches the next fit's.
  if (!head_.fitted() || (fits_ < cfg_.rounds && steps_ >= fits_ * cfg_.refit_every)) fit();
  reward_sum_ = 0, rewarded_ = 0;
  for (Trajectory& t : b.traj) {
    if (t.tokens.empty()) continue;
    const double r = cfg_.coef * head_.reward(env_.embed(t.prompt, t.tokens));
    t.reward = cfg_.combine == "replace" ? r : t.reward + r;
    reward_sum_ += r, ++rewarded_;
  }
}

void DiscReward::metrics(Metrics& m) const {
  m.emplace_back("disc_reward_mean", rewarded_ ? reward_sum_ / static_cast<double>(rewarded_) : 0.0);
  m.emplace_back("disc_fit_accuracy", fit_.accuracy);
  m.emplace_back("disc_fit_examples", static_cast<double>(fit_.real + fit_.gen));
  m.emplace_back("disc_fits", static_cast<double>(fits_));
}

// "disc_reward <steps> <fits> <accuracy> <real> <gen>" then the head's own text; a bare head (checkpoints before
// refitting rounds) is one fit.
std::string DiscReward::save_state() const {
  if (!head_.fitted()) return {};
  std::ostringstream o;
  o.precision(17);
  o << "disc_reward " << steps_ << ' ' << fits_ << ' ' << fit_.accuracy << ' ' << fit_.real << ' ' << fit_.gen << '\n'
    << head_.save();
  return o.str();
}

void DiscReward::load_state(const std::string& s) {
  if (s.rfind("disc_reward ", 0) != 0) {
    head_.load(s);
    fits_ = head_.fitted() ? 1 : 0;
    return;
  }
  const size_t nl = s.find('\n');
  std::istringstream in(s.substr(0, nl));
  std::string tag;
  in >> tag >> steps_ >> fits_ >> fit_.accuracy >> fit_.real >> fit_.gen;
  TEMPER_CHECK(in && nl != std::string::npos && steps_ >= 0 && fits_ >= 1)
      << "rl.discriminator: bad checkpointed state '" << s.substr(0, std::min<size_t>(nl, 80)) << "'";
  head_.load(s.substr(nl + 1));
}

}  // namespace temper::rl
