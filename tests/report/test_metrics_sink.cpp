// metrics.jsonl / samples.jsonl: rows written and read back (nulls for non-finite values, key order,
// escaping), resume truncation equal to an uninterrupted run, a torn last line, clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/scratch.h"
#include "temper/report/metrics_sink.h"

namespace temper::report {
namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void spit(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
std::string path(const std::string& name) { return test::scratch_path("report_jsonl", name); }

void write_steps(MetricsSink& m, int64_t from, int64_t to) {
  for (int64_t s = from; s <= to; ++s) {
    m.write(s, "train", {{"reward_mean", 0.1 * double(s)}, {"loss", 1.0 / double(s)}});
    if (s % 2 == 0) m.write(s, "eval", {{"eval_accuracy", 0.05 * double(s)}});
  }
}

TEST(JsonlMetrics, WritesOneLinePerRowAndReadsBack) {
  const std::string p = path("rows.jsonl");
  {
    auto m = JsonlMetrics::create(p);
    m->write(1, "train", {{"reward_mean", 0.5}, {"kl", std::numeric_limits<double>::quiet_NaN()},
                          {"loss", std::numeric_limits<double>::infinity()}, {"lr", 3e-5}});
    m->write(2, "eval", {{"eval_accuracy", 0.1 + 0.2}});
    m->flush();
  }
  EXPECT_EQ(slurp(p),
            "{\"step\":1,\"kind\":\"train\",\"reward_mean\":0.5,\"kl\":null,\"loss\":null,\"lr\":3e-05}\n"
            "{\"step\":2,\"kind\":\"eval\",\"eval_accuracy\":0.30000000000000004}\n");
  auto rows = read_metrics_jsonl(p);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].step, 1);
  EXPECT_EQ(rows[0].kind, "train");
  ASSERT_EQ(rows[0].values.size(), 4u);
  EXPECT_EQ(rows[0].values[0].first, "reward_mean");  // file order kept
  EXPECT_EQ(rows[0].values[1].first, "kl");
  EXPECT_TRUE(std::isnan(rows[0].values[1].second));
  EXPECT_TRUE(std::isnan(rows[0].values[2].second));
  EXPECT_EQ(rows[0].values[3].second, 3e-5);
  EXPECT_EQ(rows[1].kind, "eval");
  EXPECT_EQ(rows[1].values[0].second, 0.1 + 0.2);  // round trip is exact
  EXPECT_EQ(json_number(std::nan("")), "null");
}

TEST(JsonlMetrics, ResumeTruncatesToCheckpointStep) {
  const std::string straight = path("straight.jsonl"), resumed = path("resumed.jsonl");
  {
    auto m = JsonlMetrics::create(straight);
    write_steps(*m, 1, 10);
  }
  {
    auto m = JsonlMetrics::create(resumed);
    write_steps(*m, 1, 7);  // crashed after step 7; last checkpoint at step 4
  }
  {
    std::ofstream(resumed, std::ios::app) << "{\"step\":8,\"kind\":\"train\",\"rewa";  // torn row
  }
  {
    auto m = JsonlMetrics::resume_after_step(resumed, 4);
    write_steps(*m, 5, 10);
  }
  EXPECT_EQ(slurp(resumed), slurp(straight));
  // Resuming a run whose file does not exist yet creates it.
  const std::string fresh = path("fresh.jsonl");
  std::filesystem::remove(fresh);
  JsonlMetrics::resume_after_step(fresh, 3)->write(4, "train", {{"x", 1}});
  EXPECT_EQ(slurp(fresh), "{\"step\":4,\"kind\":\"train\",\"x\":1.0}\n");
}

TEST(JsonlMetrics, FanoutWritesEverySink) {
  const std::string a = path("fan_a.jsonl"), b = path("fan_b.jsonl");
  MetricsFanout f;
  f.add(JsonlMetrics::create(a));
  f.add(JsonlMetrics::create(b));
  f.write(1, "sft", {{"loss", 2.5}});
  f.flush();
  EXPECT_EQ(slurp(a), "{\"step\":1,\"kind\":\"sft\",\"loss\":2.5}\n");
  EXPECT_EQ(slurp(a), slurp(b));
}

TEST(JsonlMetrics, ReaderErrorsNameFileLineAndField) {
  const std::string p = path("bad.jsonl");
  spit(p, "{\"step\":1,\"kind\":\"train\",\"x\":1}\n{\"kind\":\"train\",\"x\":2}\n");
  test::expect_error([&] { read_metrics_jsonl(p); }, {p + ":2", "'step'", "missing"});
  spit(p, "{\"step\":1.5,\"x\":1}\n");
  test::expect_error([&] { read_metrics_jsonl(p); }, {p + ":1", "'step' must be an integer", "1.5"});
  spit(p, "{\"step\":1,\"kind\":3}\n");
  test::expect_error([&] { read_metrics_jsonl(p); }, {p + ":1", "'kind'"});
  spit(p, "{\"step\":1}\nnot json\n{\"step\":2}\n");
  test::expect_error([&] { read_metrics_jsonl(p); }, {p + ":2", "not valid JSON"});
  spit(p, "[1,2]\n");
  test::expect_error([&] { read_metrics_jsonl(p); }, {p + ":1", "JSON object"});
  test::expect_error([&] { read_metrics_jsonl(path("does_not_exist.jsonl")); }, {"does_not_exist.jsonl", "cannot open"});
  // Blank lines, a torn last line, strings and a missing kind are tolerated.
  spit(p, "\n{\"step\":3,\"eval_accuracy\":0.5,\"note\":\"x\"}\n\n{\"step\":4,\"acc");
  auto rows = read_metrics_jsonl(p);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].kind, "eval");
  ASSERT_EQ(rows[0].values.size(), 1u);
}

TEST(SamplesJsonl, RoundTripAndResume) {
  const std::string p = path("samples.jsonl");
  {
    auto s = SamplesJsonl::create(p);
    s->write({1, "What is 2+2?\n<script>", "4 \"quoted\" \xe2\x9c\x93", 1.0, "4", true});
    s->write({2, "p", "c", std::nan(""), std::nullopt, std::nullopt});
    s->write({3, "p3", "bad utf8 \xff end", -0.5, std::nullopt, false});
  }
  auto rows = read_samples_jsonl(p);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].prompt, "What is 2+2?\n<script>");
  EXPECT_EQ(rows[0].completion, "4 \"quoted\" \xe2\x9c\x93");
  EXPECT_EQ(rows[0].answer.value_or(""), "4");
  EXPECT_EQ(rows[0].correct.value_or(false), true);
  EXPECT_TRUE(std::isnan(rows[1].reward));
  EXPECT_FALSE(rows[1].answer.has_value());
  EXPECT_FALSE(rows[1].correct.has_value());
  EXPECT_EQ(rows[2].completion, "bad utf8 \xef\xbf\xbd end");  // invalid UTF-8 -> U+FFFD, the file stays JSON
  EXPECT_EQ(rows[2].correct.value_or(true), false);
  SamplesJsonl::resume_after_step(p, 1)->write({2, "again", "c", 0.0, std::nullopt, std::nullopt});
  rows = read_samples_jsonl(p);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].prompt, "again");
  spit(p, "{\"step\":1,\"prompt\":\"p\",\"completion\":5,\"reward\":1}\n");
  test::expect_error([&] { read_samples_jsonl(p); }, {p + ":1", "'completion' must be a string"});
  spit(p, "{\"step\":1,\"prompt\":\"p\",\"completion\":\"c\"}\n");
  test::expect_error([&] { read_samples_jsonl(p); }, {p + ":1", "'reward' is missing"});
}

}  // namespace
}  // namespace temper::report
