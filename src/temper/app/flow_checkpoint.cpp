// The flow apps' AdamW and DG-RL checkpoint keys (see flow_checkpoint.h).
#include "temper/app/flow_checkpoint.h"

#include <string>
#include <vector>

#include "temper/core/error.h"

namespace temper::app {

namespace {

// The checkpoint's file, for messages ("checkpoint" when it was not read from a directory).
std::string where(const SideCheckpoint& c, const char* file) {
  return c.from.empty() ? std::string("checkpoint") : c.from + "/" + file;
}

const nlohmann::json& state_key(const SideCheckpoint& c, const char* key) {
  TEMPER_CHECK(c.state.contains(key)) << where(c, "trainer_state.json") << ": no \"" << key << "\" in its state";
  return c.state.at(key);
}

}  // namespace

void flow_checkpoint_put_adamw(SideCheckpoint& c, const nn::AdamW& opt) {
  c.tensors.emplace_back("adam.m", opt.m);
  c.tensors.emplace_back("adam.v", opt.v);
  c.state["adam_step"] = opt.step;
}

void flow_checkpoint_get_adamw(const SideCheckpoint& c, nn::AdamW& opt) {
  const std::vector<float>&m = c.tensor("adam.m"), &v = c.tensor("adam.v");
  TEMPER_CHECK(m.size() == opt.m.size() && v.size() == opt.v.size())
      << where(c, "trainer_state.safetensors") << ": adam.m / adam.v hold " << m.size() << " / " << v.size()
      << " values, the optimiser " << opt.m.size() << " (the checkpoint is another model's)";
  opt.m = m, opt.v = v;
  opt.step = state_key(c, "adam_step").get<int64_t>();
}

void flow_checkpoint_put_dg_rl(SideCheckpoint& c, const flow::DgRl& rl) {
  for (auto& t : rl.state_tensors()) c.tensors.push_back(std::move(t));
  const flow::DgRl::Counters n = rl.counters();
  c.state["disc_fits"] = n.fits;
  c.state["compute"] = n.compute;
  c.state["disc_accuracy"] = n.fit_accuracy;
}

void flow_checkpoint_get_dg_rl(const SideCheckpoint& c, flow::DgRl& rl) {
  flow::DgRl::Counters n;
  n.fits = state_key(c, "disc_fits").get<int64_t>();
  n.fit_accuracy = state_key(c, "disc_accuracy").get<double>();
  n.compute = c.state.value("compute", 0.0);
  rl.restore([&c](const std::string& name) -> const std::vector<float>& { return c.tensor(name); }, n);
}

}  // namespace temper::app
