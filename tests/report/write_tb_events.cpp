// Helper for tools/ref/check_tensorboard.py: writes a run directory the way the trainer does
// (MetricsFanout of metrics.jsonl + TensorBoard events), including a crash after step 10 and a
// resume from the step-6 checkpoint, so the reference script can read the events with tensorboard's
// EventAccumulator and compare them with metrics.jsonl.
//   write_tb_events OUT_DIR
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>

#include "temper/report/metrics_sink.h"
#include "temper/report/tensorboard.h"

using namespace temper::report;

namespace {
void write_steps(MetricsSink& m, int64_t from, int64_t to, double offset) {
  for (int64_t s = from; s <= to; ++s) {
    m.write(s, "train", {{"reward_mean", 0.1 * double(s) + offset},
                         {"loss", 1.0 / double(s)},
                         {"kl", s == 3 ? std::nan("") : 0.001 * double(s)}});
    if (s % 5 == 0) m.write(s, "eval", {{"eval_accuracy", 0.05 * double(s) + offset}});
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_tb_events OUT_DIR\n");
    return 2;
  }
  try {
    const std::string dir = argv[1];
    std::filesystem::remove_all(dir);
    TensorBoardWriter::Options o;
    o.hostname = "testhost";
    {
      o.wall_time = 1000.0;
      MetricsFanout f;
      f.add(JsonlMetrics::create(dir + "/metrics.jsonl"));
      f.add(std::make_unique<TensorBoardWriter>(dir, o));
      f.write(0, "sft", {{"loss", 3.25}});
      write_steps(f, 1, 10, 0.0);  // then "crash"; the last checkpoint was at step 6
      f.flush();
    }
    {
      o.wall_time = 1001.0;
      o.resumed_from_step = 6;
      MetricsFanout f;
      f.add(JsonlMetrics::resume_after_step(dir + "/metrics.jsonl", 6));
      f.add(std::make_unique<TensorBoardWriter>(dir, o));
      write_steps(f, 7, 12, 1.0);  // different values after the resume, so stale ones would show
      f.flush();
    }
    std::printf("%s\n", dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_tb_events: %s\n", e.what());
    return 1;
  }
  return 0;
}
