#include "temper/reward/program_reward.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "temper/core/error.h"
#include "temper/core/log.h"

namespace temper::reward {

namespace {

using json = nlohmann::json;

ProgramScore parse_result(const json& r, size_t i) {
  ProgramScore s;
  if (r.is_number()) {
    s.reward = r.get<double>();
  } else if (r.is_object()) {
    if (auto e = r.find("error"); e != r.end()) {
      s.error = "the worker reported an error for item " + std::to_string(i) + ": " +
                shorten(e->is_string() ? e->get<std::string>() : e->dump());
      return s;
    }
    auto rw = r.find("reward");
    TEMPER_CHECK(rw != r.end() && rw->is_number())
        << "result " << i << " has no numeric \"reward\" (got " << shorten(r.dump()) << ")";
    s.reward = rw->get<double>();
    if (auto c = r.find("components"); c != r.end()) {
      TEMPER_CHECK(c->is_object()) << "result " << i << ": \"components\" must be an object of numbers";
      for (auto& [k, v] : c->items()) {
        TEMPER_CHECK(v.is_number()) << "result " << i << ": component \"" << k << "\" is not a number";
        s.components.emplace_back(k, v.get<double>());
      }
    }
    if (auto in = r.find("info"); in != r.end()) s.info = in->is_string() ? in->get<std::string>() : in->dump();
    if (auto c = r.find("correct"); c != r.end()) {
      TEMPER_CHECK(c->is_boolean()) << "result " << i << ": \"correct\" must be true or false";
      s.correct = c->get<bool>();
    }
  } else {
    TEMPER_FAIL() << "result " << i << " must be a number or an object, got " << shorten(r.dump());
  }
  if (!std::isfinite(s.reward)) {
    s.error = "result " + std::to_string(i) + " has a reward that is not finite";
    return s;
  }
  s.ok = true;
  return s;
}

}  // namespace

void ProgramOptions::validate() const {
  TEMPER_CHECK(!command.empty() && !command[0].empty()) << "reward '" << name << "': program must name a command";
  TEMPER_CHECK(workers >= 1 && workers <= 256) << "reward '" << name << "': workers must be in [1, 256], got " << workers;
  TEMPER_CHECK(timeout_s > 0 && std::isfinite(timeout_s))
      << "reward '" << name << "': timeout_s must be > 0, got " << timeout_s;
  TEMPER_CHECK(start_timeout_s > 0 && std::isfinite(start_timeout_s))
      << "reward '" << name << "': start_timeout_s must be > 0, got " << start_timeout_s;
}

std::vector<ProgramScore> parse_program_reply(const std::string& line, size_t n) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number beyond double (1e999)
    TEMPER_FAIL() << "the reply is not JSON (" << e.what() << "): " << shorten(line);
  }
  const json* results = &j;
  if (j.is_object()) {
    auto it = j.find("results");
    TEMPER_CHECK(it != j.end()) << "the reply has no \"results\": " << shorten(line);
    results = &*it;
  }
  TEMPER_CHECK(results->is_array()) << "\"results\" must be an array, got " << shorten(results->dump());
  TEMPER_CHECK(results->size() == n) << "the reply has " << results->size() << " results for " << n << " items";
  std::vector<ProgramScore> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(parse_result((*results)[i], i));
  return out;
}

std::string program_greeting_problem(const std::string& line) {
  json r;
  try {
    r = json::parse(line);
  } catch (const json::exception&) {  // parse_error, and out_of_range for a number beyond double (1e999)
    return "answered the greeting with a line that is not JSON: " + shorten(line);
  }
  // Only true: value("ready", false) threw a type_error for {"ready": 1}, past the callers' catch.
  const bool ready = r.is_object() && r.contains("ready") && r["ready"].is_boolean() && r["ready"].get<bool>();
  return ready ? "" : "answered the greeting without {\"ready\": true}: " + shorten(line);
}

ProgramReward::ProgramReward(ProgramOptions opt) : opt_(std::move(opt)) {
  opt_.validate();
  workers_.resize(static_cast<size_t>(opt_.workers));
  for (size_t k = 0; k < workers_.size(); ++k) workers_[k].index = static_cast<int>(k);
}

ProgramReward::~ProgramReward() {
  for (Worker& w : workers_)
    if (w.proc) w.proc->close(1.0);
}

std::string ProgramReward::worker_name(int k) const {
  return "reward '" + opt_.name + "' worker " + std::to_string(k) + " (" + command_text(opt_.command) + ")";
}

void ProgramReward::start_worker(Worker& w) {
  SpawnOptions so;
  so.argv = opt_.command;
  so.env = opt_.env;
  so.env.push_back("PYTHONUNBUFFERED=1");
  so.what = worker_name(w.index);
  w.proc = ChildProcess::spawn(so);
  json hello = {{"type", "hello"},
                {"protocol", kRewardProtocol},
                {"name", opt_.name},
                {"worker", w.index},
                {"workers", opt_.workers}};
  std::string line;
  ChildProcess::Status st = w.proc->exchange(hello.dump(), line, opt_.start_timeout_s);
  std::string why;
  if (st == ChildProcess::Status::timeout)
    why = "did not answer the greeting within start_timeout_s = " + std::to_string(opt_.start_timeout_s) + " s";
  else if (st == ChildProcess::Status::closed) {
    w.proc->close(1.0);  // it is probably exiting: wait for its status
    why = "closed its output before answering the greeting (" + w.proc->exit_description() + ")";
  } else {
    why = program_greeting_problem(line);
  }
  if (why.empty()) {
    if (w.started_once) ++restarts_;
    w.started_once = true;
    return;
  }
  w.proc->kill();
  std::string tail = w.proc->stderr_tail();
  w.proc.reset();
  TEMPER_FAIL() << so.what << " " << why << (tail.empty() ? "" : "; its stderr: " + tail);
}

void ProgramReward::start() {
  std::vector<std::string> errors(workers_.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < workers_.size(); ++k)
    threads.emplace_back([this, k, &errors] {
      try {
        start_worker(workers_[k]);
      } catch (const Error& e) {
        errors[k] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) TEMPER_CHECK(e.empty()) << e;
}

void ProgramReward::fail_chunk(Worker& w, std::vector<ProgramScore>& out, size_t begin, size_t end,
                               const std::string& why, bool kill) {
  std::string tail;
  if (w.proc && kill) {
    w.proc->kill();
    tail = w.proc->stderr_tail();
    w.proc.reset();  // started again for the next batch
  }
  for (size_t i = begin; i < end; ++i) out[i].ok = false, out[i].error = why;
  failures_ += static_cast<int64_t>(end - begin);
  const int64_t n = ++logged_;
  if (n > 20 && n % 100 != 0) return;
  std::lock_guard<std::mutex> lock(log_mu_);
  TEMPER_LOG(warn) << worker_name(w.index) << ": " << why << "; " << (end - begin) << " sample(s) scored as failed"
                   << (kill ? " and the worker restarted for the next batch" : "")
                   << (tail.empty() ? "" : "; its stderr: " + tail) << " (failures so far " << failures_.load() << ")";
}

void ProgramReward::score_chunk(Worker& w, const std::vector<std::string>& items, size_t begin, size_t end,
                                int64_t step, std::vector<ProgramScore>& out) {
  if (!w.proc) {
    try {
      start_worker(w);
    } catch (const Error& e) {
      fail_chunk(w, out, begin, end, std::string("could not be restarted: ") + e.what(), false);
      return;
    }
  }
  std::string req = "{\"type\":\"score\",\"step\":" + std::to_string(step) + ",\"items\":[";
  for (size_t i = begin; i < end; ++i) req += (i > begin ? "," : "") + items[i];
  req += "]}";
  std::string line;
  const ChildProcess::Status st = w.proc->exchange(req, line, opt_.timeout_s);
  if (st == ChildProcess::Status::timeout) {
    std::ostringstream why;
    why << "no answer within timeout_s = " << opt_.timeout_s << " s; killed";
    fail_chunk(w, out, begin, end, why.str(), true);
    return;
  }
  if (st == ChildProcess::Status::closed) {
    w.proc->close(0.5);  // it is probably exiting: its status, not our kill, says why
    fail_chunk(w, out, begin, end, "stopped answering (" + w.proc->exit_description() + ")", true);
    return;
  }
  std::vector<ProgramScore> got;
  try {
    got = parse_program_reply(line, end - begin);
  } catch (const Error& e) {
    fail_chunk(w, out, begin, end, std::string("malformed reply: ") + e.what(), true);
    return;
  }
  for (size_t i = begin; i < end; ++i) {
    out[i] = std::move(got[i - begin]);
    if (!out[i].ok) {
      ++failures_;
      if (const int64_t n = ++logged_; n <= 20 || n % 100 == 0) {
        std::lock_guard<std::mutex> lock(log_mu_);
        TEMPER_LOG(warn) << worker_name(w.index) << ": " << out[i].error << "; the sample is scored as failed";
      }
    }
  }
}

std::vector<ProgramScore> ProgramReward::score(const std::vector<std::string>& items, int64_t step) {
  std::vector<ProgramScore> out(items.size());
  const size_t n = items.size(), W = workers_.size();
  std::vector<std::thread> threads;
  for (size_t k = 0; k < W; ++k) {
    const size_t b = k * n / W, e = (k + 1) * n / W;
    if (b == e) continue;
    if (W == 1 || n <= 1)
      score_chunk(workers_[k], items, b, e, step, out);
    else
      threads.emplace_back([this, k, b, e, step, &items, &out] { score_chunk(workers_[k], items, b, e, step, out); });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace temper::reward
