// Training checkpoints: checkpoints/step-N/ holds an HF-loadable model (model.safetensors,
// config.json, generation_config.json, tokenizer files), the optimiser moments
// (trainer_state.safetensors), the counters that make a resume exact (trainer_state.json: stage,
// steps, data cursors, optimiser step, method states), the frozen KL reference when one is used,
// and the resolved recipe. Written as one directory, atomically (built beside, fsynced, renamed):
// a crash mid-write leaves the previous checkpoints intact. Keep-last-N prunes older ones.
// checksums.sha256, written last, holds the SHA-256 of every other file in `sha256sum` format
// (`cd step-N && sha256sum -c checksums.sha256` checks it); a resume verifies it, so a damaged file is
// reported instead of loaded, and the previous good checkpoint is offered (or taken, with fallback).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "temper/io/hf_model_dir.h"
#include "temper/model/lora.h"
#include "temper/model/optimizer.h"
#include "temper/model/transformer.h"

namespace temper::app {

struct TrainState {
  int64_t step = 0;           // global steps done (SFT then RL)
  std::string stage = "sft";  // the stage whose optimiser is saved
  int64_t sft_steps = 0, rl_steps = 0;
  uint64_t sft_cursor = 0, rl_cursor = 0;
  int64_t opt_steps = 0, opt_skipped = 0;
  std::map<std::string, std::string> methods;  // method name -> its saved state
};

// mid_write (fault injection for tests): called once the model files are written, before the rest. With LoRA
// `adapters`, the checkpoint holds them in PEFT's format (adapter_config.json, adapter_model.safetensors) instead
// of the model (the frozen base is the run's model.path), and the optimiser's moments are the adapters'.
void save_checkpoint(const std::string& dir, const Transformer& model, const io::HfExportOptions& export_opts,
                     Optimizer* opt, const Transformer* reference, const TrainState& st, const std::string& config_toml,
                     const std::function<void()>& mid_write = {}, const LoraAdapters* adapters = nullptr);
// Loads weights (and the optimiser moments / reference when given) into existing objects; with `adapters`, the
// adapters' weights instead of the model's.
TrainState load_checkpoint(const std::string& dir, Transformer& model, Optimizer* opt, Transformer* reference,
                           LoraAdapters* adapters = nullptr);
TrainState read_train_state(const std::string& dir);
void load_weights(const std::string& safetensors_path, Transformer& model);
// The newest checkpoints/step-N of a run directory, or "" when there is none. A step-N is complete when it
// holds trainer_state.json or checksums.sha256 (a step-N with checksums but without its state is damaged).
std::string latest_checkpoint(const std::string& run_dir);

// What verify_checkpoint found. ok: every file checksums.sha256 lists exists and hashes as listed, and the
// files a resume reads (model.safetensors, trainer_state.json/.safetensors, reference.safetensors) are listed
// when present; other unlisted files are ignored. unverified (with ok): no checksums.sha256 at all, a checkpoint
// written by a temper before checksums. problem: the first bad file and what is wrong with it ("" when ok).
struct CheckpointCheck {
  bool ok = true;
  bool unverified = false;
  std::string problem;
};
CheckpointCheck verify_checkpoint(const std::string& dir);
// The checkpoint a resume loads: the newest complete one, verified. When it is damaged: without fallback,
// throws naming the problem and the previous good checkpoint (or that there is none); with fallback, says on
// stderr which ones it skips and why and returns the newest good one (throws when none is good). "" when the
// run has no complete checkpoint.
// command: the one that resumes (named in the messages).
std::string choose_resume_checkpoint(const std::string& run_dir, bool fallback,
                                     const std::string& command = "temper train");
// checksums.sha256 in a checkpoint directory being written: the SHA-256 of every other file under it (names
// relative, sorted), as `sha256sum` writes it. Written last.
void write_checkpoint_checksums(const std::string& dir);
void prune_checkpoints(const std::string& run_dir, int64_t keep_last);
// Removes what a crash mid-write left in checkpoints/ (anything that is not a complete step-N).
int64_t remove_partial_checkpoints(const std::string& run_dir);

}  // namespace temper::app
