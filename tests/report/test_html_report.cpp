// report.html: one SVG chart per metric, train/eval series apart, nulls and single points handled,
// samples escaped, no external URLs, and clear errors for a bad or missing metrics.jsonl.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/scratch.h"
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
void spit(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
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
  const std::string html = render_html_report("t", {{1, "train", {{"kl", NAN}}}, {2, "train", {{"kl", NAN}}}}, {},
                                              nullptr);
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
}  // namespace temper::report
