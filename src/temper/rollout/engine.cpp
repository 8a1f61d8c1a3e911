#include "temper/rollout/engine.h"

#include <cmath>
#include <deque>

#include "temper/core/error.h"
#include "temper/kernels/classifier.h"

namespace temper::rollout {

std::string finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::hook: return "hook";
  }
  return "?";
}

RolloutEngine::RolloutEngine(Transformer& model, KvPool& pool, EngineConfig cfg) : model_(model), pool_(pool), cfg_(cfg) {
  TEMPER_CHECK(cfg_.max_seqs > 0) << "rollout engine: max_seqs must be > 0";
}

namespace {

struct Live {
  int64_t req, member, out;  // out: index into completions
  SeqKv kv;
  Rng rng;
  Sampler sampler;
  int32_t pending = -1;  // sampled, not yet fed to the model
};

}  // namespace

std::vector<Completion> RolloutEngine::run(const std::vector<RolloutRequest>& requests, RolloutHook* hook) {
  const int64_t V = model_.config().vocab_size;
  std::vector<Completion> out;
  std::vector<int64_t> first_out(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    const RolloutRequest& q = requests[r];
    TEMPER_CHECK(!q.prompt.empty() && q.group_size > 0 && q.max_new > 0)
        << "rollout request " << r << ": needs a prompt, group_size > 0 and max_new > 0";
    TEMPER_CHECK(static_cast<int64_t>(q.prompt.size()) + q.max_new <= model_.config().max_position_embeddings)
        << "rollout request " << r << ": prompt " << q.prompt.size() << " + max_new " << q.max_new
        << " exceeds the model's context " << model_.config().max_position_embeddings;
    first_out[r] = static_cast<int64_t>(out.size());
    for (int64_t g = 0; g < q.group_size; ++g) {
      Completion c;
      c.request = static_cast<int64_t>(r);
      c.member = g;
      out.push_back(std::move(c));
    }
  }
  std::deque<int64_t> queue;
  for (size_t r = 0; r < requests.size(); ++r) queue.push_back(static_cast<int64_t>(r));
  std::vector<Live> live;
  std::vector<int32_t> tok, pos;
  std::vector<const int32_t*> tables;
  std::vector<int64_t> rows;
  std::vector<float> logits;

  auto finish = [&](Live& s, FinishReason why) {
    out[static_cast<size_t>(s.out)].finish = why;
    pool_.release(s.kv);
  };
  while (!queue.empty() || !live.empty()) {
    tok.clear();
    pos.clear();
    tables.clear();
    rows.clear();
    // Decodes: every live sequence feeds the token it sampled last.
    std::vector<int64_t> row_of_live(live.size());
    for (size_t i = 0; i < live.size(); ++i) {
      Live& s = live[i];
      pool_.reserve(s.kv, 1);
      tok.push_back(s.pending);
      pos.push_back(static_cast<int32_t>(s.kv.len));
      tables.push_back(s.kv.blocks.data());
      row_of_live[i] = static_cast<int64_t>(tok.size()) - 1;
      rows.push_back(row_of_live[i]);
    }
    // Admissions: prefill whole prompts while the group fits (its blocks are shared after the fork).
    std::vector<std::pair<int64_t, SeqKv>> admitted;
    while (!queue.empty()) {
      const RolloutRequest& q = requests[static_cast<size_t>(queue.front())];
      int64_t plen = static_cast<int64_t>(q.prompt.size());
      int64_t need = (plen + pool_.block_size() - 1) / pool_.block_size() + q.group_size;  // + one block each to grow
      if (static_cast<int64_t>(live.size()) + q.group_size > cfg_.max_seqs || need > pool_.free_blocks()) break;
      SeqKv root;
      pool_.reserve(root, plen);
      for (int64_t p = 0; p < plen; ++p) {
        tok.push_back(q.prompt[static_cast<size_t>(p)]);
        pos.push_back(static_cast<int32_t>(p));
      }
      admitted.emplace_back(queue.front(), std::move(root));
      queue.pop_front();
    }
    TEMPER_CHECK(!tok.empty()) << "rollout: the KV pool (" << pool_.num_blocks() << " blocks of " << pool_.block_size()
                               << ") cannot hold request " << (queue.empty() ? -1 : queue.front())
                               << "; raise the KV memory budget";
    for (auto& [r, root] : admitted) {  // tables of the prompt rows (after all reserves: stable pointers)
      for (size_t p = 0; p < requests[static_cast<size_t>(r)].prompt.size(); ++p) tables.push_back(root.blocks.data());
      rows.push_back(static_cast<int64_t>(tables.size()) - 1);
    }
    logits.resize(rows.size() * static_cast<size_t>(V));
    PagedStep st;
    st.n = static_cast<int64_t>(tok.size());
    st.tokens = tok.data();
    st.pos = pos.data();
    st.tables = tables.data();
    st.out_rows = rows.data();
    st.n_out = static_cast<int64_t>(rows.size());
    st.logits = logits.data();
    model_.forward_paged(st, pool_);

    auto emit = [&](Live& s, const float* z) -> bool {  // sample, record; true if the sequence ends here
      const RolloutRequest& q = requests[static_cast<size_t>(s.req)];
      Completion& c = out[static_cast<size_t>(s.out)];
      Sample x = s.sampler.sample(z, V, s.rng);
      float lp, ent;
      kernels::logit_row_stats(z, V, x.token, &lp, &ent);  // the training classifier's arithmetic
      c.tokens.push_back(x.token);
      c.sample_logprob.push_back(x.logprob);
      c.policy_logprob.push_back(lp);
      c.entropy.push_back(ent);
      s.pending = x.token;
      if (q.stop_ids.count(x.token)) return finish(s, FinishReason::stop), true;
      if (hook && hook->after_token(q, c)) return finish(s, FinishReason::hook), true;
      if (static_cast<int64_t>(c.tokens.size()) >= q.max_new) return finish(s, FinishReason::length), true;
      return false;
    };
    std::vector<Live> next;
    for (size_t i = 0; i < live.size(); ++i) {
      pool_.advance(live[i].kv, 1);
      if (!emit(live[i], logits.data() + i * V)) next.push_back(std::move(live[i]));
    }
    for (size_t a = 0; a < admitted.size(); ++a) {
      auto& [r, root] = admitted[a];
      const RolloutRequest& q = requests[static_cast<size_t>(r)];
      pool_.advance(root, static_cast<int64_t>(q.prompt.size()));
      const float* z = logits.data() + (live.size() + a) * V;
      for (int64_t g = 0; g < q.group_size; ++g) {
        Live s{r, g, first_out[static_cast<size_t>(r)] + g, pool_.fork(root, root.len),
               Rng(q.seed, q.stream + static_cast<uint64_t>(g)), Sampler(q.sampler)};
        if (!emit(s, z)) next.push_back(std::move(s));
      }
      pool_.release(root);  // the members hold the prompt's blocks now
    }
    live = std::move(next);
  }
  return out;
}

}  // namespace temper::rollout
