#include "temper/env/program_environment.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <thread>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/reward/program_reward.h"

namespace temper::env {

namespace {

using ojson = nlohmann::ordered_json;
using reward::ChildProcess;

using reward::command_text;
using reward::shorten;

// Model text may hold invalid UTF-8 (a cut character): replaced, never an exception.
std::string dump(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

void read_extras(const ojson& r, EnvReply& out, const char* what) {
  if (auto c = r.find("correct"); c != r.end() && !c->is_null()) {
    TEMPER_CHECK(c->is_boolean()) << what << ": \"correct\" must be true or false, got " << shorten(dump(*c));
    out.correct = c->get<bool>();
  }
  if (auto c = r.find("components"); c != r.end() && !c->is_null()) {
    TEMPER_CHECK(c->is_object()) << what << ": \"components\" must be an object of numbers, got " << shorten(dump(*c));
    for (auto& [k, v] : c->items()) {
      TEMPER_CHECK(v.is_number() && std::isfinite(v.get<double>()))
          << what << ": components." << k << " must be a finite number, got " << shorten(dump(v));
      out.components.emplace_back(k, v.get<double>());
    }
  }
  if (auto in = r.find("info"); in != r.end() && !in->is_null())
    out.info = in->is_string() ? in->get<std::string>() : dump(*in);
}

}  // namespace

EnvReply parse_reset_reply(const ojson& r) {
  TEMPER_CHECK(r.is_object()) << "reset reply: must be an object {\"messages\": [...], \"tools\": [...]}, got "
                              << shorten(dump(r));
  EnvReply out;
  auto m = r.find("messages");
  TEMPER_CHECK(m != r.end()) << "reset reply: no \"messages\" (the first messages of the conversation)";
  check_messages(*m, "reset reply: messages");
  TEMPER_CHECK(!m->empty()) << "reset reply: messages must hold at least one message";
  out.messages = *m;
  if (auto t = r.find("tools"); t != r.end()) {
    check_tools(*t, "reset reply: tools");
    out.tools = *t;
  }
  read_extras(r, out, "reset reply");
  return out;
}

EnvReply parse_step_reply(const ojson& r) {
  TEMPER_CHECK(r.is_object()) << "step reply: must be an object {\"messages\", \"reward\", \"done\"}, got "
                              << shorten(dump(r));
  EnvReply out;
  auto m = r.find("messages");
  TEMPER_CHECK(m != r.end()) << "step reply: no \"messages\" (the observations; [] for none)";
  check_messages(*m, "step reply: messages");
  out.messages = *m;
  auto rw = r.find("reward");
  TEMPER_CHECK(rw != r.end()) << "step reply: no \"reward\" (this turn's reward; 0 for none)";
  TEMPER_CHECK(rw->is_number() && std::isfinite(rw->get<double>()))
      << "step reply: \"reward\" must be a finite number, got " << shorten(dump(*rw));
  out.reward = rw->get<double>();
  auto d = r.find("done");
  TEMPER_CHECK(d != r.end()) << "step reply: no \"done\" (true when the episode is over)";
  TEMPER_CHECK(d->is_boolean()) << "step reply: \"done\" must be true or false, got " << shorten(dump(*d));
  out.done = d->get<bool>();
  read_extras(r, out, "step reply");
  return out;
}

EnvReply parse_run_reply(const ojson& r) {
  TEMPER_CHECK(r.is_object()) << "run reply: must be an object {\"reward\": x}, got " << shorten(dump(r));
  EnvReply out;
  auto rw = r.find("reward");
  TEMPER_CHECK(rw != r.end()) << "run reply: no \"reward\" (the episode's return)";
  TEMPER_CHECK(rw->is_number() && std::isfinite(rw->get<double>()))
      << "run reply: \"reward\" must be a finite number, got " << shorten(dump(*rw));
  out.reward = rw->get<double>();
  out.done = true;
  read_extras(r, out, "run reply");
  return out;
}

ojson parse_reply_line(const std::string& line, const char* what) {
  ojson r;
  try {
    r = ojson::parse(line);
  } catch (const ojson::exception& e) {  // parse_error, and out_of_range for a number beyond double (1e999)
    TEMPER_FAIL() << "malformed reply to " << what << ": not JSON (" << e.what() << "): " << shorten(line);
  }
  TEMPER_CHECK(r.is_object()) << "malformed reply to " << what << ": not a JSON object: " << shorten(line);
  return r;
}

ProgramEnvironment::ProgramEnvironment(EnvOptions opt) : opt_(std::move(opt)) {
  opt_.validate();
  TEMPER_CHECK(opt_.kind == "program") << "env.kind: ProgramEnvironment runs kind \"program\", got '" << opt_.kind
                                       << "'";
  name_ = "program";
  if (auto n = opt_.params.find("name"); n != opt_.params.end()) {
    TEMPER_CHECK(n->is_string() && !n->get<std::string>().empty()) << "env.params.name: must be a non-empty string";
    name_ = n->get<std::string>();
  }
  for (int64_t k = 0; k < opt_.workers; ++k) {
    workers_.push_back(std::make_unique<Worker>());
    workers_.back()->index = static_cast<int>(k);
  }
}

ProgramEnvironment::~ProgramEnvironment() {
  for (auto& w : workers_)
    if (w->proc) w->proc->close(1.0);
}

std::string ProgramEnvironment::worker_name(int k) const {
  return "env '" + name_ + "' worker " + std::to_string(k) + " (" + command_text(opt_.program) + ")";
}

void ProgramEnvironment::warn(const std::string& text) {
  const int64_t n = ++logged_;
  if (n > 20 && n % 100 != 0) return;
  std::lock_guard<std::mutex> lock(log_mu_);
  TEMPER_LOG(warn) << text << " (failed episodes so far " << failures_.load() << ")";
}

void ProgramEnvironment::start_worker(Worker& w) {
  reward::SpawnOptions so;
  so.argv = opt_.program;
  so.env = opt_.env;
  so.env.push_back("PYTHONUNBUFFERED=1");
  so.what = worker_name(w.index);
  w.broken = true;  // until the greeting is answered
  w.proc = ChildProcess::spawn(so);
  ojson hello = {{"type", "hello"},   {"protocol", kEnvProtocol}, {"name", name_},
                 {"worker", w.index}, {"workers", opt_.workers},  {"params", opt_.params}};
  std::string line;
  const ChildProcess::Status st = w.proc->exchange(dump(hello), line, opt_.start_timeout_s);
  std::string why;
  if (st == ChildProcess::Status::timeout) {
    std::ostringstream s;
    s << "did not answer the greeting within start_timeout_s = " << opt_.start_timeout_s << " s";
    why = s.str();
  } else if (st == ChildProcess::Status::closed) {
    w.proc->close(1.0);  // it is probably exiting: wait for its status
    why = "closed its output before answering the greeting (" + w.proc->exit_description() + ")";
  } else {
    why = reward::program_greeting_problem(line);
  }
  if (why.empty()) {
    if (w.started_once) ++restarts_;
    w.started_once = true;
    w.broken = false;
    return;
  }
  w.proc->kill();
  const std::string tail = w.proc->stderr_tail();
  w.proc.reset();
  TEMPER_FAIL() << so.what << " " << why << (tail.empty() ? "" : "; its stderr: " + tail);
}

void ProgramEnvironment::start() {
  std::vector<std::string> errors(workers_.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < workers_.size(); ++k)
    threads.emplace_back([this, k, &errors] {
      Worker& w = *workers_[k];
      std::lock_guard<std::mutex> lock(w.mu);
      if (w.proc) return;
      try {
        start_worker(w);
      } catch (const Error& e) {
        errors[k] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) TEMPER_CHECK(e.empty()) << e;
}

void ProgramEnvironment::kill_worker(Worker& w, const std::string& episode, const std::string& why) {
  std::string tail;
  if (w.proc) {
    w.proc->kill();
    tail = w.proc->stderr_tail();
    w.proc.reset();  // started again for the next episode
  }
  const std::string full = why + (tail.empty() ? "" : "; its stderr: " + tail);
  const int64_t g = w.generation++;
  int64_t lost = 0;
  {
    std::lock_guard<std::mutex> lock(episodes_mu_);
    for (auto& [id, ep] : episodes_) {
      if (ep.worker != w.index || ep.generation != g || ep.lost) continue;
      ep.lost = true;
      --w.load;
      if (!ep.failed.empty()) continue;  // already over (an error reply): its state is gone, nothing more to say
      if (id == episode) {
        ep.failed = worker_name(w.index) + ": " + full + "; the worker was killed and is restarted for later episodes";
      } else {
        ep.failed = "episode lost: worker " + std::to_string(w.index) + " was restarted after: " + full;
        ++lost;
      }
      ++failures_;
    }
  }
  warn(worker_name(w.index) + ": " + full + "; killed, to be restarted for later episodes" +
       (episode.empty() ? "" : "; episode '" + episode + "' failed") +
       (lost ? " and " + std::to_string(lost) + " other episode(s) pinned to it were lost" : ""));
}

ProgramEnvironment::Call ProgramEnvironment::call(Worker& w, const std::string& episode, const ojson& request,
                                                  const char* what) {
  Call c;
  if (!w.proc) {
    try {
      start_worker(w);
    } catch (const Error& e) {
      c.why = std::string("could not be restarted: ") + e.what();
      warn(worker_name(w.index) + " " + c.why);
      return c;
    }
  }
  std::string line;
  const ChildProcess::Status st = w.proc->exchange(dump(request), line, opt_.timeout_s);
  std::ostringstream why;
  if (st == ChildProcess::Status::timeout) {
    why << "no answer to " << what << " within timeout_s = " << opt_.timeout_s << " s";
  } else if (st == ChildProcess::Status::closed) {
    w.proc->close(0.5);  // it is probably exiting: its status, not our kill, says why
    why << "stopped answering during " << what << " (" << w.proc->exit_description() << ")";
  } else {
    try {
      c.reply = parse_reply_line(line, what);
      c.ok = true;
      return c;
    } catch (const Error& e) {
      why << e.what();
    }
  }
  c.why = why.str();
  kill_worker(w, episode, c.why);
  return c;
}

// A call's reply as the episode's EnvReply: a failed call, an {"error"} reply or one `parse` refuses fails the
// episode (logged, naming the worker); else what `parse` read.
EnvReply ProgramEnvironment::answer(const Worker& w, const std::string& episode, const Call& c, const char* what,
                                    EnvReply (*parse)(const ojson&)) {
  if (!c.ok) return fail(episode, c.why);
  std::string why;
  if (auto e = c.reply.find("error"); e != c.reply.end()) {
    why = worker_name(w.index) + ": the environment reported an error at " + what + ": " +
          shorten(e->is_string() ? e->get<std::string>() : dump(*e), 2000);
  } else {
    try {
      return parse(c.reply);
    } catch (const Error& e) {
      why = worker_name(w.index) + ": " + e.what();
    }
  }
  EnvReply r = fail(episode, why);
  warn(why);
  return r;
}

EnvReply ProgramEnvironment::fail(const std::string& episode, const std::string& why) {
  EnvReply r;
  r.ok = false;
  std::lock_guard<std::mutex> lock(episodes_mu_);
  auto it = episodes_.find(episode);
  if (it == episodes_.end()) {
    r.error = why;
    return r;
  }
  if (it->second.failed.empty()) {
    it->second.failed = why;
    ++failures_;
  }
  r.error = it->second.failed;
  return r;
}

int ProgramEnvironment::worker_of(const std::string& episode) const {
  std::lock_guard<std::mutex> lock(episodes_mu_);
  auto it = episodes_.find(episode);
  return it == episodes_.end() ? -1 : it->second.worker;
}

// Pins a new episode to the least-loaded worker (the lowest index on ties; one whose last start failed only when
// all did) and starts that worker if it is down. Null with `refusal` set when it cannot.
ProgramEnvironment::Worker* ProgramEnvironment::open_episode(const std::string& episode, EnvReply& refusal) {
  Worker* w = nullptr;
  {
    std::lock_guard<std::mutex> lock(episodes_mu_);
    if (episodes_.count(episode)) {
      refusal.ok = false;
      refusal.error = "episode '" + episode + "' was reset twice (episode ids must be unique)";
      return nullptr;
    }
    for (auto& cand : workers_) {
      const bool better = !w || (w->broken && !cand->broken) || (w->broken == cand->broken && cand->load < w->load);
      if (better) w = cand.get();
    }
    ++w->load;
    episodes_[episode].worker = w->index;
  }
  w->mu.lock();
  if (!w->proc) {
    try {
      start_worker(*w);
    } catch (const Error& e) {
      w->mu.unlock();
      const std::string why = worker_name(w->index) + " could not be restarted: " + e.what();
      refusal = fail(episode, why);
      warn(why);
      return nullptr;
    }
  }
  std::lock_guard<std::mutex> lock(episodes_mu_);
  episodes_[episode].generation = w->generation;
  return w;  // its mutex held
}

EnvReply ProgramEnvironment::reset(const std::string& episode, const ojson& row) {
  EnvReply refusal;
  Worker* w = open_episode(episode, refusal);
  if (!w) return refusal;
  std::lock_guard<std::mutex> wlock(w->mu, std::adopt_lock);
  return answer(*w, episode, call(*w, episode, ojson{{"type", "reset"}, {"episode", episode}, {"row", row}}, "reset"),
                "reset", parse_reset_reply);
}

EnvReply ProgramEnvironment::step(const std::string& episode, const ojson& message) {
  Worker* w = nullptr;
  int64_t g = -1;
  {
    std::lock_guard<std::mutex> lock(episodes_mu_);
    auto it = episodes_.find(episode);
    if (it == episodes_.end()) {
      EnvReply r;
      r.ok = false;
      r.error = "step for episode '" + episode + "', which was never reset or is closed";
      return r;
    }
    if (!it->second.failed.empty()) {  // over: lost to a worker restart, or failed before
      EnvReply r;
      r.ok = false;
      r.error = it->second.failed;
      return r;
    }
    w = workers_[static_cast<size_t>(it->second.worker)].get();
    g = it->second.generation;
  }
  std::lock_guard<std::mutex> wlock(w->mu);
  {
    std::lock_guard<std::mutex> lock(episodes_mu_);
    const Episode& ep = episodes_.at(episode);
    if (!ep.failed.empty()) {  // lost while we waited for the worker
      EnvReply r;
      r.ok = false;
      r.error = ep.failed;
      return r;
    }
  }
  TEMPER_CHECK(w->generation == g && w->proc)
      << "env '" << name_ << "': episode '" << episode << "' outlived its worker unnoticed (a bug)";
  return answer(*w, episode,
                call(*w, episode, ojson{{"type", "step"}, {"episode", episode}, {"message", message}}, "step"), "step",
                parse_step_reply);
}

EnvReply ProgramEnvironment::run(const std::string& episode, const ojson& row, const ojson& endpoint) {
  EnvReply refusal;
  Worker* w = open_episode(episode, refusal);
  if (!w) return refusal;
  std::lock_guard<std::mutex> wlock(w->mu, std::adopt_lock);
  ojson req{{"type", "run"}, {"episode", episode}, {"row", row}};
  for (auto& [k, v] : endpoint.items()) req[k] = v;
  return answer(*w, episode, call(*w, episode, req, "run"), "run", parse_run_reply);
}

void ProgramEnvironment::close(const std::string& episode) {
  Worker* w = nullptr;
  int64_t g = -1;
  {
    std::lock_guard<std::mutex> lock(episodes_mu_);
    auto it = episodes_.find(episode);
    if (it == episodes_.end()) return;
    const Episode ep = it->second;
    episodes_.erase(it);
    if (ep.lost) return;  // the worker that held it was killed
    w = workers_[static_cast<size_t>(ep.worker)].get();
    --w->load;
    g = ep.generation;
  }
  std::lock_guard<std::mutex> wlock(w->mu);
  if (w->generation != g || !w->proc) return;  // killed since, or never reached the worker
  Call c = call(*w, "", ojson{{"type", "close"}, {"episode", episode}}, "close");
  if (c.ok && !c.reply.value("ok", false))
    warn(worker_name(w->index) + ": close of episode '" + episode + "' answered " + shorten(dump(c.reply)));
}

}  // namespace temper::env
