#include "temper/app/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/core/error.h"
#include "temper/io/atomic_file.h"
#include "temper/io/safetensors.h"
#include "temper/io/safetensors_writer.h"

namespace fs = std::filesystem;

namespace temper::app {

namespace {

nlohmann::json state_json(const TrainState& s) {
  nlohmann::json j;
  j["format"] = "temper-trainer-state-1";
  j["step"] = s.step;
  j["stage"] = s.stage;
  j["sft_steps"] = s.sft_steps;
  j["rl_steps"] = s.rl_steps;
  j["sft_cursor"] = s.sft_cursor;
  j["rl_cursor"] = s.rl_cursor;
  j["opt_steps"] = s.opt_steps;
  j["opt_skipped"] = s.opt_skipped;
  j["methods"] = s.methods;
  return j;
}

int64_t step_of(const fs::path& p) {
  std::string n = p.filename().string();
  if (n.rfind("step-", 0) != 0) return -1;
  try {
    size_t used = 0;
    long long v = std::stoll(n.substr(5), &used);
    return used == n.size() - 5 ? v : -1;
  } catch (...) {
    return -1;
  }
}

}  // namespace

void save_checkpoint(const std::string& dir, const Transformer& model, const io::HfExportOptions& export_opts,
                     Optimizer* opt, const Transformer* reference, const TrainState& st, const std::string& config_toml,
                     const std::function<void()>& mid_write) {
  fs::create_directories(fs::path(dir).parent_path());
  io::write_dir_atomic(dir, [&](const std::string& tmp) {
    io::export_hf_dir(model, tmp, export_opts);
    if (mid_write) mid_write();
    fs::path t(tmp);
    std::vector<io::NamedTensor> state;
    if (opt) {
      state.push_back({"adam.m", Tensor::wrap(opt->m(), {opt->size()}, DType::f32).clone()});
      state.push_back({"adam.v", Tensor::wrap(opt->v(), {opt->size()}, DType::f32).clone()});
    }
    if (!state.empty()) io::write_safetensors((t / "trainer_state.safetensors").string(), state);
    if (reference) {
      std::vector<io::NamedTensor> ref;
      for (const ParamEntry& e : reference->layout().entries()) ref.push_back({e.name, reference->param(e.name).clone()});
      io::write_safetensors((t / "reference.safetensors").string(), ref);
    }
    io::write_text_atomic((t / "trainer_state.json").string(), state_json(st).dump(2) + "\n");
    io::write_text_atomic((t / "config.toml").string(), config_toml);
  });
}

TrainState read_train_state(const std::string& dir) {
  std::string path = (fs::path(dir) / "trainer_state.json").string();
  std::ifstream in(path);
  TEMPER_CHECK(in.good()) << path << ": missing (not a temper checkpoint)";
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    TEMPER_FAIL() << path << ": not valid JSON: " << e.what();
  }
  TEMPER_CHECK(j.value("format", "") == "temper-trainer-state-1")
      << path << ": field 'format' must be \"temper-trainer-state-1\", got " << j.value("format", "(missing)");
  TrainState s;
  try {
    s.step = j.at("step");
    s.stage = j.at("stage");
    s.sft_steps = j.at("sft_steps");
    s.rl_steps = j.at("rl_steps");
    s.sft_cursor = j.at("sft_cursor");
    s.rl_cursor = j.at("rl_cursor");
    s.opt_steps = j.at("opt_steps");
    s.opt_skipped = j.at("opt_skipped");
    s.methods = j.at("methods").get<std::map<std::string, std::string>>();
  } catch (const std::exception& e) {
    TEMPER_FAIL() << path << ": " << e.what();
  }
  return s;
}

void load_weights(const std::string& path, Transformer& model) {
  io::SafetensorsFile f = io::SafetensorsFile::open(path);
  for (const ParamEntry& e : model.layout().entries()) {
    TEMPER_CHECK(f.has(e.name)) << path << ": tensor '" << e.name << "' missing";
    Tensor dst = model.param(e.name);
    io::copy_to_f32(f.get(e.name), dst.data<float>(), dst.numel(), path + ": " + e.name);
  }
  model.params_updated();
}

TrainState load_checkpoint(const std::string& dir, Transformer& model, Optimizer* opt, Transformer* reference) {
  TrainState s = read_train_state(dir);
  load_weights((fs::path(dir) / "model.safetensors").string(), model);
  if (opt) {
    std::string p = (fs::path(dir) / "trainer_state.safetensors").string();
    io::SafetensorsFile f = io::SafetensorsFile::open(p);
    io::copy_to_f32(f.get("adam.m"), opt->m(), opt->size(), p + ": adam.m");
    io::copy_to_f32(f.get("adam.v"), opt->v(), opt->size(), p + ": adam.v");
    opt->moments_updated();
    opt->restore(s.opt_steps, s.opt_skipped);
  }
  if (reference) load_weights((fs::path(dir) / "reference.safetensors").string(), *reference);
  return s;
}

std::string latest_checkpoint(const std::string& run_dir) {
  fs::path c = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(c)) return "";
  int64_t best = -1;
  std::string out;
  for (const auto& e : fs::directory_iterator(c)) {
    int64_t s = step_of(e.path());
    if (s > best && fs::exists(e.path() / "trainer_state.json")) best = s, out = e.path().string();
  }
  return out;
}

void prune_checkpoints(const std::string& run_dir, int64_t keep_last) {
  if (keep_last <= 0) return;
  fs::path c = fs::path(run_dir) / "checkpoints";
  std::vector<std::pair<int64_t, fs::path>> all;
  for (const auto& e : fs::directory_iterator(c))
    if (int64_t s = step_of(e.path()); s >= 0) all.push_back({s, e.path()});
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < all.size(); ++i) fs::remove_all(all[i].second);
}

int64_t remove_partial_checkpoints(const std::string& run_dir) {
  fs::path c = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(c)) return 0;
  int64_t n = 0;
  std::vector<fs::path> bad;
  for (const auto& e : fs::directory_iterator(c))
    if (step_of(e.path()) < 0 || !fs::exists(e.path() / "trainer_state.json")) bad.push_back(e.path());
  for (const auto& p : bad) n += fs::remove_all(p) > 0 ? 1 : 0;
  return n;
}

}  // namespace temper::app
