// Fuzz harness: any bytes as the JSONL file of task "dataset" (plain rows: prompt/answer/solution/...; chat rows:
// messages or a prompt given as turns) must load into problems, each verifiable against its own gold solution,
// and split by eval_fraction, or throw temper::Error.
#include <unistd.h>

#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "temper/core/error.h"
#include "temper/tasks/dataset.h"

namespace {

void check(temper::tasks::DatasetConfig cfg) {
  temper::tasks::DatasetTask task(std::move(cfg));
  for (temper::tasks::Split split : {temper::tasks::Split::train, temper::tasks::Split::eval}) {
    for (int64_t i = 0; i < task.size(split); ++i) {
      temper::tasks::Problem p = task.problem(split, static_cast<uint64_t>(i));
      (void)task.verify(p, p.gold_solution);
      (void)task.verify(p, p.teacher_response);
      (void)p.shown();
    }
  }
  (void)temper::tasks::find_answerless(task, temper::tasks::Split::train);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = temper::fuzz::write_temp(data, size, "dataset", ".jsonl");
  for (double fraction : {0.0, 0.5}) {
    try {
      temper::tasks::DatasetConfig cfg;
      cfg.path = path;
      cfg.eval_fraction = fraction;
      check(cfg);
    } catch (const temper::Error&) {
    }
  }
  ::unlink(path.c_str());
  return 0;
}
