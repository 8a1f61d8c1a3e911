#include "temper/app/run_dir.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "temper/app/checkpoint.h"
#include "temper/core/error.h"
#include "temper/io/atomic_file.h"

namespace fs = std::filesystem;

namespace temper::app {

RunDirKind inspect_run_dir(const std::string& dir) {
  if (!latest_checkpoint(dir).empty()) return RunDirKind::checkpointed;
  const fs::path d(dir);
  if (fs::exists(d / "config.toml") || fs::exists(d / "metrics.jsonl")) return RunDirKind::unstarted;
  return RunDirKind::fresh;
}

std::string recorded_config(const std::string& dir) {
  const fs::path top = fs::path(dir) / "config.toml";
  if (fs::exists(top)) return top.string();
  const std::string ck = latest_checkpoint(dir);
  TEMPER_CHECK(!ck.empty()) << dir << ": no config.toml and no checkpoint: not a temper run directory";
  return (fs::path(ck) / "config.toml").string();
}

void clear_run_outputs(const std::string& dir) {
  const fs::path d(dir);
  for (const char* f : {"metrics.jsonl", "samples.jsonl", "report.html", "curriculum.json"}) fs::remove(d / f);
  if (fs::is_directory(d))
    for (const auto& e : fs::directory_iterator(d))
      if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) fs::remove(e.path());
  fs::remove_all(d / "checkpoints");  // an unstarted run has no complete one: only what a crash left
}

std::vector<std::string> set_aside_newer_checkpoints(const std::string& dir, int64_t step) {
  const fs::path c = fs::path(dir) / "checkpoints", aside = fs::path(dir) / "damaged";
  std::vector<std::string> moved;
  if (!fs::is_directory(c)) return moved;
  for (const auto& e : fs::directory_iterator(c)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) != 0 || n.size() == 5 || n.find_first_not_of("0123456789", 5) != std::string::npos)
      continue;
    if (std::stoll(n.substr(5)) > step) moved.push_back(n);
  }
  for (const std::string& n : moved) {  // after the listing: not while iterating the directory
    fs::create_directories(aside);
    fs::remove_all(aside / n);
    fs::rename(c / n, aside / n);
  }
  std::sort(moved.begin(), moved.end());
  return moved;
}

std::vector<ConfigChange> config_changes(const std::map<std::string, std::string>& before,
                                         const std::map<std::string, std::string>& after,
                                         const std::vector<std::string>& ignored) {
  std::map<std::string, ConfigChange> out;
  for (const auto& [k, v] : before) out[k] = {k, v, ""};
  for (const auto& [k, v] : after) out[k].key = k, out[k].after = v;
  std::vector<ConfigChange> diff;
  for (auto& [k, c] : out)
    if (c.before != c.after && std::find(ignored.begin(), ignored.end(), k) == ignored.end()) diff.push_back(c);
  return diff;
}

std::string describe_changes(const std::vector<ConfigChange>& changes) {
  std::ostringstream s;
  for (size_t i = 0; i < changes.size(); ++i) {
    const ConfigChange& c = changes[i];
    s << (i ? ", " : "") << c.key << " (" << (c.before.empty() ? "unset" : c.before) << " -> "
      << (c.after.empty() ? "unset" : c.after) << ")";
  }
  return s.str();
}

void append_history(const std::string& dir, nlohmann::json event) {
  const fs::path p = fs::path(dir) / "history.jsonl";
  std::string text;
  if (std::ifstream in(p); in) {
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    if (!text.empty() && text.back() != '\n') text += '\n';  // a torn last line (a crash mid-write) stays readable
  }
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char iso[32];
  std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json line = {{"time", iso}};
  line.update(event);
  io::write_text_atomic(p.string(), text + line.dump() + "\n");
}

}  // namespace temper::app
