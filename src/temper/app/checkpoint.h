// Training checkpoints: checkpoints/step-N/ holds an HF-loadable model (model.safetensors,
// config.json, generation_config.json, tokenizer files), the optimiser moments
// (trainer_state.safetensors), the counters that make a resume exact (trainer_state.json: stage,
// steps, data cursors, optimiser step, method states), the frozen KL reference when one is used,
// and the resolved recipe. Written as one directory, atomically (built beside, fsynced, renamed):
// a crash mid-write leaves the previous checkpoints intact. Keep-last-N prunes older ones.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "temper/io/hf_model_dir.h"
#include "temper/model/optimizer.h"
#include "temper/model/transformer.h"

namespace temper::app {

struct TrainState {
  int64_t step = 0;          // global steps done (SFT then RL)
  std::string stage = "sft";  // the stage whose optimiser is saved
  int64_t sft_steps = 0, rl_steps = 0;
  uint64_t sft_cursor = 0, rl_cursor = 0;
  int64_t opt_steps = 0, opt_skipped = 0;
  std::map<std::string, std::string> methods;  // method name -> its saved state
};

// mid_write (fault injection for tests): called once the model files are written, before the rest.
void save_checkpoint(const std::string& dir, const Transformer& model, const io::HfExportOptions& export_opts,
                     Optimizer* opt, const Transformer* reference, const TrainState& st, const std::string& config_toml,
                     const std::function<void()>& mid_write = {});
// Loads weights (and the optimiser moments / reference when given) into existing objects.
TrainState load_checkpoint(const std::string& dir, Transformer& model, Optimizer* opt, Transformer* reference);
TrainState read_train_state(const std::string& dir);
void load_weights(const std::string& safetensors_path, Transformer& model);
// The newest checkpoints/step-N of a run directory, or "" when there is none.
std::string latest_checkpoint(const std::string& run_dir);
void prune_checkpoints(const std::string& run_dir, int64_t keep_last);
// Removes what a crash mid-write left in checkpoints/ (anything that is not a complete step-N).
int64_t remove_partial_checkpoints(const std::string& run_dir);

}  // namespace temper::app
