#include "temper/report/metrics_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temper/core/error.h"
#include "temper/io/atomic_file.h"

namespace temper::report {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// Invalid UTF-8 (a completion cut inside a multi-byte character) becomes U+FFFD instead of throwing.
std::string dump_line(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

struct Line {
  std::string text;
  int number = 0;           // 1-based
  bool terminated = false;  // ended with '\n'
};

std::vector<Line> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TEMPER_CHECK(in.good()) << path << ": cannot open (" << std::strerror(errno) << ")";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  std::vector<Line> lines;
  size_t pos = 0;
  int n = 0;
  while (pos < all.size()) {
    size_t nl = all.find('\n', pos);
    Line l;
    l.number = ++n;
    l.terminated = nl != std::string::npos;
    l.text = all.substr(pos, (l.terminated ? nl : all.size()) - pos);
    if (!l.text.empty() && l.text.back() == '\r') l.text.pop_back();
    pos = l.terminated ? nl + 1 : all.size();
    lines.push_back(std::move(l));
  }
  return lines;
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }

// Parses one line into an object; nullopt for a line to skip (blank, or a torn last line).
std::optional<ojson> parse_row(const std::string& path, const Line& l, bool is_last) {
  if (blank(l.text)) return std::nullopt;
  ojson j = ojson::parse(l.text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (is_last && !l.terminated) return std::nullopt;  // the row being written when we read (or crashed)
    TEMPER_FAIL() << path << ":" << l.number << ": not valid JSON (each line must be one JSON object)";
  }
  TEMPER_CHECK(j.is_object()) << path << ":" << l.number << ": expected a JSON object, got " << j.type_name();
  return j;
}

int64_t row_step(const std::string& path, const Line& l, const ojson& j) {
  auto it = j.find("step");
  TEMPER_CHECK(it != j.end()) << path << ":" << l.number << ": field 'step' is missing (every row needs an integer step)";
  TEMPER_CHECK(it->is_number_integer())
      << path << ":" << l.number << ": field 'step' must be an integer, got " << it->dump();
  return it->get<int64_t>();
}

}  // namespace

std::string json_number(double v) { return nlohmann::json(v).dump(); }  // non-finite -> null

// ---- MetricsFanout ----

void MetricsFanout::add(std::unique_ptr<MetricsSink> sink) {
  TEMPER_CHECK(sink != nullptr) << "MetricsFanout::add: null sink";
  sinks_.push_back(std::move(sink));
}
void MetricsFanout::write(int64_t step, const std::string& kind, const MetricValues& values) {
  for (auto& s : sinks_) s->write(step, kind, values);
}
void MetricsFanout::flush() {
  for (auto& s : sinks_) s->flush();
}

// ---- JsonlFile ----

JsonlFile::JsonlFile(JsonlFile&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }
JsonlFile& JsonlFile::operator=(JsonlFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}
JsonlFile::~JsonlFile() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonlFile::open_append() {
  fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    TEMPER_CHECK(!ec) << parent.string() << ": cannot create directory (" << ec.message() << ")";
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  TEMPER_CHECK(fd_ >= 0) << path_ << ": cannot open for appending (" << std::strerror(errno) << ")";
}

JsonlFile JsonlFile::create(const std::string& path) {
  JsonlFile f;
  f.path_ = path;
  f.open_append();
  TEMPER_CHECK(::ftruncate(f.fd_, 0) == 0) << path << ": cannot truncate (" << std::strerror(errno) << ")";
  return f;
}

JsonlFile JsonlFile::resume_after_step(const std::string& path, int64_t step) {
  if (fs::exists(path)) {
    std::vector<Line> lines = read_lines(path);
    std::string kept;
    for (size_t i = 0; i < lines.size(); ++i) {
      auto j = parse_row(path, lines[i], i + 1 == lines.size());
      if (!j) continue;
      if (row_step(path, lines[i], *j) <= step) kept += lines[i].text + "\n";
    }
    io::write_text_atomic(path, kept);
  }
  JsonlFile f;
  f.path_ = path;
  f.open_append();
  return f;
}

void JsonlFile::append_line(const std::string& line) {
  TEMPER_CHECK(fd_ >= 0) << "JsonlFile: write to a closed file";
  TEMPER_CHECK(line.find('\n') == std::string::npos) << path_ << ": a JSONL row cannot contain a raw newline";
  std::string buf = line + "\n";
  const char* p = buf.data();
  size_t left = buf.size();
  while (left > 0) {  // one write(2) in practice; loop for short writes and EINTR
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    TEMPER_CHECK(n > 0) << path_ << ": write failed (" << std::strerror(errno) << ")";
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void JsonlFile::flush() {
  if (fd_ < 0) return;
  TEMPER_CHECK(::fsync(fd_) == 0) << path_ << ": fsync failed (" << std::strerror(errno) << ")";
}

// ---- JsonlMetrics ----

std::unique_ptr<JsonlMetrics> JsonlMetrics::create(const std::string& path) {
  return std::unique_ptr<JsonlMetrics>(new JsonlMetrics(JsonlFile::create(path)));
}
std::unique_ptr<JsonlMetrics> JsonlMetrics::resume_after_step(const std::string& path, int64_t step) {
  return std::unique_ptr<JsonlMetrics>(new JsonlMetrics(JsonlFile::resume_after_step(path, step)));
}

void JsonlMetrics::write(int64_t step, const std::string& kind, const MetricValues& values) {
  ojson j;
  j["step"] = step;
  j["kind"] = kind;
  for (const auto& [k, v] : values) {
    TEMPER_CHECK(k != "step" && k != "kind") << path() << ": metric name '" << k << "' is reserved";
    j[k] = v;  // NaN/inf dump as null
  }
  file_.append_line(dump_line(j));
}
void JsonlMetrics::flush() { file_.flush(); }

// ---- SamplesJsonl ----

std::unique_ptr<SamplesJsonl> SamplesJsonl::create(const std::string& path) {
  return std::unique_ptr<SamplesJsonl>(new SamplesJsonl(JsonlFile::create(path)));
}
std::unique_ptr<SamplesJsonl> SamplesJsonl::resume_after_step(const std::string& path, int64_t step) {
  return std::unique_ptr<SamplesJsonl>(new SamplesJsonl(JsonlFile::resume_after_step(path, step)));
}

void SamplesJsonl::write(const Sample& s) {
  ojson j;
  j["step"] = s.step;
  j["prompt"] = s.prompt;
  j["completion"] = s.completion;
  j["reward"] = s.reward;
  if (s.answer) j["answer"] = *s.answer;
  if (s.correct) j["correct"] = *s.correct;
  for (const auto& [name, x] : s.terms) j["rewards"][name] = x;
  for (const auto& [name, x] : s.components) j["components"][name] = x;
  if (!s.info.empty()) j["info"] = s.info;
  file_.append_line(dump_line(j));
}
void SamplesJsonl::flush() { file_.flush(); }

// ---- readers ----

std::vector<MetricsRow> read_metrics_jsonl(const std::string& path) {
  std::vector<Line> lines = read_lines(path);
  std::vector<MetricsRow> rows;
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    auto j = parse_row(path, l, i + 1 == lines.size());
    if (!j) continue;
    MetricsRow r;
    r.step = row_step(path, l, *j);
    bool has_eval_key = false;
    for (auto it = j->begin(); it != j->end(); ++it) {
      const std::string& k = it.key();
      if (k == "step") continue;
      if (k == "kind") {
        TEMPER_CHECK(it->is_string()) << path << ":" << l.number << ": field 'kind' must be a string (train, eval or sft), got "
                                      << it->dump();
        r.kind = it->get<std::string>();
        continue;
      }
      if (it->is_number()) {
        r.values.emplace_back(k, it->get<double>());
      } else if (it->is_null()) {
        r.values.emplace_back(k, std::numeric_limits<double>::quiet_NaN());
      } else if (it->is_boolean()) {
        r.values.emplace_back(k, it->get<bool>() ? 1.0 : 0.0);
      } else {
        continue;  // strings, arrays, objects: not a scalar metric
      }
      if (k.rfind("eval_", 0) == 0) has_eval_key = true;
    }
    if (r.kind.empty()) r.kind = has_eval_key ? "eval" : "train";
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<Sample> read_samples_jsonl(const std::string& path) {
  std::vector<Line> lines = read_lines(path);
  std::vector<Sample> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    auto j = parse_row(path, l, i + 1 == lines.size());
    if (!j) continue;
    Sample s;
    s.step = row_step(path, l, *j);
    auto str = [&](const char* field, bool required) -> std::optional<std::string> {
      auto it = j->find(field);
      if (it == j->end() || it->is_null()) {
        TEMPER_CHECK(!required) << path << ":" << l.number << ": field '" << field << "' is missing";
        return std::nullopt;
      }
      TEMPER_CHECK(it->is_string()) << path << ":" << l.number << ": field '" << field << "' must be a string, got "
                                    << it->type_name();
      return it->get<std::string>();
    };
    s.prompt = *str("prompt", true);
    s.completion = *str("completion", true);
    s.answer = str("answer", false);
    auto rw = j->find("reward");
    TEMPER_CHECK(rw != j->end()) << path << ":" << l.number << ": field 'reward' is missing";
    TEMPER_CHECK(rw->is_number() || rw->is_null())
        << path << ":" << l.number << ": field 'reward' must be a number, got " << rw->dump();
    s.reward = rw->is_null() ? std::numeric_limits<double>::quiet_NaN() : rw->get<double>();
    auto c = j->find("correct");
    if (c != j->end() && !c->is_null()) {
      TEMPER_CHECK(c->is_boolean()) << path << ":" << l.number << ": field 'correct' must be true or false, got "
                                    << c->dump();
      s.correct = c->get<bool>();
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace temper::report
