#include "temper/app/flow_spotlight_join.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "temper/app/this_program.h"
#include "temper/core/error.h"

namespace temper::app {

std::vector<std::string> explorer_argv(int64_t threads, int64_t nice) {
  return {this_program("temper flow spotlight"),
          "flow",
          "explore",
          "--threads",
          std::to_string(threads),
          "--nice",
          std::to_string(nice)};
}

void print_pool_summary(spotlight::SpotlightTrainer& tr) {
  const spotlight::QueueCounters q = tr.queue().counters();
  std::printf(
      "temper flow spotlight: requests %lld added, %lld committed, %lld re-queued, %lld dropped, %lld expired, %lld "
      "late\n",
      static_cast<long long>(q.added), static_cast<long long>(q.committed), static_cast<long long>(q.requeued),
      static_cast<long long>(q.dropped), static_cast<long long>(q.expired), static_cast<long long>(q.late));
  if (!tr.pool()) return;
  const spotlight::PoolStats p = tr.pool()->stats();
  double worst = 0, sum = 0;
  int n = 0;
  for (const auto& j : p.joins)
    if (j.ready >= 0) worst = std::max(worst, j.ready - j.spawned), sum += j.ready - j.spawned, ++n;
  std::printf(
      "temper flow spotlight: explorers %lld started, %lld died (%lld killed), %.2f s explorer time, %.3f s lost; "
      "join (spawn -> ready) mean %.3f s, worst %.3f s\n",
      static_cast<long long>(p.spawned), static_cast<long long>(p.deaths), static_cast<long long>(p.killed),
      p.explorer_seconds, p.lost_seconds, n ? sum / n : 0.0, worst);
}

double time_join(const ExplorerSetup& es, const std::vector<std::string>& argv, const spotlight::WeightStore& store,
                 const std::string& dir, bool from_checkpoint) {
  spotlight::WorkQueue q;
  ExplorerSetup e = es;
  if (from_checkpoint) e.weights_from = dir;
  spotlight::ExplorerPool pool(q, {argv, setup_message(e)});
  if (!from_checkpoint) {
    const int64_t v = store.explorer_version();
    pool.set_weights(v, store.get(v));
  }
  pool.spawn();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const spotlight::PoolStats s = pool.stats();
    TEMPER_CHECK(s.deaths == 0) << "temper flow spotlight: the explorer timed for its join died";
    if (s.joins[0].ready >= 0) return s.joins[0].ready - s.joins[0].spawned;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  TEMPER_FAIL() << "temper flow spotlight: an explorer did not become ready within 60 s";
}

void time_joins(const ExplorerSetup& es, const std::vector<std::string>& argv, const spotlight::WeightStore& store,
                SideRun& run) {
  std::vector<double> mem, ckpt;
  for (int i = 0; i < 3; ++i) {
    mem.push_back(time_join(es, argv, store, run.dir(), false));
    ckpt.push_back(time_join(es, argv, store, run.dir(), true));
  }
  std::sort(mem.begin(), mem.end());
  std::sort(ckpt.begin(), ckpt.end());
  std::printf(
      "temper flow spotlight: an explorer joins in %.4f s with weights from memory, %.4f s reading the checkpoint "
      "(median of 3)\n",
      mem[1], ckpt[1]);
  run.metrics().write(store.current(), "reconfig", {{"join_memory_s", mem[1]}, {"join_checkpoint_s", ckpt[1]}});
}

}  // namespace temper::app
