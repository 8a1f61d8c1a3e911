#include "temper/app/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/core/error.h"
#include "temper/io/atomic_file.h"
#include "temper/io/peft_adapter.h"
#include "temper/io/safetensors.h"
#include "temper/io/safetensors_writer.h"
#include "temper/io/sha256_file.h"

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

constexpr const char* kChecksums = "checksums.sha256";
// The files a resume reads: each must be listed in checksums.sha256 when it is present.
constexpr const char* kLoaded[] = {"model.safetensors", "trainer_state.json", "trainer_state.safetensors",
                                   "reference.safetensors"};

bool is_complete(const fs::path& p) {
  return step_of(p) >= 0 && (fs::exists(p / "trainer_state.json") || fs::exists(p / kChecksums));
}

// Complete checkpoints of a run, newest first.
std::vector<std::pair<int64_t, fs::path>> complete_checkpoints(const std::string& run_dir) {
  std::vector<std::pair<int64_t, fs::path>> all;
  fs::path c = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(c)) return all;
  for (const auto& e : fs::directory_iterator(c))
    if (is_complete(e.path())) all.push_back({step_of(e.path()), e.path()});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return all;
}

void write_checksums(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) {
      std::string n = e.path().lexically_relative(dir).generic_string();
      if (n == kChecksums) continue;
      TEMPER_CHECK(n.find_first_of("\\\n\r") == std::string::npos)
          << (dir / n).string() << ": a file name sha256sum would escape; checkpoints hold plain names";
      names.push_back(n);
    }
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& n : names) text += io::sha256_file_hex((dir / n).string()) + "  " + n + "\n";
  io::write_text_atomic((dir / kChecksums).string(), text);
}

CheckpointCheck bad(std::string problem) {
  return {false, false, std::move(problem)};
}

}  // namespace

void write_checkpoint_checksums(const std::string& dir) {
  write_checksums(dir);
}

void save_checkpoint(const std::string& dir, const Transformer& model, const io::HfExportOptions& export_opts,
                     Optimizer* opt, const Transformer* reference, const TrainState& st, const std::string& config_toml,
                     const std::function<void()>& mid_write, const LoraAdapters* adapters) {
  fs::create_directories(fs::path(dir).parent_path());
  io::write_dir_atomic(dir, [&](const std::string& tmp) {
    if (adapters)
      io::write_peft_adapter(*adapters, tmp);
    else
      io::export_hf_dir(model, tmp, export_opts);
    if (mid_write) mid_write();
    fs::path t(tmp);
    std::vector<io::NamedTensor> state;
    if (opt) {
      // The full moments (a sharded optimiser gathered them here first: Optimizer::gather_moments).
      const int64_t n = opt->trainable_size();
      state.push_back({"adam.m", Tensor::wrap(const_cast<float*>(opt->full_m()), {n}, DType::f32).clone()});
      state.push_back({"adam.v", Tensor::wrap(const_cast<float*>(opt->full_v()), {n}, DType::f32).clone()});
    }
    if (!state.empty()) io::write_safetensors((t / "trainer_state.safetensors").string(), state);
    if (reference) {
      std::vector<io::NamedTensor> ref;
      for (const ParamEntry& e : reference->layout().entries())
        ref.push_back({e.name, reference->param(e.name).clone()});
      io::write_safetensors((t / "reference.safetensors").string(), ref);
    }
    io::write_text_atomic((t / "trainer_state.json").string(), state_json(st).dump(2) + "\n");
    io::write_text_atomic((t / "config.toml").string(), config_toml);
    write_checksums(t);  // last: it hashes everything above
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

TrainState load_checkpoint(const std::string& dir, Transformer& model, Optimizer* opt, Transformer* reference,
                           LoraAdapters* adapters) {
  TrainState s = read_train_state(dir);
  if (adapters)
    io::load_peft_adapter_weights(*adapters, dir);
  else
    load_weights((fs::path(dir) / "model.safetensors").string(), model);
  if (opt) {
    std::string p = (fs::path(dir) / "trainer_state.safetensors").string();
    io::SafetensorsFile f = io::SafetensorsFile::open(p);
    const int64_t n = opt->trainable_size();  // full moments in the file; a sharded optimiser keeps its pieces
    std::vector<float> m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    io::copy_to_f32(f.get("adam.m"), m.data(), n, p + ": adam.m");
    io::copy_to_f32(f.get("adam.v"), v.data(), n, p + ": adam.v");
    opt->set_full_moments(m.data(), v.data());
    opt->restore(s.opt_steps, s.opt_skipped);
  }
  if (reference) load_weights((fs::path(dir) / "reference.safetensors").string(), *reference);
  return s;
}

std::string latest_checkpoint(const std::string& run_dir) {
  auto all = complete_checkpoints(run_dir);
  return all.empty() ? "" : all.front().second.string();
}

CheckpointCheck verify_checkpoint(const std::string& dir) {
  const fs::path d(dir), list = d / kChecksums;
  if (!fs::exists(list)) return {true, true, ""};
  std::ifstream in(list, std::ios::binary);
  if (!in.good()) return bad(std::string(kChecksums) + ": cannot be read");
  std::vector<std::pair<std::string, std::string>> entries;  // (name, hash)
  std::string line;
  for (int64_t no = 1; std::getline(in, line); ++no) {
    // "<64 hex>  <name>" (or " *<name>": sha256sum's binary mode)
    bool hex = line.size() > 66 && line[64] == ' ' && (line[65] == ' ' || line[65] == '*');
    for (size_t i = 0; hex && i < 64; ++i) hex = std::isxdigit(static_cast<unsigned char>(line[i])) != 0;
    std::string name = hex ? line.substr(66) : "";
    if (!hex || fs::path(name).is_absolute() || name.find("..") != std::string::npos)
      return bad(std::string(kChecksums) + ": line " + std::to_string(no) +
                 " is not '<64 hex digits>  <file name>' (a sha256sum line)");
    std::string h = line.substr(0, 64);
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    entries.push_back({name, h});
  }
  if (entries.empty()) return bad(std::string(kChecksums) + ": lists no files");
  for (const char* f : kLoaded) {
    bool listed = std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == f; });
    if (!listed && fs::exists(d / f)) return bad(std::string(f) + ": present but not listed in " + kChecksums);
  }
  for (const auto& [name, want] : entries) {
    if (!fs::is_regular_file(d / name)) return bad(name + ": listed in " + kChecksums + " but missing");
    std::string got = io::sha256_file_hex((d / name).string());
    if (got != want)
      return bad(name + ": SHA-256 mismatch (" + kChecksums + " says " + want + ", the file hashes to " + got + ")");
  }
  return {};
}

std::string choose_resume_checkpoint(const std::string& run_dir, bool fallback, const std::string& command) {
  auto all = complete_checkpoints(run_dir);
  if (all.empty()) return "";
  const std::string newest = all.front().second.string();
  std::string first_problem;
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string dir = all[i].second.string();
    CheckpointCheck c = verify_checkpoint(dir);
    if (c.ok) {
      if (c.unverified)
        std::fprintf(stderr, "%s: %s has no %s (written by an older temper): resuming from it unverified\n",
                     command.c_str(), dir.c_str(), kChecksums);
      if (i == 0 || fallback) return dir;
      TEMPER_FAIL() << newest << ": damaged: " << first_problem << ". The previous good checkpoint is " << dir
                    << " (step " << all[i].first << ")"
                    << (i > 1 ? " (" + std::to_string(i - 1) + " between them are damaged too)" : std::string())
                    << ": resume from it with `" << command << " --resume " << run_dir << " --fallback`";
    }
    if (i == 0) first_problem = c.problem;
    if (fallback)
      std::fprintf(stderr, "%s: skipping %s: damaged: %s\n", command.c_str(), dir.c_str(), c.problem.c_str());
  }
  TEMPER_FAIL() << newest << ": damaged: " << first_problem << "; no earlier good checkpoint in " << run_dir
                << "/checkpoints (" << all.size() << " checked)";
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
  std::vector<fs::path> partial;
  for (const auto& e : fs::directory_iterator(c))
    if (!is_complete(e.path())) partial.push_back(e.path());
  for (const auto& p : partial) n += fs::remove_all(p) > 0 ? 1 : 0;
  return n;
}

}  // namespace temper::app
