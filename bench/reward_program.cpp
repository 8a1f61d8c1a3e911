// Reward-program throughput: trajectories per second a Python worker pool scores through reward::ProgramReward
// (the JSON-lines protocol, python/temper_reward.py), against the builtin C++ math checker in-process. Items are
// GSM8K-style completions (~300 bytes, reasoning then "#### N", half correct) in batches as a step sends them.
// Start-up (spawn to ready) is timed apart. Results: docs/PERFORMANCE.md "Reward programs".
// Usage: reward_program [PROGRAM.py] [ITEMS=4096] [BATCH=256] [WORKERS=1,4]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "temper/reward/math_answer.h"
#include "temper/reward/program_reward.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Sample {
  std::string completion, answer;
};

std::vector<Sample> samples(int n) {
  std::vector<Sample> out;
  unsigned x = 12345;
  auto next = [&] { return x = x * 1103515245u + 12345u, (x >> 16) & 0x7fff; };
  for (int i = 0; i < n; ++i) {
    const int a = static_cast<int>(next() % 900) + 100, b = static_cast<int>(next() % 90) + 10;
    const int right = a * b, given = next() % 2 ? right : right + static_cast<int>(next() % 9) + 1;
    std::ostringstream c;
    c << "We need " << a << " times " << b << ". First, " << a << " * " << b / 10 * 10 << " = " << a * (b / 10 * 10)
      << ". Then " << a << " * " << b % 10 << " = " << a * (b % 10) << ".\nAdding them: " << a * (b / 10 * 10) << " + "
      << a * (b % 10) << " = " << given << ". So the total number of apples in all the boxes is " << given << ".\n#### "
      << given;
    out.push_back({c.str(), std::to_string(right)});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string program = argc > 1 ? argv[1] : "examples/rewards/math_exact.py";
  const int n = argc > 2 ? std::atoi(argv[2]) : 4096;
  const int batch = argc > 3 ? std::atoi(argv[3]) : 256;
  std::vector<int> worker_counts = {1, 4};
  if (argc > 4) {
    worker_counts.clear();
    std::stringstream ss(argv[4]);
    for (std::string w; std::getline(ss, w, ',');) worker_counts.push_back(std::atoi(w.c_str()));
  }
  const std::vector<Sample> data = samples(n);
  std::vector<std::string> items;
  size_t bytes = 0;
  for (int i = 0; i < n; ++i) {
    nlohmann::json j = {{"id", "0/" + std::to_string(i)},
                        {"problem_id", "p" + std::to_string(i)},
                        {"prompt", "How many apples are there in all?"},
                        {"completion", data[i].completion},
                        {"answer", data[i].answer},
                        {"row", {{"prompt", "How many apples are there in all?"}, {"answer", data[i].answer}}}};
    items.push_back(j.dump());
    bytes += items.back().size();
  }
  // The builtin checker, in-process and single-threaded.
  auto t0 = Clock::now();
  int correct = 0;
  for (const Sample& s : data) {
    auto ex = temper::reward::extract_math_answer(s.completion);
    correct += ex && temper::reward::math_answers_equal(*ex, s.answer);
  }
  const double builtin_s = since(t0);
  std::printf("{\"scorer\":\"builtin C++\",\"items\":%d,\"correct\":%d,\"seconds\":%.4f,\"traj_per_s\":%.0f}\n", n,
              correct, builtin_s, n / builtin_s);
  for (int workers : worker_counts) {
    temper::reward::ProgramOptions o;
    o.name = "bench";
    o.command = {"python3", program};
    o.workers = workers;
    temper::reward::ProgramReward p(o);
    t0 = Clock::now();
    p.start();
    const double start_s = since(t0);
    p.score({items.begin(), items.begin() + std::min(batch, n)}, -1);  // warm-up (imports, first compiles)
    int ok = 0, right = 0;
    double worst = 0;
    t0 = Clock::now();
    for (int b = 0; b < n; b += batch) {
      const auto tb = Clock::now();
      std::vector<std::string> chunk(items.begin() + b, items.begin() + std::min(n, b + batch));
      for (const auto& s : p.score(chunk, b / batch)) ok += s.ok, right += s.ok && s.reward == 1.0;
      worst = std::max(worst, since(tb));
    }
    const double s = since(t0);
    std::printf(
        "{\"scorer\":\"%s\",\"workers\":%d,\"items\":%d,\"batch\":%d,\"mean_item_bytes\":%zu,\"ok\":%d,\"correct\":%d,"
        "\"start_s\":%.3f,\"seconds\":%.4f,\"traj_per_s\":%.0f,\"batch_ms_mean\":%.2f,\"batch_ms_max\":%.2f}\n",
        program.c_str(), workers, n, batch, bytes / items.size(), ok, right, start_s, s, n / s,
        1000 * s / ((n + batch - 1) / batch), 1000 * worst);
  }
  return 0;
}
