#include "temper/app/judge_setup.h"

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "temper/app/codec.h"
#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/rl/judge_reward.h"

namespace temper::app {

namespace {

struct JudgeCache {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<rl::JudgeModel>> models;
};

std::shared_ptr<rl::JudgeModel> open_judge(JudgeCache& cache, const std::string& path, const std::string& device,
                                           const std::string& policy_device) {
  TEMPER_CHECK(device == "cpu" || device == "cuda")
      << "a judge's device must be \"cpu\" or \"cuda\" (the policy's GPU), got '" << device << "'";
  std::string where = device;
  if (device == "cuda") where = policy_device.rfind("cuda", 0) == 0 ? policy_device : "cuda";
  std::lock_guard<std::mutex> lock(cache.mu);
  auto key = std::make_pair(path, where);
  if (auto it = cache.models.find(key); it != cache.models.end()) return it->second;
  LoadedModel lm = load_model(path);
  TEMPER_CHECK(lm.tokenizer) << path << ": the judge has no tokenizer (tokenizer.json or GGUF tokenizer metadata)";
  if (where != "cpu") attach_device(*lm.model, where);
  rl::PromptCodec codec = make_codec(lm.tokenizer, lm.eos_ids, "auto");
  std::fprintf(stderr, "temper train: judge %s loaded on %s (%.1f s)\n", path.c_str(), where.c_str(), lm.load_seconds);
  auto m =
      std::make_shared<rl::JudgeModel>(std::move(lm.model), std::move(codec), rl::JudgeModelConfig{}, "judge " + path);
  cache.models.emplace(key, m);
  return m;
}

}  // namespace

rl::JudgeFactory install_judges(const std::string& policy_device) {
  auto cache = std::make_shared<JudgeCache>();
  rl::set_judge_model_loader([cache, policy_device](const std::string& path, const std::string& device) {
    return open_judge(*cache, path, device, policy_device);
  });
  return [cache, policy_device](const rl::RewardTermConfig& c) -> std::unique_ptr<rl::RewardTerm> {
    TEMPER_CHECK(c.judge) << "reward '" << c.name << "': not a judge term";
    c.judge->validate(c.name);
    // The template is checked (make_judge_term) before the model loads: a misspelt placeholder fails fast.
    rl::JudgeTemplate(c.judge->prompt_template, rl::judge_placeholders(), "reward '" + c.name + "': judge.template");
    return rl::make_judge_term(c, open_judge(*cache, c.judge->model, c.judge->device, policy_device));
  };
}

}  // namespace temper::app
