// ClientRollout (client_rollout.h): a loopback server over an EngineBackend on the policy, a recording
// Backend between them that ties each call to its episode by API key (and imposes the run's sampler, seed
// and token budget), the agents run on a pool of threads, then each episode's calls stitched into
// trajectories.
#include "temper/agent/client_rollout.h"

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "temper/core/error.h"
#include "temper/core/log.h"
#include "temper/serve/engine_backend.h"

namespace temper::agent {

namespace {

using json = nlohmann::ordered_json;

struct Call {
  std::vector<int32_t> prompt;
  std::vector<std::vector<int32_t>> tokens;  // per sample
  std::vector<std::vector<float>> logprobs;
  std::vector<rollout::FinishReason> finish;
  std::vector<bool> done;
};

struct Episode {
  std::string id, key;
  size_t problem = 0;
  uint64_t stream = 0;
  int64_t used = 0;  // tokens generated so far (the budget is rl.max_new)
  std::vector<std::shared_ptr<Call>> calls;
  env::EnvReply reply;
};

// The Backend the loopback server talks to: records every call by episode, then hands it to the engine.
class Recorder final : public serve::Backend {
 public:
  Recorder(serve::Backend& inner, const rollout::RolloutRequest& proto) : inner_(inner), proto_(proto) {}
  void add(Episode& e) { by_key_[e.key] = &e; }
  void submit(std::shared_ptr<serve::GenJob> job) override {
    std::shared_ptr<Call> call = std::make_shared<Call>();
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = by_key_.find(job->client);
      if (it == by_key_.end()) {
        ++refused;
        throw serve::ApiError(401,
                              "unknown API key: in client mode each episode has its own (use the api_key temper "
                              "passed to the agent)",
                              "", "invalid_api_key", "authentication_error");
      }
      Episode& e = *it->second;
      const int64_t left = proto_.max_new - e.used;
      if (left <= 0) {
        ++refused;
        throw serve::ApiError(
            400, "this episode's token budget (rl.max_new = " + std::to_string(proto_.max_new) + ") is spent",
            "max_tokens");
      }
      rollout::RolloutRequest& q = job->request;
      q.sampler = proto_.sampler;
      q.seed = proto_.seed;
      q.stream = e.stream + static_cast<uint64_t>(e.calls.size()) * 1024;
      q.max_new = std::min(q.max_new, left);
      const size_t n = static_cast<size_t>(q.group_size);
      call->prompt = q.prompt;
      call->tokens.resize(n);
      call->logprobs.resize(n);
      call->finish.resize(n, rollout::FinishReason::length);
      call->done.resize(n, false);
      e.calls.push_back(call);
      job->observer = [this, call, ep = &e](const serve::GenEvent& ev) {
        if (ev.kind != serve::GenEvent::Kind::done) return;
        std::lock_guard<std::mutex> l(mu_);
        const size_t m = static_cast<size_t>(ev.member);
        call->tokens[m] = ev.tokens;
        call->logprobs[m] = ev.logprobs;
        call->finish[m] = ev.finish;
        call->done[m] = true;
        ep->used += static_cast<int64_t>(ev.tokens.size());
      };
    }
    inner_.submit(std::move(job));
  }
  int64_t steps() const override { return inner_.steps(); }
  int64_t refused = 0;

 private:
  serve::Backend& inner_;
  const rollout::RolloutRequest& proto_;
  std::mutex mu_;
  std::map<std::string, Episode*> by_key_;
};

bool extends(const std::vector<int32_t>& longer, const std::vector<int32_t>& prefix) {
  return longer.size() > prefix.size() && std::equal(prefix.begin(), prefix.end(), longer.begin());
}

// An episode's calls as trajectories of group `problem`, members numbered from `member`.
void stitch(const Episode& e, int64_t& member, std::vector<rl::Trajectory>& out) {
  rl::Trajectory* cur = nullptr;
  std::vector<int32_t> seq;  // cur's prompt + tokens
  for (const std::shared_ptr<Call>& c : e.calls) {
    for (size_t m = 0; m < c->tokens.size(); ++m) {
      if (!c->done[m]) continue;  // cancelled by its client before it finished
      const bool more = c->tokens.size() == 1 && cur && extends(c->prompt, seq);
      if (!more) {
        rl::Trajectory& t = out.emplace_back();
        t.problem = t.group = static_cast<int64_t>(e.problem);
        t.member = member++;
        t.prompt = c->prompt;
        t.tags.push_back("agent");
        cur = c->tokens.size() == 1 ? &t : nullptr;
        seq = c->prompt;
        if (!cur) {  // n > 1: each sample its own trajectory
          t.tokens = c->tokens[m];
          t.old_logprob = c->logprobs[m];
          t.finish = c->finish[m];
          continue;
        }
      } else {  // the new prompt's tokens past the sequence so far: appended, out of the loss
        const int64_t n = static_cast<int64_t>(c->prompt.size() - seq.size());
        cur->appended.emplace_back(static_cast<int64_t>(cur->tokens.size()), n);
        cur->tokens.insert(cur->tokens.end(), c->prompt.begin() + static_cast<int64_t>(seq.size()), c->prompt.end());
        cur->old_logprob.resize(cur->tokens.size(), 0.f);
        seq = c->prompt;
      }
      cur->tokens.insert(cur->tokens.end(), c->tokens[m].begin(), c->tokens[m].end());
      cur->old_logprob.insert(cur->old_logprob.end(), c->logprobs[m].begin(), c->logprobs[m].end());
      cur->finish = c->finish[m];
      seq.insert(seq.end(), c->tokens[m].begin(), c->tokens[m].end());
    }
  }
}

}  // namespace

ClientRollout::ClientRollout(env::Environment& env, serve::ServedModel model, ClientRolloutConfig cfg)
    : env_(env), model_(std::move(model)), cfg_(cfg) {
  TEMPER_CHECK(cfg_.threads >= 1) << "env.threads must be >= 1 (agents at once), got " << cfg_.threads;
  TEMPER_CHECK(model_.chat_template) << "[env] mode = \"client\": the model needs a chat template";
}

std::vector<rl::Trajectory> ClientRollout::run(rollout::RolloutEngine& engine,
                                               const std::vector<tasks::Problem>& problems, size_t first,
                                               int64_t group_size, const rollout::RolloutRequest& request,
                                               int64_t /*context*/, const std::string& episode_prefix, size_t offset) {
  stats_ = {};
  std::vector<Episode> eps;
  for (size_t p = first; p < problems.size(); ++p)
    for (int64_t g = 0; g < group_size; ++g) {
      Episode& e = eps.emplace_back();
      e.id = episode_prefix + "/" + std::to_string(offset + p) + "/" + std::to_string(g);
      e.key = "temper-" + std::to_string(std::hash<std::string>{}(e.id + std::to_string(request.seed)));
      e.problem = p;
      e.stream = request.stream +
                 static_cast<uint64_t>(offset * static_cast<size_t>(group_size) + eps.size() - 1) * (uint64_t{1} << 32);
    }
  serve::EngineBackend backend(engine.model(), engine.pool(), engine.config());
  Recorder rec(backend, request);
  for (Episode& e : eps) rec.add(e);
  serve::ServeOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.max_concurrency = std::max<int64_t>(64, 8 * cfg_.threads);
  so.max_body_bytes = int64_t{64} << 20;
  serve::Server server(so, model_, rec);
  const int port = server.bind();
  backend.start();
  std::thread http([&] { server.listen(); });
  const json endpoint_base = {{"base_url", "http://127.0.0.1:" + std::to_string(port) + "/v1"}, {"model", model_.name}};
  // The agents: each thread takes the next episode until none is left.
  std::mutex mu;
  size_t next = 0;
  std::vector<std::thread> agents;
  for (int64_t k = 0; k < std::min<int64_t>(cfg_.threads, static_cast<int64_t>(eps.size())); ++k)
    agents.emplace_back([&] {
      for (;;) {
        size_t i;
        {
          std::lock_guard<std::mutex> lk(mu);
          if (next == eps.size()) return;
          i = next++;
        }
        Episode& e = eps[i];
        json endpoint = endpoint_base;
        endpoint["api_key"] = e.key;
        try {
          e.reply = env_.run(e.id, rl::env_row(problems[e.problem], "train"), endpoint);
        } catch (const std::exception& ex) {
          e.reply.ok = false;
          e.reply.error = ex.what();
        }
        try {
          env_.close(e.id);
        } catch (const std::exception&) {  // the episode is over either way
        }
      }
    });
  for (std::thread& t : agents) t.join();
  server.stop();
  http.join();
  backend.shutdown();
  std::vector<rl::Trajectory> out;
  std::map<size_t, int64_t> members;
  for (const Episode& e : eps) {
    const size_t from = out.size();
    stitch(e, members[e.problem], out);
    for (size_t i = from; i < out.size(); ++i) {
      rl::Trajectory& t = out[i];
      t.sample_logprob = t.old_logprob;
      t.entropy.assign(t.tokens.size(), 0.f);
      t.text = model_.tokenizer->decode(t.tokens, /*skip_special=*/true);
      t.scored = true;
      t.reward = e.reply.ok ? e.reply.reward : cfg_.failure_reward;
      t.correct = e.reply.ok && e.reply.correct.value_or(false);
      t.reward_info = e.reply.ok ? e.reply.info : e.reply.error;
      for (const auto& [k, v] : e.reply.components) t.reward_components.emplace_back("env." + k, v);
    }
    ++stats_.episodes;
    stats_.calls += static_cast<int64_t>(e.calls.size());
    stats_.trajectories += static_cast<int64_t>(out.size() - from);
    stats_.failures += e.reply.ok ? 0 : 1;
    stats_.solved += e.reply.ok && e.reply.correct.value_or(false) ? 1 : 0;
    if (!e.reply.ok) {
      TEMPER_LOG(warn) << "env: episode " << e.id << " failed: " << e.reply.error;
    }
  }
  stats_.refused_calls = rec.refused;
  return out;
}

void ClientRollout::metrics(rl::Metrics& m) const {
  const double n = std::max<double>(1, static_cast<double>(stats_.episodes));
  m.emplace_back("env/calls", static_cast<double>(stats_.calls) / n);
  m.emplace_back("env/trajectories", static_cast<double>(stats_.trajectories) / n);
  m.emplace_back("env/failures", static_cast<double>(stats_.failures));
  m.emplace_back("env/solved", static_cast<double>(stats_.solved) / n);
  m.emplace_back("env/refused_calls", static_cast<double>(stats_.refused_calls));
  m.emplace_back("env/episodes", static_cast<double>(stats_.episodes));
}

void ClientRollout::merge_metrics(rl::Metrics& into, const rl::Metrics& block) const {
  rl::merge_metric_blocks(into, block,
                          {{"env/calls", "env/episodes"},
                           {"env/trajectories", "env/episodes"},
                           {"env/failures", ""},
                           {"env/solved", "env/episodes"},
                           {"env/refused_calls", ""},
                           {"env/episodes", ""}});
}

}  // namespace temper::agent
