// Metric sinks of a run: the MetricsSink interface the trainer writes each step's scalars to, the
// metrics.jsonl and samples.jsonl writers (one line per row, written with one write(2) so a crash
// loses at most the row being written) and their readers. Non-finite numbers are written as JSON
// null and read back as NaN. Resuming truncates a file to the rows at or before the checkpoint's step
// (atomic rewrite), so a resumed run's files equal an uninterrupted run's. Leaves out: rotation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace temper::report {

using MetricValues = std::vector<std::pair<std::string, double>>;

// Where the trainer sends a step's scalars. kind: "train", "eval" or "sft".
class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  virtual void write(int64_t step, const std::string& kind, const MetricValues& values) = 0;
  virtual void flush() = 0;
};

// Sends every row to each of its sinks (e.g. JsonlMetrics + TensorBoardWriter).
class MetricsFanout : public MetricsSink {
 public:
  void add(std::unique_ptr<MetricsSink> sink);
  void write(int64_t step, const std::string& kind, const MetricValues& values) override;
  void flush() override;

 private:
  std::vector<std::unique_ptr<MetricsSink>> sinks_;
};

// An append-only JSONL file: one write(2) per line. Shared by JsonlMetrics and SamplesJsonl.
class JsonlFile {
 public:
  JsonlFile() = default;
  JsonlFile(const JsonlFile&) = delete;
  JsonlFile& operator=(const JsonlFile&) = delete;
  JsonlFile(JsonlFile&& o) noexcept;
  JsonlFile& operator=(JsonlFile&& o) noexcept;
  ~JsonlFile();

  // Creates (or empties) path, creating its directory if missing.
  static JsonlFile create(const std::string& path);
  // Keeps the lines whose integer "step" is <= step (an unterminated last line, left by a crash
  // mid-write, is dropped), rewrites the file atomically and opens it for appending. A missing file
  // is created empty.
  static JsonlFile resume_after_step(const std::string& path, int64_t step);

  void append_line(const std::string& line);  // line without its '\n'
  void flush();                               // fsync
  const std::string& path() const { return path_; }

 private:
  void open_append();
  std::string path_;
  int fd_ = -1;
};

// metrics.jsonl: {"step": N, "kind": "train", "reward_mean": 0.5, ...} per row, keys in call order.
class JsonlMetrics : public MetricsSink {
 public:
  static std::unique_ptr<JsonlMetrics> create(const std::string& path);
  static std::unique_ptr<JsonlMetrics> resume_after_step(const std::string& path, int64_t step);

  void write(int64_t step, const std::string& kind, const MetricValues& values) override;
  void flush() override;
  const std::string& path() const { return file_.path(); }

 private:
  explicit JsonlMetrics(JsonlFile f) : file_(std::move(f)) {}
  JsonlFile file_;
};

struct Sample {
  int64_t step = 0;
  std::string prompt, completion;
  double reward = 0;
  std::optional<std::string> answer;  // the reference answer, when the task has one
  std::optional<bool> correct;
  std::vector<std::pair<std::string, double>> terms;       // [[reward]] terms' values, by name
  std::vector<std::pair<std::string, double>> components;  // their named components ("<term>.<name>")
  std::string info;                                        // their info texts
};

// samples.jsonl: {"step", "prompt", "completion", "reward", "answer"?, "correct"?, "rewards"?, "components"?,
// "info"?} per row ("rewards": each [[reward]] term's value by name).
class SamplesJsonl {
 public:
  static std::unique_ptr<SamplesJsonl> create(const std::string& path);
  static std::unique_ptr<SamplesJsonl> resume_after_step(const std::string& path, int64_t step);

  void write(const Sample& s);
  void flush();
  const std::string& path() const { return file_.path(); }

 private:
  explicit SamplesJsonl(JsonlFile f) : file_(std::move(f)) {}
  JsonlFile file_;
};

struct MetricsRow {
  int64_t step = 0;
  std::string kind;     // "train" when the row has none and no eval_* key, else "eval"
  MetricValues values;  // numbers in file order; null -> NaN, true/false -> 1/0
};

// Readers. A line that is not a JSON object, lacks an integer "step", has a non-string "kind", or (in
// samples) a field of the wrong type throws temper::Error naming file:line and the field. Empty
// lines are skipped; so is an unterminated, unparsable last line (a row being written right now).
// Other fields that are strings, arrays or objects are ignored in metrics rows.
std::vector<MetricsRow> read_metrics_jsonl(const std::string& path);
std::vector<Sample> read_samples_jsonl(const std::string& path);

// The JSON text of a double as these files write it: shortest round-trip form, null if not finite.
std::string json_number(double v);

}  // namespace temper::report
