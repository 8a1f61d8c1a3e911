// report.html: one SVG chart per metric, train/eval series apart, nulls and single points handled,
// samples escaped, no external URLs, and clear errors for a bad or missing metrics.jsonl.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/scratch.h"
#include "temper/report/compare_report.h"
#include "temper/report/html_report.h"

namespace temper::report {
namespace {
namespace fs = std::filesystem;

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void spit(const std::string& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}
size_t count(const std::string& s, const std::string& sub) {
  size_t n = 0;
  for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + 1)) ++n;
  return n;
}

std::string make_run(const std::string& name) {
  const std::string dir = test::scratch_path("report_html", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  spit(dir + "/metrics.jsonl",
       "{\"step\":1,\"kind\":\"train\",\"reward_mean\":0.1,\"loss\":2.0,\"kl\":null}\n"
       "{\"step\":2,\"kind\":\"train\",\"reward_mean\":0.3,\"loss\":1.5,\"kl\":0.01}\n"
       "{\"step\":2,\"kind\":\"eval\",\"eval_accuracy\":0.25,\"response_len_mean\":40}\n"
       "{\"step\":3,\"kind\":\"train\",\"reward_mean\":null,\"loss\":1.2,\"kl\":0.02,\"response_len_mean\":35}\n"
       "{\"step\":4,\"kind\":\"train\",\"reward_mean\":0.5,\"loss\":1.0,\"kl\":0.02,\"response_len_mean\":30}\n");
  spit(dir + "/samples.jsonl",
       "{\"step\":4,\"prompt\":\"<script>alert(1)</script>\",\"completion\":\"a & b\",\"reward\":1.0,\"answer\":\"7\","
       "\"correct\":true}\n");
  spit(dir + "/config.toml", "[run]\nname = \"<tiny>\"\n");
  return dir;
}

TEST(HtmlReport, ImagesUnderTheRunInlinedInNameOrderTheLastMaxImages) {
  const std::string dir = make_run("images");
  fs::create_directories(dir + "/images");
  spit(dir + "/images/step-2.png", "Man");  // base64: TWFu
  spit(dir + "/images/step-1.png", "Ma");   // TWE=
  spit(dir + "/images/step-0.png", "M");    // TQ==
  spit(dir + "/images/notes.txt", "skip");  // not a PNG
  HtmlReportOptions o;
  o.max_images = 2;
  const std::string html = slurp(write_html_report(dir, o));
  EXPECT_EQ(count(html, "<img "), 2u);
  EXPECT_NE(html.find("src=\"data:image/png;base64,TWE=\""), std::string::npos);
  EXPECT_NE(html.find("src=\"data:image/png;base64,TWFu\""), std::string::npos);
  EXPECT_LT(html.find("<h3>step-1</h3>"), html.find("<h3>step-2</h3>"));
  EXPECT_EQ(html.find("step-0"), std::string::npos);
  EXPECT_EQ(html.find("notes"), std::string::npos);
  EXPECT_EQ(count(slurp(write_html_report(make_run("no_images"))), "<img "), 0u);
}

TEST(HtmlReport, OneSvgPerMetricAndEscapedSamples) {
  const std::string dir = make_run("ok");
  const std::string out = write_html_report(dir);
  EXPECT_EQ(out, dir + "/report.html");
  const std::string html = slurp(out);
  // reward_mean, loss, kl, eval_accuracy, response_len_mean
  EXPECT_EQ(count(html, "<svg"), 5u);
  EXPECT_EQ(count(html, "</svg>"), 5u);
  for (const char* m : {"reward_mean", "loss", "kl", "eval_accuracy", "response_len_mean"})
    EXPECT_NE(html.find(std::string("<h3>") + m + "</h3>"), std::string::npos) << m;
  // Key metrics first: reward_mean's chart comes before loss's.
  EXPECT_LT(html.find("<h3>reward_mean</h3>"), html.find("<h3>loss</h3>"));
  // response_len_mean has a train series and a single-point eval series (a marker, and a legend).
  const size_t rl = html.find("<h3>response_len_mean</h3>");
  const std::string rl_chart = html.substr(rl, html.find("</svg>", rl) - rl);
  EXPECT_NE(rl_chart.find("eval step 2: 40"), std::string::npos);
  EXPECT_NE(rl_chart.find(">train</text>"), std::string::npos);
  EXPECT_NE(rl_chart.find(">eval</text>"), std::string::npos);
  // reward_mean's null at step 3 breaks the line: steps 1-2 are one polyline, step 4 a lone marker.
  const size_t rm = html.find("<h3>reward_mean</h3>");
  const std::string rm_chart = html.substr(rm, html.find("</svg>", rm) - rm);
  EXPECT_EQ(count(rm_chart, "<polyline"), 1u);
  EXPECT_EQ(count(rm_chart, "<circle"), 3u);
  // Samples and config are escaped; nothing runs and nothing is fetched.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("a &amp; b"), std::string::npos);
  EXPECT_NE(html.find("name = &quot;&lt;tiny&gt;&quot;"), std::string::npos);
  std::smatch m;
  std::string no_ns = std::regex_replace(html, std::regex("xmlns=\"http://www.w3.org/2000/svg\""), "");
  EXPECT_FALSE(std::regex_search(no_ns, m, std::regex("https?://"))) << m.str();
  // Summary: best reward_mean 0.5 at step 4; loss lower-is-better, best 1 at step 4.
  EXPECT_NE(html.find("<td class=\"name\">reward_mean</td>"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir + "/report.html"));
}

TEST(HtmlReport, OutOptionAndMissingOptionalFiles) {
  const std::string dir = make_run("minimal");
  fs::remove(dir + "/samples.jsonl");
  fs::remove(dir + "/config.toml");
  spit(dir + "/metrics.jsonl", "{\"step\":0,\"kind\":\"sft\",\"loss\":3.5}\n");  // a single point
  const std::string out = test::scratch_path("report_html", "elsewhere.html");
  EXPECT_EQ(write_html_report(dir, {out, 20}), out);
  const std::string html = slurp(out);
  EXPECT_EQ(count(html, "<svg"), 1u);
  EXPECT_NE(html.find("sft step 0: 3.5"), std::string::npos);
  EXPECT_NE(html.find("No samples.jsonl rows"), std::string::npos);
  EXPECT_NE(html.find("No config.toml"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/report.html"));
}

TEST(HtmlReport, AllNullMetricStillGetsAChart) {
  const std::string html =
      render_html_report("t", {{1, "train", {{"kl", NAN}}}, {2, "train", {{"kl", NAN}}}}, {}, nullptr);
  EXPECT_EQ(count(html, "<svg"), 1u);
  EXPECT_NE(html.find("no finite values"), std::string::npos);
}

TEST(HtmlReport, ClearErrors) {
  const std::string dir = make_run("bad");
  spit(dir + "/metrics.jsonl", "{\"step\":1,\"loss\":1}\n{\"step\":\"two\",\"loss\":1}\n");
  test::expect_error([&] { write_html_report(dir); }, {"metrics.jsonl:2", "'step' must be an integer"});
  EXPECT_FALSE(fs::exists(dir + "/report.html"));
  spit(dir + "/metrics.jsonl", "{\"step\":1,\"loss\":1}\n");
  spit(dir + "/samples.jsonl", "{\"step\":1,\"prompt\":\"p\",\"completion\":\"c\",\"reward\":\"high\"}\n");
  test::expect_error([&] { write_html_report(dir); }, {"samples.jsonl:1", "'reward' must be a number"});
  spit(dir + "/metrics.jsonl", "\n");
  test::expect_error([&] { write_html_report(dir); }, {"metrics.jsonl", "no metric rows"});
  fs::remove(dir + "/metrics.jsonl");
  test::expect_error([&] { write_html_report(dir); }, {"metrics.jsonl", "missing"});
  test::expect_error([&] { write_html_report(dir + "/nope"); }, {"nope", "not a run directory"});
}

TEST(HtmlReport, NiceTicks) {
  const std::vector<double> t = nice_ticks(0, 1, 5), want = {0, 0.2, 0.4, 0.6, 0.8, 1};
  ASSERT_EQ(t.size(), want.size());
  for (size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(t[i], want[i], 1e-12);
  EXPECT_EQ(nice_ticks(1, 10, 5), (std::vector<double>{2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(3, 3, 5), (std::vector<double>{3}));
  EXPECT_EQ(html_escape("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
}

}  // namespace
TEST(CompareReport, ChartsPerMetricAndSummaryOverRunsOfEachArm) {
  const std::string root = test::scratch_path("report_compare", "runs");
  fs::remove_all(root);
  auto run = [&](const std::string& name, double base) {
    std::string d = root + "/" + name;
    fs::create_directories(d);
    std::string rows;
    for (int s = 1; s <= 30; ++s)
      rows += "{\"step\":" + std::to_string(s) + ",\"kind\":\"train\",\"entropy\":" + std::to_string(base + s) + "}\n";
    rows += "{\"step\":30,\"kind\":\"eval\",\"eval_accuracy\":" + std::to_string(base / 100) + "}\n";
    spit(d + "/metrics.jsonl", rows);
    return d;
  };
  std::vector<CompareRun> runs = {{"a", run("a1", 10)}, {"a", run("a2", 20)}, {"b", run("b1", 40)}};
  CompareOptions o;
  o.out_dir = root + "/out";
  o.tail = 0.1;  // 3 of 30 steps
  auto sum = write_compare_report(runs, {parse_compare_metric("entropy"), parse_compare_metric("eval_accuracy")}, o);
  ASSERT_EQ(sum.size(), 4u);  // 2 metrics x 2 arms
  EXPECT_EQ(sum[0].arm, "a");
  EXPECT_EQ(sum[0].metric, "train:entropy");
  ASSERT_EQ(sum[0].finals.size(), 2u);
  EXPECT_DOUBLE_EQ(sum[0].finals[0], 10 + 29.0);  // mean of steps 28..30
  EXPECT_DOUBLE_EQ(sum[0].finals[1], 20 + 29.0);
  EXPECT_DOUBLE_EQ(sum[0].mean, 44.0);
  EXPECT_NEAR(sum[0].sd, std::sqrt(50.0), 1e-12);
  EXPECT_EQ(sum[1].arm, "b");
  EXPECT_DOUBLE_EQ(sum[1].mean, 69.0);
  EXPECT_EQ(sum[1].sd, 0.0);
  EXPECT_EQ(sum[2].metric, "eval:eval_accuracy");
  EXPECT_DOUBLE_EQ(sum[2].mean, 0.15);
  for (const char* f : {"compare.html", "train_entropy.svg", "eval_eval_accuracy.svg", "summary.md", "summary.json"})
    EXPECT_TRUE(fs::exists(o.out_dir + "/" + f)) << f;
  std::string svg = slurp(o.out_dir + "/train_entropy.svg");
  EXPECT_EQ(count(svg, "<polyline"), 3u);         // a line per run
  EXPECT_EQ(count(svg, "class=\"legend\""), 2u);  // an entry per arm
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(slurp(o.out_dir + "/summary.md").find("| train: entropy | 44 &plusmn; 7.1 (39, 49) | 69 &plusmn; 0 (69) |"),
            std::string::npos)
      << slurp(o.out_dir + "/summary.md");
  // A metric only some arms report: n/a for the others (not a number).
  fs::create_directories(root + "/c1");
  spit(root + "/c1/metrics.jsonl", "{\"step\":1,\"kind\":\"train\",\"stare_w\":2}\n");
  std::vector<CompareRun> mixed = {{"a", root + "/a1"}, {"c", root + "/c1"}};
  write_compare_report(mixed, {parse_compare_metric("train:stare_w")}, o);
  EXPECT_NE(slurp(o.out_dir + "/summary.md").find("| train: stare_w | n/a | 2 &plusmn; 0 (2) |"), std::string::npos)
      << slurp(o.out_dir + "/summary.md");
  EXPECT_THROW(write_compare_report(runs, {parse_compare_metric("train:nope")}, o), Error);
  EXPECT_THROW(parse_compare_run("no-equals"), Error);
  EXPECT_EQ(parse_compare_metric("eval_len_mean").kind, "eval");
}

}  // namespace temper::report
