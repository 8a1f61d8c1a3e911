#include "temper/rollout/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>

#include "temper/core/error.h"
#include "temper/core/profile.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/classifier.h"
#include "temper/model/activation_store.h"
#include "temper/model/int4_drafter.h"
#include "temper/rollout/spec_sampling.h"

namespace temper::rollout {

std::string finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::hook: return "hook";
  }
  return "?";
}

uint64_t fork_stream(uint64_t parent, int64_t k) {  // splitmix64 finaliser of (parent, k)
  uint64_t z = parent * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(k) * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

RolloutEngine::RolloutEngine(Transformer& model, KvPool& pool, EngineConfig cfg) : model_(model), pool_(pool), cfg_(cfg) {
  TEMPER_CHECK(cfg_.max_seqs > 0) << "rollout engine: max_seqs must be > 0";
  TEMPER_CHECK(cfg_.max_step_tokens > 0) << "rollout engine: max_step_tokens must be > 0";
}

namespace {

struct Choice {
  Sample x{};
  float lp = 0, ent = 0;  // under the policy (temperature 1, full vocabulary)
};

struct Live {
  int64_t req = 0, out = 0;  // out: index into the completions
  SeqKv kv;
  Rng rng;
  Sampler sampler;
  int32_t pending = -1;     // sampled, not yet fed to the model
  int64_t forks_made = 0;
  std::string tail;         // the completion's last bytes, for stop strings
  std::vector<int32_t> forced;  // still to emit instead of sampling (front first: kept reversed)
  int64_t max_len = 0;          // completion tokens at most
};

}  // namespace

std::vector<Completion> RolloutEngine::run(const std::vector<RolloutRequest>& requests, RolloutHook* hook) {
  const int64_t V = model_.config().vocab_size, bs = pool_.block_size();
  stats_ = {};
  std::deque<Completion> out;  // references stay valid while forks append
  std::vector<int64_t> first_out(requests.size()), next_member(requests.size());
  size_t max_stop = 0;
  int64_t max_prompt = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    const RolloutRequest& q = requests[r];
    TEMPER_CHECK(!q.prompt.empty() && q.group_size > 0 && q.max_new > 0)
        << "rollout request " << r << ": needs a prompt, group_size > 0 and max_new > 0";
    TEMPER_CHECK(static_cast<int64_t>(q.forced.size()) <= q.max_new)
        << "rollout request " << r << ": " << q.forced.size() << " forced tokens exceed max_new " << q.max_new;
    TEMPER_CHECK(static_cast<int64_t>(q.prompt.size()) + q.max_new <= model_.config().max_position_embeddings)
        << "rollout request " << r << ": prompt " << q.prompt.size() << " + max_new " << q.max_new
        << " exceeds the model's context " << model_.config().max_position_embeddings;
    for (int32_t t : q.prompt)
      TEMPER_CHECK(t >= 0 && t < V) << "rollout request " << r << ": prompt token " << t << " outside the vocabulary [0, " << V << ")";
    q.sampler.validate();
    for (const std::string& s : q.stop_strings) {
      TEMPER_CHECK(!s.empty()) << "rollout request " << r << ": empty stop string";
      TEMPER_CHECK(cfg_.token_bytes) << "rollout request " << r << ": stop strings need EngineConfig::token_bytes";
      max_stop = std::max(max_stop, s.size());
    }
    max_prompt = std::max(max_prompt, static_cast<int64_t>(q.prompt.size()));
    first_out[r] = static_cast<int64_t>(out.size());
    next_member[r] = q.group_size;
    for (int64_t g = 0; g < q.group_size; ++g) {
      Completion& c = out.emplace_back();
      c.request = static_cast<int64_t>(r);
      c.member = g;
      c.stream = q.stream + static_cast<uint64_t>(g);
      c.tokens.reserve(static_cast<size_t>(q.max_new));
      c.sample_logprob.reserve(static_cast<size_t>(q.max_new));
      c.policy_logprob.reserve(static_cast<size_t>(q.max_new));
      c.entropy.reserve(static_cast<size_t>(q.max_new));
    }
  }
  // Step buffers, sized once: the decode loop does not allocate after the first steps.
  std::deque<int64_t> queue;
  for (size_t r = 0; r < requests.size(); ++r) queue.push_back(static_cast<int64_t>(r));
  std::deque<Live> resume;  // preempted: blocks freed, prefix recomputed when they come back
  std::vector<Live> live, next, spawned, resuming;
  std::vector<std::pair<int64_t, SeqKv>> admitted;
  std::vector<std::vector<int64_t>> admitted_slots;  // their prompts' activation slots (keep_activations)
  for (auto* v : {&live, &next, &resuming}) v->reserve(static_cast<size_t>(2 * cfg_.max_seqs));
  std::vector<int32_t> tok, pos;
  std::vector<const int32_t*> tables;
  std::vector<int64_t> rows, save;  // save: per row, the activation slot it fills (-1: none)
  const size_t step_cap = static_cast<size_t>(2 * cfg_.max_seqs + 2 * max_prompt);
  save.reserve(step_cap);
  tok.reserve(step_cap);
  pos.reserve(step_cap);
  tables.reserve(step_cap);
  rows.reserve(step_cap);
  std::vector<float> logits(static_cast<size_t>(2 * cfg_.max_seqs * V));
  std::vector<Choice> choices;
  std::vector<DeviceChoice> device_choices;
  choices.reserve(static_cast<size_t>(2 * cfg_.max_seqs));

  // Kept activations: a fresh slot for the token at position p of a sequence whose slots so far are
  // `slots` (its tag links the slot of p - 1, so a row can be checked later); none once a position
  // before it went unkept. Entries past p are stale from here on.
  ActivationStore* store = model_.device() ? nullptr : cfg_.store;
  auto keep = [&](bool on, std::vector<int64_t>& slots, int64_t p, int32_t token) {
    int64_t slot = -1;
    if (on && store) {
      const int64_t prev = p > 0 && p - 1 < static_cast<int64_t>(slots.size()) ? slots[static_cast<size_t>(p - 1)] : -1;
      if (p == 0 || prev >= 0) slot = store->add(token, static_cast<int32_t>(p), prev);
      slots.resize(static_cast<size_t>(p + 1), -1);
      slots[static_cast<size_t>(p)] = slot;
    }
    save.push_back(slot);
  };
  auto keeps = [&](const Live& s) { return requests[static_cast<size_t>(s.req)].keep_activations; };
  auto any_kept = [&] { return store && std::any_of(save.begin(), save.end(), [](int64_t x) { return x >= 0; }); };
  auto finish = [&](Live& s, FinishReason why) {
    out[static_cast<size_t>(s.out)].finish = why;
    pool_.release(s.kv);
  };
  auto blocks_for = [&](int64_t tokens) { return (tokens + bs - 1) / bs; };
  auto new_live = [&](int64_t r, int64_t out_index, SeqKv kv) {
    const RolloutRequest& q = requests[static_cast<size_t>(r)];
    Live s{r, out_index, std::move(kv), Rng(q.seed, out[static_cast<size_t>(out_index)].stream), Sampler(q.sampler), -1, 0, {}, {}, q.max_new};
    s.kv.blocks.reserve(static_cast<size_t>(blocks_for(static_cast<int64_t>(q.prompt.size()) + q.max_new) + 1));
    if (max_stop > 0) s.tail.reserve(2 * max_stop + 64);
    return s;
  };
  // Record a chosen token, run the stop checks and the hook; true if the sequence ends here.
  auto record = [&](Live& s, const Choice& ch) -> bool {
    const RolloutRequest& q = requests[static_cast<size_t>(s.req)];
    Completion& c = out[static_cast<size_t>(s.out)];
    const Sample x = ch.x;
    const float lp = ch.lp, ent = ch.ent;
    c.tokens.push_back(x.token);
    c.sample_logprob.push_back(x.logprob);
    c.policy_logprob.push_back(lp);
    c.entropy.push_back(ent);
    s.pending = x.token;
    if (q.stop_ids.count(x.token)) return finish(s, FinishReason::stop), true;
    if (max_stop > 0 && !q.stop_strings.empty()) {
      std::string_view piece = cfg_.token_bytes(x.token);
      s.tail.append(piece);
      for (size_t i = 0; i < q.stop_strings.size(); ++i) {
        const std::string& ss = q.stop_strings[i];
        size_t from = s.tail.size() >= piece.size() + ss.size() ? s.tail.size() - piece.size() - ss.size() + 1 : 0;
        if (s.tail.find(ss, from) != std::string::npos) {
          c.stop_string = static_cast<int32_t>(i);
          return finish(s, FinishReason::stop), true;
        }
      }
      if (s.tail.size() >= max_stop) s.tail.erase(0, s.tail.size() - (max_stop - 1));
    }
    HookDecision d = hook ? hook->after_token(q, c) : HookDecision{};
    // Forks: at most fork_max_new tokens past the fork point (but every forced token), never past
    // the context; none when not one more token fits.
    const int64_t here = static_cast<int64_t>(c.tokens.size());
    int64_t cap = d.fork_max_new > 0 ? std::min(q.max_new, here + d.fork_max_new) : q.max_new;
    cap = std::max(cap, here + static_cast<int64_t>(d.fork_forced.size()));
    cap = std::min(cap, model_.config().max_position_embeddings - static_cast<int64_t>(q.prompt.size()));
    for (int32_t k = 0; k < d.forks && cap > here; ++k) {  // children share everything so far, then draw on their own
      Completion& f = out.emplace_back(c);
      f.member = next_member[static_cast<size_t>(s.req)]++;
      f.parent = c.member;
      f.fork_pos = here;
      f.stream = fork_stream(c.stream, ++s.forks_made);
      f.forced = 0;
      f.forced_pos = here;
      Live child = new_live(s.req, static_cast<int64_t>(out.size()) - 1, pool_.fork(s.kv, s.kv.len));
      child.pending = s.pending;
      child.tail = s.tail;
      child.forced.assign(d.fork_forced.rbegin(), d.fork_forced.rend());
      child.max_len = cap;
      spawned.push_back(std::move(child));
      ++stats_.forks;
    }
    if (d.stop) return finish(s, FinishReason::hook), true;
    if (static_cast<int64_t>(c.tokens.size()) >= s.max_len) return finish(s, FinishReason::length), true;
    return false;
  };
  // Sample (or take the next forced token) from the policy's logits z, with the policy's log-prob and
  // entropy there. Touches only this sequence: the decode step chooses for all sequences in parallel.
  auto choose = [&](Live& s, const float* z) -> Choice {
    const RolloutRequest& q = requests[static_cast<size_t>(s.req)];
    Completion& c = out[static_cast<size_t>(s.out)];
    Choice ch;
    if (!s.forced.empty()) {  // teacher-forced: no draw (the stream is not advanced)
      ch.x.token = s.forced.back();
      s.forced.pop_back();
      TEMPER_CHECK(ch.x.token >= 0 && ch.x.token < V) << "rollout request " << s.req << ": forced token " << ch.x.token
                                                      << " outside the vocabulary [0, " << V << ")";
      ++c.forced;
      kernels::logit_row_stats(z, V, ch.x.token, &ch.lp, &ch.ent);  // the training classifier's arithmetic
      ch.x.logprob = ch.lp;
    } else {
      ch.x = s.sampler.sample(z, V, s.rng, History{q.prompt, c.tokens});
      kernels::logit_row_stats(z, V, ch.x.token, &ch.lp, &ch.ent);
    }
    return ch;
  };
  auto emit = [&](Live& s, const float* z) -> bool { return record(s, choose(s, z)); };

  // One speculative cycle over every live sequence (nothing queued or resuming). False, with
  // nothing changed, when the pool cannot hold the draft positions (a plain step runs instead).
  std::vector<int64_t> glen;
  std::vector<std::vector<int32_t>> drafts;
  std::vector<float> qdist, pdist(static_cast<size_t>(V));
  std::vector<int32_t> hist;
  auto spec_step = [&]() -> bool {
    const int64_t gamma = cfg_.spec->gamma();
    const size_t n = live.size();
    glen.assign(n, 0);
    int64_t need = 0, gmax = 0, rows_total = 0;
    for (size_t i = 0; i < n; ++i) {
      const Live& s = live[i];
      const int64_t left = s.max_len - static_cast<int64_t>(out[static_cast<size_t>(s.out)].tokens.size());
      glen[i] = s.forced.empty() ? std::clamp<int64_t>(left - 1, 0, gamma) : 0;
      need += pool_.blocks_needed(s.kv, glen[i] + 1);
      gmax = std::max(gmax, glen[i]);
      rows_total += glen[i] + 1;
    }
    if (gmax == 0 || need > pool_.free_blocks()) return false;
    for (size_t i = 0; i < n; ++i) pool_.reserve(live[i].kv, glen[i] + 1);
    if (drafts.size() < n) drafts.resize(n);
    if (qdist.size() < n * static_cast<size_t>(gamma * V)) qdist.resize(n * static_cast<size_t>(gamma * V));
    if (logits.size() < static_cast<size_t>(rows_total * V)) logits.resize(static_cast<size_t>(rows_total * V));
    auto q_at = [&](size_t i, int64_t j) { return qdist.data() + (i * static_cast<size_t>(gamma) + static_cast<size_t>(j)) * static_cast<size_t>(V); };
    auto history = [&](const Live& s, const std::vector<int32_t>* extra) {  // prompt, completion (+ drafts)
      const RolloutRequest& q = requests[static_cast<size_t>(s.req)];
      if (!q.sampler.penalties()) return History{};
      const Completion& c = out[static_cast<size_t>(s.out)];
      hist.assign(c.tokens.begin(), c.tokens.end());
      if (extra) hist.insert(hist.end(), extra->begin(), extra->end());
      return History{q.prompt, hist};
    };
    // Rows of a draft or verify pass: sequence i's token at offset j past its committed length (the
    // pending token, then its drafts), every row's logits wanted.
    auto clear_rows = [&] {
      tok.clear();
      pos.clear();
      tables.clear();
      rows.clear();
      save.clear();
    };
    auto add_row = [&](const Live& s, size_t i, int64_t j, bool verify) {
      tok.push_back(j == 0 ? s.pending : drafts[i][static_cast<size_t>(j - 1)]);
      pos.push_back(static_cast<int32_t>(s.kv.len + j));
      tables.push_back(s.kv.blocks.data());
      rows.push_back(static_cast<int64_t>(rows.size()));
      if (verify) keep(keeps(s), out[static_cast<size_t>(s.out)].act_slots, s.kv.len + j, tok.back());
    };
    auto forward_rows = [&](const Int4Drafter* d) {
      PagedStep st;
      if (!d && any_kept()) {  // the verify pass is the policy's: its rows' activations are kept
        st.store = store;
        st.save_slots = save.data();
      }
      st.n = st.n_out = static_cast<int64_t>(tok.size());
      st.tokens = tok.data();
      st.pos = pos.data();
      st.tables = tables.data();
      st.out_rows = rows.data();
      st.logits = logits.data();
      model_.forward_paged(st, pool_, d);
    };
    using clock = std::chrono::steady_clock;
    auto secs = [](clock::time_point a) { return std::chrono::duration<double>(clock::now() - a).count(); };
    auto t0 = clock::now();
    // Draft: gmax passes of the drafter, each over the sequences still drafting.
    for (size_t i = 0; i < n; ++i) drafts[i].clear();
    for (int64_t j = 0; j < gmax; ++j) {
      clear_rows();
      for (size_t i = 0; i < n; ++i)
        if (glen[i] > j) add_row(live[i], i, j, false);
      forward_rows(cfg_.drafter);
      int64_t r = 0;
      for (size_t i = 0; i < n; ++i) {
        if (glen[i] <= j) continue;
        Live& s = live[i];
        float* q = q_at(i, j);
        s.sampler.distribution(logits.data() + (r++) * V, V, history(s, &drafts[i]), q);
        drafts[i].push_back(sample_dense(q, V, s.rng));
      }
    }
    stats_.draft_s += secs(t0);
    t0 = clock::now();
    // Verify: one policy pass over [pending, drafts...] of every sequence.
    clear_rows();
    for (size_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= glen[i]; ++j) add_row(live[i], i, j, true);
    forward_rows(nullptr);
    stats_.verify_s += secs(t0);
    t0 = clock::now();
    // Accept: emit accepted drafts, then the correction or the bonus token, through the usual checks.
    next.clear();
    spawned.clear();
    int64_t base = 0;
    for (size_t i = 0; i < n; ++i) {
      Live& s = live[i];
      const RolloutRequest& q = requests[static_cast<size_t>(s.req)];
      const int64_t g = glen[i];
      bool ended = false;
      if (g == 0) {
        pool_.advance(s.kv, 1);
        ended = emit(s, logits.data() + base * V);
        ++stats_.decode_tokens;
      } else {
        ++stats_.spec_cycles;
        stats_.drafted += g;
        for (int64_t j = 0; j <= g && !ended; ++j) {
          const float* z = logits.data() + (base + j) * V;
          s.sampler.distribution(z, V, history(s, nullptr), pdist.data());
          int32_t x;
          bool rejected = false;
          if (j < g) {
            const int32_t d = drafts[i][static_cast<size_t>(j)];
            const float* qd = q_at(i, j);
            if (spec_accept(pdist[static_cast<size_t>(d)], qd[d], s.rng)) {
              x = d;
              ++stats_.accepted;
            } else {
              x = spec_residual(pdist.data(), qd, V, s.rng);
              rejected = true;
            }
          } else {
            x = sample_dense(pdist.data(), V, s.rng);  // every draft accepted: the bonus token
          }
          const float px = pdist[static_cast<size_t>(x)];
          pool_.advance(s.kv, 1);
          Choice ch;
          ch.x = Sample{x, q.sampler.greedy ? 0.f : std::log(px)};
          kernels::logit_row_stats(z, V, x, &ch.lp, &ch.ent);
          ended = record(s, ch);
          ++stats_.decode_tokens;
          if (rejected) break;
        }
      }
      base += g + 1;
      if (!ended) next.push_back(std::move(s));
    }
    for (Live& s : spawned) next.push_back(std::move(s));
    live.swap(next);
    ++stats_.spec_steps;
    stats_.accept_s += secs(t0);
    return true;
  };

  const bool can_spec = cfg_.drafter && cfg_.spec && (cfg_.drafter->ready() || cfg_.on_spec_start);
  bool spec_on = false;
  int64_t step = 0;
  while (!queue.empty() || !resume.empty() || !live.empty()) {
    if (can_spec && queue.empty() && resume.empty() && !live.empty()) {
      const int64_t n_active = static_cast<int64_t>(live.size());
      // Ramp guard: not while prompts are being admitted. The engine knows every request up front, so
      // the ramp is over once the queue has drained (here) and a step has run: from then on the live
      // batch only shrinks. (A guard on the live count itself would make one early finish decide.)
      if (step > 0 && !spec_on && cfg_.spec->turn_on(n_active)) {
        spec_on = true;
        stats_.spec_from_step = step;
        if (cfg_.on_spec_start) cfg_.on_spec_start();
        TEMPER_CHECK(cfg_.drafter->ready()) << "speculative decoding turned on without a drafter";
      }
      if (spec_on && spec_step()) {
        ++stats_.steps;
        if (hook) hook->after_step(step);
        ++step;
        continue;
      }
    }
    tok.clear();
    pos.clear();
    tables.clear();
    rows.clear();
    save.clear();
    // Room for one more token in every live sequence; when the pool is short, preempt the newest.
    for (;;) {
      int64_t need = 0;
      for (const Live& s : live) need += pool_.blocks_needed(s.kv, 1);
      if (need <= pool_.free_blocks() || live.empty()) break;
      pool_.release(live.back().kv);
      resume.push_front(std::move(live.back()));
      live.pop_back();
      ++stats_.preemptions;
    }
    for (Live& s : live) {
      pool_.reserve(s.kv, 1);
      tok.push_back(s.pending);
      pos.push_back(static_cast<int32_t>(s.kv.len));
      keep(keeps(s), out[static_cast<size_t>(s.out)].act_slots, s.kv.len, s.pending);
      tables.push_back(s.kv.blocks.data());
      rows.push_back(static_cast<int64_t>(tok.size()) - 1);
    }
    const int64_t n_decode = static_cast<int64_t>(live.size()), n_decode_rows = static_cast<int64_t>(tok.size());
    int64_t seats = n_decode;
    // Preempted sequences come back first: recompute prompt + completion except the pending token.
    resuming.clear();
    while (!resume.empty()) {
      Live& s = resume.front();
      const RolloutRequest& q = requests[static_cast<size_t>(s.req)];
      Completion& c = out[static_cast<size_t>(s.out)];
      int64_t n = static_cast<int64_t>(q.prompt.size() + c.tokens.size()) - 1;
      if (seats + 1 > cfg_.max_seqs || blocks_for(n) + 1 > pool_.free_blocks()) break;
      if (static_cast<int64_t>(tok.size()) > n_decode_rows && static_cast<int64_t>(tok.size()) - n_decode_rows + n > cfg_.max_step_tokens) break;
      pool_.reserve(s.kv, n);
      for (int64_t p = 0; p < n; ++p) {
        tok.push_back(p < static_cast<int64_t>(q.prompt.size()) ? q.prompt[static_cast<size_t>(p)]
                                                                 : c.tokens[static_cast<size_t>(p) - q.prompt.size()]);
        pos.push_back(static_cast<int32_t>(p));
        keep(q.keep_activations, c.act_slots, p, tok.back());  // its own slots now (the siblings keep theirs)
      }
      stats_.recomputed_tokens += n;
      ++seats;
      resuming.push_back(std::move(s));
      resume.pop_front();
    }
    // Admissions: prefill whole prompts while the group fits (its blocks are shared after the fork).
    admitted.clear();
    while (resume.empty() && !queue.empty()) {
      const RolloutRequest& q = requests[static_cast<size_t>(queue.front())];
      int64_t plen = static_cast<int64_t>(q.prompt.size());
      int64_t need = blocks_for(plen) + q.group_size;  // + one block each to grow
      if (seats + q.group_size > cfg_.max_seqs || need > pool_.free_blocks()) break;
      if (static_cast<int64_t>(tok.size()) > n_decode_rows && static_cast<int64_t>(tok.size()) - n_decode_rows + plen > cfg_.max_step_tokens) break;
      SeqKv root;
      pool_.reserve(root, plen);
      admitted_slots.resize(admitted.size() + 1);
      admitted_slots.back().clear();
      for (int64_t p = 0; p < plen; ++p) {
        tok.push_back(q.prompt[static_cast<size_t>(p)]);
        pos.push_back(static_cast<int32_t>(p));
        keep(q.keep_activations, admitted_slots.back(), p, tok.back());
      }
      stats_.prefill_tokens += plen;
      seats += q.group_size;
      admitted.emplace_back(queue.front(), std::move(root));
      queue.pop_front();
    }
    TEMPER_CHECK(!tok.empty()) << "rollout: the KV pool (" << pool_.num_blocks() << " blocks of " << bs
                               << ") cannot hold request " << (queue.empty() ? -1 : queue.front())
                               << "; raise the KV memory budget";
    // Block tables of the prefill rows, after every reserve (the pointers are stable from here).
    for (Live& s : resuming) {
      const Completion& c = out[static_cast<size_t>(s.out)];
      size_t n = requests[static_cast<size_t>(s.req)].prompt.size() + c.tokens.size() - 1;
      for (size_t p = 0; p < n; ++p) tables.push_back(s.kv.blocks.data());
    }
    for (auto& [r, root] : admitted) {
      for (size_t p = 0; p < requests[static_cast<size_t>(r)].prompt.size(); ++p) tables.push_back(root.blocks.data());
      rows.push_back(static_cast<int64_t>(tables.size()) - 1);
    }
    if (logits.size() < rows.size() * static_cast<size_t>(V)) logits.resize(rows.size() * static_cast<size_t>(V));
    PagedStep st;
    st.n = static_cast<int64_t>(tok.size());
    st.tokens = tok.data();
    st.pos = pos.data();
    st.tables = tables.data();
    st.out_rows = rows.data();
    st.n_out = static_cast<int64_t>(rows.size());
    st.logits = logits.data();
    if (any_kept()) {
      st.store = store;
      st.save_slots = save.data();
    }
    // A device that can choose tokens where the logits are does so for a step of decode rows only
    // whose samplers are simple (or forced): the host draws each uniform from the sequence's own stream,
    // as choose() would, and no logits come back.
    DeviceModel* dev = model_.device();
    const bool choose_on_device =
        dev && dev->can_choose() && admitted.empty() && resuming.empty() && n_decode > 0 &&
        std::all_of(live.begin(), live.end(), [](const Live& s) { return !s.forced.empty() || s.sampler.simple(); });
    choices.resize(static_cast<size_t>(n_decode));
    if (choose_on_device) {
      device_choices.assign(static_cast<size_t>(n_decode), DeviceChoice{});
      for (int64_t i = 0; i < n_decode; ++i) {
        Live& s = live[static_cast<size_t>(i)];
        DeviceChoice& d = device_choices[static_cast<size_t>(i)];
        if (!s.forced.empty()) {
          d.forced = s.forced.back();
          TEMPER_CHECK(d.forced >= 0 && d.forced < V) << "rollout request " << s.req << ": forced token " << d.forced
                                                      << " outside the vocabulary [0, " << V << ")";
        } else if (s.sampler.config().greedy) {
          d.greedy = true;
        } else {
          d.temperature = s.sampler.config().temperature;
          d.u = s.rng.uniform_f64();
        }
      }
      dev->forward_paged_choose(st, pool_, device_choices.data());
      for (int64_t i = 0; i < n_decode; ++i) {
        Live& s = live[static_cast<size_t>(i)];
        const DeviceChoice& d = device_choices[static_cast<size_t>(i)];
        Choice& ch = choices[static_cast<size_t>(i)];
        if (d.forced >= 0) {  // as choose(): consumed, counted, its log-prob the policy's
          s.forced.pop_back();
          ++out[static_cast<size_t>(s.out)].forced;
        }
        ch.x = {d.token, d.sample_logprob};
        ch.lp = d.policy_logprob;
        ch.ent = d.entropy;
      }
    } else {
      TEMPER_PROFILE("forward");
      model_.forward_paged(st, pool_);
    }
    stats_.decode_tokens += n_decode;

    next.clear();
    spawned.clear();
    // Choosing (sampling over the vocabulary, log-prob and entropy) is per sequence and runs in
    // parallel; recording (stops, hooks, forks) in sequence order.
    TEMPER_PROFILE("choose_record");
    if (!choose_on_device)
      parallel_for(n_decode, 4, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) choices[static_cast<size_t>(i)] = choose(live[static_cast<size_t>(i)], logits.data() + i * V);
      });
    for (int64_t i = 0; i < n_decode; ++i) {
      Live& s = live[static_cast<size_t>(i)];
      pool_.advance(s.kv, 1);
      if (!record(s, choices[static_cast<size_t>(i)])) next.push_back(std::move(s));
    }
    for (Live& s : resuming) {
      const Completion& c = out[static_cast<size_t>(s.out)];
      pool_.advance(s.kv, static_cast<int64_t>(requests[static_cast<size_t>(s.req)].prompt.size() + c.tokens.size()) - 1);
      next.push_back(std::move(s));
    }
    for (size_t a = 0; a < admitted.size(); ++a) {
      auto& [r, root] = admitted[a];
      const RolloutRequest& q = requests[static_cast<size_t>(r)];
      pool_.advance(root, static_cast<int64_t>(q.prompt.size()));
      const float* z = logits.data() + (static_cast<size_t>(n_decode) + a) * V;
      for (int64_t g = 0; g < q.group_size; ++g) {
        Live s = new_live(r, first_out[static_cast<size_t>(r)] + g, pool_.fork(root, root.len));
        if (q.keep_activations) {  // grown once: the decode loop does not allocate for it
          std::vector<int64_t>& slots = out[static_cast<size_t>(s.out)].act_slots;
          slots.reserve(q.prompt.size() + static_cast<size_t>(q.max_new));
          slots.assign(admitted_slots[a].begin(), admitted_slots[a].end());
        }
        s.forced.assign(q.forced.rbegin(), q.forced.rend());
        if (!emit(s, z)) next.push_back(std::move(s));
      }
      pool_.release(root);  // the members hold the prompt's blocks now
    }
    for (Live& s : spawned) next.push_back(std::move(s));
    live.swap(next);
    ++stats_.steps;
    if (hook) hook->after_step(step);
    ++step;
  }
  // (request, member) order: a request's forks come after its G members.
  std::vector<Completion> result;
  result.reserve(out.size());
  std::vector<std::vector<size_t>> by_req(requests.size());
  for (size_t i = 0; i < out.size(); ++i) by_req[static_cast<size_t>(out[i].request)].push_back(i);
  for (auto& idx : by_req) {
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return out[a].member < out[b].member; });
    for (size_t i : idx) result.push_back(std::move(out[i]));
  }
  return result;
}

}  // namespace temper::rollout
