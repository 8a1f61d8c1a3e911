// LLM-judge scoring throughput: completions per second a [[reward]] judge term (rl/judge_reward.h, loaded as
// `temper train` loads it: app/judge_setup.h) scores in one batch, greedy, parse = "score". Items are GSM8K-style
// question/answer/completion triples (~300 bytes of completion, half correct). The first batch is a warm-up;
// then `reps` batches are timed. Also: the judge's prompt and answer lengths in tokens and the failure share.
// Results: docs/PERFORMANCE.md "LLM judge". Usage: judge_throughput MODEL [BATCH=64] [MAX_NEW=32] [REPS=2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "temper/app/judge_setup.h"
#include "temper/core/thread_pool.h"
#include "temper/rl/judge_reward.h"

using namespace temper;

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: judge_throughput MODEL [BATCH=64] [MAX_NEW=32] [REPS=2]\n");
    return 2;
  }
  const std::string model = argv[1];
  const int batch = argc > 2 ? std::atoi(argv[2]) : 64;
  const int max_new = argc > 3 ? std::atoi(argv[3]) : 32;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 2;
  rl::RewardTermConfig c;
  c.name = "judge";
  rl::JudgeConfig j;
  j.model = model;
  j.prompt_template =
      "Question: {question}\nReference answer: {answer}\nStudent answer: {completion}\n\nRate the student answer "
      "from 0 to 10. Reply with \"Score: N\" and one sentence why.";
  j.max_new = max_new;
  c.judge = j;
  std::unique_ptr<rl::RewardTerm> term = app::install_judges("cpu")(c);
  std::vector<tasks::Problem> ps(static_cast<size_t>(batch));
  std::vector<std::string> completions(ps.size());
  std::vector<rl::RewardQuery> qs;
  unsigned x = 12345;
  auto next = [&] { return x = x * 1103515245u + 12345u, (x >> 16) & 0x7fff; };
  for (size_t i = 0; i < ps.size(); ++i) {
    const int a = static_cast<int>(next() % 900) + 100, b = static_cast<int>(next() % 90) + 10;
    const int right = a * b, given = next() % 2 ? right : right + static_cast<int>(next() % 9) + 1;
    std::ostringstream q, s;
    q << "A shop packs " << a << " apples into each of " << b << " boxes. How many apples are there in all?";
    s << "We need " << a << " times " << b << ". First, " << a << " * " << b / 10 * 10 << " = " << a * (b / 10 * 10)
      << ". Then " << a << " * " << b % 10 << " = " << a * (b % 10) << ".\nAdding them: " << a * (b / 10 * 10) << " + "
      << a * (b % 10) << " = " << given << ". So the total number of apples in all the boxes is " << given << ".\n#### "
      << given;
    ps[i].id = "p" + std::to_string(i), ps[i].prompt = q.str(), ps[i].answer = std::to_string(right);
    completions[i] = s.str();
  }
  for (size_t i = 0; i < ps.size(); ++i) qs.push_back({&ps[i], &completions[i], "0/" + std::to_string(i)});
  // Lengths through the judge model itself (the same loader: cached, not loaded twice).
  std::shared_ptr<rl::JudgeModel> jm = rl::load_judge_model(model, "cpu", "bench");
  rl::JudgeTemplate tmpl(j.prompt_template, rl::judge_placeholders(), "bench");
  double prompt_tokens = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    tasks::Problem p;
    p.prompt = tmpl.fill({ps[i].shown(), completions[i], ps[i].answer, ""});
    prompt_tokens += static_cast<double>(jm->codec().encode_prompt(p).size());
  }
  term->score(qs, 0);  // warm-up
  double secs = 0;
  int64_t failed = 0;
  double answer_chars = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    std::vector<rl::TermScore> got = term->score(qs, r + 1);
    secs += since(t0);
    const rollout::EngineStats& st = jm->stats();
    std::fprintf(stderr, "batch %d: %.2f s, prefill %lld, decode %lld tokens, %lld preemptions\n", r, since(t0),
                 static_cast<long long>(st.prefill_tokens), static_cast<long long>(st.decode_tokens),
                 static_cast<long long>(st.preemptions));
    for (const auto& s : got) failed += s.failed ? 1 : 0, answer_chars += static_cast<double>(s.info.size());
  }
  std::vector<rl::JudgeAnswer> answers =
      jm->ask({tmpl.fill({ps[0].shown(), completions[0], ps[0].answer, ""})}, max_new, 0);
  const double n = static_cast<double>(batch) * reps;
  std::printf(
      "{\"model\":\"%s\",\"threads\":%d,\"batch\":%d,\"max_new\":%d,\"reps\":%d,\"mean_prompt_tokens\":%.1f,"
      "\"seconds_per_batch\":%.3f,\"completions_per_s\":%.2f,\"failed_frac\":%.3f,\"mean_info_chars\":%.1f}\n",
      model.c_str(), default_num_threads(), batch, max_new, reps, prompt_tokens / batch, secs / reps, n / secs,
      static_cast<double>(failed) / n, answer_chars / n);
  std::fprintf(stderr, "example judgement: %s\n", answers[0].text.c_str());
  return 0;
}
