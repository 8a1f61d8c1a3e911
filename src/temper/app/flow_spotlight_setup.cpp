#include "temper/app/flow_spotlight_setup.h"

#include <algorithm>

#include "temper/app/flow_setup.h"
#include "temper/app/recipe.h"
#include "temper/core/error.h"
#include "temper/flow/discriminator.h"
#include "temper/spotlight/flow_scorer.h"

namespace temper::app {

spotlight::Message setup_message(const ExplorerSetup& s) {
  nlohmann::json names = nlohmann::json::array();
  std::string blob;
  for (const auto& [name, v] : s.tensors) {
    names.push_back({name, v.size()});
    blob += spotlight::to_blob(v);
  }
  return {spotlight::MsgType::setup,
          {{"flow_config", s.flow_config},
           {"seed", s.seed},
           {"sde_steps", s.sde.steps},
           {"sde_noise", s.sde.noise},
           {"sampler", s.sampler},
           {"reward", s.reward},
           {"clip", s.clip},
           {"tensors", names},
           {"min_request_s", s.min_request_s},
           {"weights_from", s.weights_from}},
          std::move(blob)};
}

namespace {

// A scorer whose model was loaded from a checkpoint before any weights message.
class PreloadedScorer final : public spotlight::SeedScorer {
 public:
  PreloadedScorer(std::unique_ptr<spotlight::FlowScorer> s, int64_t version) : s_(std::move(s)), version_(version) {}
  int64_t param_count() const override { return s_->param_count(); }
  void set_params(std::span<const float> p) override { s_->set_params(p); }
  std::vector<double> score(int32_t label, const std::vector<uint64_t>& seeds) override {
    return s_->score(label, seeds);
  }
  int64_t loaded_version() const override { return version_; }

 private:
  std::unique_ptr<spotlight::FlowScorer> s_;
  int64_t version_;
};

spotlight::RewardFn explorer_reward(const nlohmann::json& h, const std::string& blob,
                                    std::shared_ptr<FlowParts> parts) {
  const double clip = h.at("clip").get<double>();
  if (h.at("reward").get<std::string>() == "density") {
    const flow::Toy2d* toy = parts->data->known();
    TEMPER_CHECK(toy) << "spotlight setup: reward = \"density\" needs 2-D data with a known density";
    return [parts, toy, clip](const std::vector<float>& x, const std::vector<int32_t>& y) {
      std::vector<double> r(y.size());
      for (size_t i = 0; i < y.size(); ++i)
        r[i] = std::clamp(toy->log_density(x[2 * i], x[2 * i + 1], toy->classes() > 1 ? y[i] : -1), -clip, clip);
      return r;
    };
  }
  flow::DiscConfig dc;
  dc.clip = clip;
  auto disc = std::make_shared<flow::Discriminator>(dc);
  std::vector<std::pair<std::string, std::vector<float>>> t;
  size_t off = 0;
  for (const auto& e : h.at("tensors")) {
    const auto n = e.at(1).get<size_t>();
    TEMPER_CHECK(off + n * sizeof(float) <= blob.size()) << "spotlight setup: tensor blob shorter than its list";
    t.emplace_back(e.at(0).get<std::string>(), spotlight::from_blob<float>(blob, off, n));
    off += n * sizeof(float);
  }
  disc->load(t, "disc");
  return [parts, disc](const std::vector<float>& x, const std::vector<int32_t>& y) {
    return disc->rewards(flow::embed_all(*parts->features, x), y);
  };
}

}  // namespace

std::unique_ptr<spotlight::Scorer> make_explorer_scorer(const spotlight::Message& setup) {
  const nlohmann::json& h = setup.head;
  Recipe r = Recipe::parse(h.at("flow_config").get<std::string>(), "spotlight setup");
  FlowSetup fs;
  fs.read(r);
  auto parts = std::make_shared<FlowParts>(build_flow(fs));
  flow::SdeConfig sde;
  sde.steps = h.at("sde_steps").get<int64_t>(), sde.noise = h.at("sde_noise").get<double>();
  spotlight::RewardFn reward = explorer_reward(h, setup.blob, parts);
  auto scorer =
      std::make_unique<spotlight::FlowScorer>(std::move(parts->model), std::move(reward), h.at("seed").get<uint64_t>(),
                                              sde, h.at("sampler").get<std::string>() == "ode");
  const auto from = h.at("weights_from").get<std::string>();
  if (from.empty()) return scorer;
  const SideCheckpoint c = read_run_checkpoint(from, "temper flow explore");
  load_model_tensors(scorer->model(), c, "model.");
  return std::make_unique<PreloadedScorer>(std::move(scorer), c.step);
}

}  // namespace temper::app
