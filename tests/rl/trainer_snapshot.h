// A trainer's resumable state as a checkpoint holds it: the weights (with LoRA adapters: theirs, the base being the
// model's path), AdamW's moments and step, the counters and [rl.async]'s batches explored ahead. take() after some
// steps, restore() into a fresh trainer after its set_planned_steps(): the async tests' bitwise-resume checks (in
// one process and across ranks).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "temper/model/lora.h"
#include "temper/model/transformer.h"
#include "temper/rl/rl_trainer.h"

namespace temper::test {

struct TrainerSnapshot {
  std::vector<float> w, m, v;
  std::string async_state;
  int64_t steps = 0, opt_steps = 0;
  uint64_t cursor = 0;

  static TrainerSnapshot take(Transformer& model, rl::RlTrainer& t, const LoraAdapters* lora = nullptr) {
    TrainerSnapshot s;
    if (lora)
      s.w.assign(lora->params(), lora->params() + lora->size());
    else
      s.w.assign(model.params(), model.params() + model.flat_size());
    s.m.assign(t.optimizer().m(), t.optimizer().m() + t.optimizer().size());
    s.v.assign(t.optimizer().v(), t.optimizer().v() + t.optimizer().size());
    s.async_state = t.async_state();
    s.steps = t.steps_done(), s.cursor = t.cursor(), s.opt_steps = t.optimizer().steps_done();
    return s;
  }

  void restore(Transformer& model, rl::RlTrainer& t, LoraAdapters* lora = nullptr) const {
    if (lora) {
      std::copy(w.begin(), w.end(), lora->params());
    } else {
      std::copy(w.begin(), w.end(), model.params());
      model.params_updated();
    }
    std::copy(m.begin(), m.end(), t.optimizer().m());
    std::copy(v.begin(), v.end(), t.optimizer().v());
    t.optimizer().moments_updated();
    t.optimizer().restore(opt_steps, 0);
    t.restore(steps, cursor);
    t.load_async_state(async_state);
  }
};

}  // namespace temper::test
