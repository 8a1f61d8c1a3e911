#include "temper/app/bench_load.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "temper/app/cpu_report.h"
#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/core/memory_info.h"
#include "temper/io/file_map.h"

namespace temper::app {
namespace {}  // namespace

int bench_load(const BenchLoadOptions& o) {
  TEMPER_CHECK(o.repeat > 0) << "--repeat must be > 0";
  for (io::LoadMode mode : {io::LoadMode::mmap, io::LoadMode::copy}) {
    io::file_load_mode_set(mode);
    double best = 1e30, rss = 0, before = resident_mib();
    for (int i = 0; i < o.repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      LoadedModel lm = load_model(o.model);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s < best) best = s;
      rss = resident_mib() - before;
    }
    nlohmann::json j = {{"model", o.model},
                        {"mode", std::string(io::load_mode_name(mode))},
                        {"load_s", std::round(best * 1000) / 1000},
                        {"rss_after_load_mb", std::round(rss * 10) / 10},
                        {"repeat", o.repeat}};
    add_cpu_fields(j);
    std::printf("%s\n", j.dump().c_str());
  }
  io::file_load_mode_set(io::LoadMode::mmap);
  return 0;
}

}  // namespace temper::app
