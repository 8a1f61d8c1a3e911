// EngineRun (engine_run.h): the set-up of one RolloutEngine::run call, its loop, the plain step
// (preempt, decode rows, resumed rows, admissions, one forward, choose, record), and what happens to
// one sequence's token (choose, record: stop ids, stop strings, the hook, forks). The speculative
// cycle is in engine_speculative.cpp.
#include "temper/rollout/engine_run.h"

#include <algorithm>
#include <string_view>

#include "temper/core/clock.h"
#include "temper/core/error.h"
#include "temper/core/interrupt.h"
#include "temper/core/profile.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/classifier.h"
#include "temper/model/activation_store.h"
#include "temper/model/int4_drafter.h"

namespace temper::rollout {

EngineRun::EngineRun(Transformer& model, KvPool& pool, const EngineConfig& cfg, EngineStats& stats,
                     const std::vector<RolloutRequest>& requests, RolloutHook* hook, RunDriver* driver)
    : model_(model),
      pool_(pool),
      cfg_(cfg),
      stats_(stats),
      requests_(requests),
      hook_(hook),
      driver_(driver),
      n_initial_(static_cast<int64_t>(requests.size())),
      V_(model.config().vocab_size),
      bs_(pool.block_size()),
      store_(model.device() ? nullptr : cfg.store) {
  for (size_t r = 0; r < requests_.size(); ++r) add_request(requests_[r], static_cast<int64_t>(r));
  reserve_buffers();
  can_spec_ = cfg_.drafter && cfg_.spec && (cfg_.drafter->ready() || cfg_.on_spec_start);
}

void EngineRun::add_request(const RolloutRequest& q, int64_t r) {
  const int64_t max_pos = model_.config().max_position_embeddings;
  TEMPER_CHECK(!q.prompt.empty() && q.group_size > 0 && q.max_new > 0)
      << "rollout request " << r << ": needs a prompt, group_size > 0 and max_new > 0";
  TEMPER_CHECK(q.group_size <= cfg_.max_seqs)
      << "rollout request " << r << ": a group of " << q.group_size << " samples is decoded together (they share "
      << "the prompt's KV blocks), and the engine decodes at most max_seqs = " << cfg_.max_seqs
      << " sequences at once; raise max_seqs (rl.max_seqs for training) or lower the group size";
  TEMPER_CHECK(static_cast<int64_t>(q.forced.size()) <= q.max_new)
      << "rollout request " << r << ": " << q.forced.size() << " forced tokens exceed max_new " << q.max_new;
  TEMPER_CHECK(static_cast<int64_t>(q.prompt.size()) + q.max_new <= max_pos)
      << "rollout request " << r << ": prompt " << q.prompt.size() << " + max_new " << q.max_new
      << " exceeds the model's context " << max_pos;
  for (int32_t t : q.prompt)
    TEMPER_CHECK(t >= 0 && t < V_) << "rollout request " << r << ": prompt token " << t
                                   << " outside the vocabulary [0, " << V_ << ")";
  q.sampler.validate();
  for (const std::string& s : q.stop_strings) {
    TEMPER_CHECK(!s.empty()) << "rollout request " << r << ": empty stop string";
    TEMPER_CHECK(cfg_.token_bytes) << "rollout request " << r << ": stop strings need EngineConfig::token_bytes";
    max_stop_ = std::max(max_stop_, s.size());
  }
  max_prompt_ = std::max(max_prompt_, static_cast<int64_t>(q.prompt.size()));
  first_out_.push_back(static_cast<int64_t>(out_.size()));
  next_member_.push_back(q.group_size);
  for (int64_t g = 0; g < q.group_size; ++g) {
    Completion& c = out_.emplace_back();
    c.request = r;
    c.member = g;
    c.stream = q.stream + static_cast<uint64_t>(g);
    c.tokens.reserve(static_cast<size_t>(q.max_new));
    c.sample_logprob.reserve(static_cast<size_t>(q.max_new));
    c.policy_logprob.reserve(static_cast<size_t>(q.max_new));
    c.entropy.reserve(static_cast<size_t>(q.max_new));
  }
  queue_.push_back(r);
}

// Step buffers, sized once: the decode loop does not allocate after the first steps.
void EngineRun::reserve_buffers() {
  for (auto* v : {&live_, &next_, &resuming_}) v->reserve(static_cast<size_t>(2 * cfg_.max_seqs));
  const size_t step_cap = static_cast<size_t>(2 * cfg_.max_seqs + 2 * max_prompt_);
  save_.reserve(step_cap);
  tok_.reserve(step_cap);
  pos_.reserve(step_cap);
  tables_.reserve(step_cap);
  rows_.reserve(step_cap);
  logits_.resize(static_cast<size_t>(2 * cfg_.max_seqs * V_));
  choices_.reserve(static_cast<size_t>(2 * cfg_.max_seqs));
  pdist_.resize(static_cast<size_t>(V_));
}

std::vector<Completion> EngineRun::run() {
  for (;;) {
    if (interrupt_requested()) try {
        interruption_point();  // a stop asked of a caller that armed it (core/interrupt.h): the run is abandoned
      } catch (const Interrupted&) {
        abandon();
        throw;
      }
    take_driver_input(false);
    if (!busy()) {
      if (!driver_ || (parked_.empty() && driver_->closed())) break;
      take_driver_input(true);  // nothing to run: wait for a continuation, a request or the close
      continue;
    }
    if (!(speculating() && speculative_cycle())) plain_step();
    ++stats_.steps;
    if (hook_) hook_->after_step(step_);
    ++step_;
  }
  return collect();
}

void EngineRun::abandon() {
  for (Live& s : live_) pool_.release(s.kv);
  for (Live& s : resume_)
    if (s.continuing) pool_.release(s.kv);
  for (auto& [key, s] : parked_) pool_.release(s.kv);
  live_.clear();
  resume_.clear();
  parked_.clear();
}

bool EngineRun::speculating() {
  if (!can_spec_ || !queue_.empty() || !resume_.empty() || live_.empty()) return false;
  // Ramp guard: not while prompts are being admitted. The engine knows every request up front, so
  // the ramp is over once the queue has drained (here) and a step has run: from then on the live
  // batch only shrinks. (A guard on the live count itself would make one early finish decide.)
  if (step_ > 0 && !spec_on_ && cfg_.spec->turn_on(static_cast<int64_t>(live_.size()))) {
    spec_on_ = true;
    stats_.spec_from_step = step_;
    if (cfg_.on_spec_start) cfg_.on_spec_start();
    TEMPER_CHECK(cfg_.drafter->ready()) << "speculative decoding turned on without a drafter";
  }
  return spec_on_;
}

// One forward over the new tokens of every sequence: a decode row per live sequence, then the
// recomputed prefixes of resumed ones, then the prompts of admitted requests.
void EngineRun::plain_step() {
  const Clock::time_point t0 = Clock::now();
  clear_rows();
  preempt_if_full();
  add_decode_rows();
  add_resumed_rows();
  admit();
  TEMPER_CHECK(!tok_.empty()) << "rollout: the KV pool (" << pool_.num_blocks() << " blocks of " << bs_
                              << ") cannot hold request " << (queue_.empty() ? -1 : queue_.front())
                              << "; raise the KV memory budget";
  add_prefill_tables();
  const bool decode_only = static_cast<int64_t>(tok_.size()) == n_decode_;
  const ProfileMute mute(cfg_.profile_decode_only && !decode_only);
  const bool chosen = forward_step();
  stats_.decode_tokens += n_decode_;
  next_.clear();
  spawned_.clear();
  {
    // Choosing (sampling over the vocabulary, log-prob and entropy) is per sequence and runs in
    // parallel; recording (stops, hooks, forks) in sequence order.
    TEMPER_PROFILE("choose_record");
    if (!chosen) choose_all();
    record_step();
  }
  if (decode_only) {
    ++stats_.decode_only_steps;
    stats_.decode_only_tokens += n_decode_;
    stats_.decode_only_s += seconds_since(t0);
  }
}

void EngineRun::clear_rows() {
  tok_.clear();
  pos_.clear();
  tables_.clear();
  rows_.clear();
  save_.clear();
  prompt_runs_.clear();
}

void EngineRun::preempt_if_full() {
  for (;;) {
    int64_t need = 0;
    for (const Live& s : live_) need += pool_.blocks_needed(s.kv, 1);
    if (need <= pool_.free_blocks() || live_.empty()) break;
    pool_.release(live_.back().kv);
    resume_.push_front(std::move(live_.back()));
    live_.pop_back();
    ++stats_.preemptions;
  }
}

void EngineRun::add_decode_rows() {
  for (Live& s : live_) {
    pool_.reserve(s.kv, 1);
    tok_.push_back(s.pending);
    pos_.push_back(static_cast<int32_t>(s.kv.len));
    keep_activation(keeps(s), out_[static_cast<size_t>(s.out)].act_slots, s.kv.len, s.pending);
    tables_.push_back(s.kv.blocks.data());
    rows_.push_back(static_cast<int64_t>(tok_.size()) - 1);
  }
  n_decode_ = static_cast<int64_t>(live_.size());
  n_decode_rows_ = static_cast<int64_t>(tok_.size());
  seats_ = n_decode_;
}

// Tokens of prompt + completion before the pending one that s's KV lacks: all of them for a preempted
// sequence (its blocks were freed), the last turn's end and the appended tokens for a continuing one.
int64_t EngineRun::uncached(const Live& s) const {
  const Completion& c = out_[static_cast<size_t>(s.out)];
  return static_cast<int64_t>(rq(s.req).prompt.size() + c.tokens.size()) - 1 - s.kv.len;
}

// Prefill what resumed sequences lack (a preempted one's prefix, a continuing one's appended tokens),
// while seats, blocks and the step's prefill budget allow.
void EngineRun::add_resumed_rows() {
  resuming_.clear();
  while (!resume_.empty()) {
    Live& s = resume_.front();
    const RolloutRequest& q = rq(s.req);
    Completion& c = out_[static_cast<size_t>(s.out)];
    const int64_t from = s.kv.len, n = uncached(s);
    if (seats_ + 1 > cfg_.max_seqs) break;
    if (pool_.blocks_needed(s.kv, n) + 1 > pool_.free_blocks() &&
        !(tok_.empty() && make_room_for(s, pool_.blocks_needed(s.kv, n) + 1)))
      break;
    const int64_t prefill = static_cast<int64_t>(tok_.size()) - n_decode_rows_;
    if (prefill > 0 && prefill + n > cfg_.max_step_tokens) break;
    pool_.reserve(s.kv, n);
    for (int64_t p = from; p < from + n; ++p) {
      tok_.push_back(p < static_cast<int64_t>(q.prompt.size()) ? q.prompt[static_cast<size_t>(p)]
                                                               : c.tokens[static_cast<size_t>(p) - q.prompt.size()]);
      pos_.push_back(static_cast<int32_t>(p));
      keep_activation(q.keep_activations, c.act_slots, p, tok_.back());  // its own slots now (siblings keep theirs)
    }
    (s.continuing ? stats_.prefill_tokens : stats_.recomputed_tokens) += n;
    s.continuing = false;
    ++seats_;
    resuming_.push_back(std::move(s));
    resume_.pop_front();
  }
}

// Prefill whole prompts while the group fits (its blocks are shared after the fork); none while a
// preempted sequence waits.
void EngineRun::admit() {
  admitted_.clear();
  while (resume_.empty() && !queue_.empty()) {
    const RolloutRequest& q = rq(queue_.front());
    int64_t plen = static_cast<int64_t>(q.prompt.size());
    int64_t need = blocks_for(plen) + q.group_size;  // + one block each to grow
    if (seats_ + q.group_size > cfg_.max_seqs || need > pool_.free_blocks()) break;
    const int64_t prefill = static_cast<int64_t>(tok_.size()) - n_decode_rows_;
    if (prefill > 0 && prefill + plen > cfg_.max_step_tokens) break;
    SeqKv root;
    pool_.reserve(root, plen);
    admitted_slots_.resize(admitted_.size() + 1);
    admitted_slots_.back().clear();
    for (int64_t p = 0; p < plen; ++p) {
      tok_.push_back(q.prompt[static_cast<size_t>(p)]);
      pos_.push_back(static_cast<int32_t>(p));
      keep_activation(q.keep_activations, admitted_slots_.back(), p, tok_.back());
    }
    stats_.prefill_tokens += plen;
    seats_ += q.group_size;
    admitted_.emplace_back(queue_.front(), std::move(root));
    queue_.pop_front();
  }
}

// Block tables of the prefill rows, after every reserve (the pointers are stable from here); an
// admitted prompt's last row is an output row. The prompt runs: an admitted prompt, and a preempted sequence's prompt
// when it is recomputed from position 0 (its later tokens took the paged kernel the first time, and take it again).
void EngineRun::add_prefill_tables() {
  auto prompt_run = [&](int64_t len) { prompt_runs_.push_back({static_cast<int64_t>(tables_.size()), len, 0, 0}); };
  for (Live& s : resuming_) {
    const int64_t n = uncached(s);
    if (s.kv.len == 0 && n > 0) prompt_run(std::min<int64_t>(n, static_cast<int64_t>(rq(s.req).prompt.size())));
    for (int64_t p = 0; p < n; ++p) tables_.push_back(s.kv.blocks.data());
  }
  for (auto& [r, root] : admitted_) {
    prompt_run(static_cast<int64_t>(rq(r).prompt.size()));
    for (size_t p = 0; p < rq(r).prompt.size(); ++p) tables_.push_back(root.blocks.data());
    rows_.push_back(static_cast<int64_t>(tables_.size()) - 1);
  }
}

PagedStep EngineRun::paged_step(bool keep_rows) {
  PagedStep st;
  st.n = static_cast<int64_t>(tok_.size());
  st.tokens = tok_.data();
  st.pos = pos_.data();
  st.tables = tables_.data();
  st.out_rows = rows_.data();
  st.n_out = static_cast<int64_t>(rows_.size());
  st.logits = logits_.data();
  st.prompt_runs = prompt_runs_.data();
  st.n_prompt_runs = static_cast<int64_t>(prompt_runs_.size());
  if (keep_rows && any_kept()) {
    st.store = store_;
    st.save_slots = save_.data();
  }
  return st;
}

bool EngineRun::forward_step() {
  if (logits_.size() < rows_.size() * static_cast<size_t>(V_)) logits_.resize(rows_.size() * static_cast<size_t>(V_));
  const PagedStep st = paged_step(true);
  choices_.resize(static_cast<size_t>(n_decode_));
  if (device_can_choose()) {
    choose_on_device(st);
    return true;
  }
  TEMPER_PROFILE("forward");
  model_.forward_paged(st, pool_);
  return false;
}

// A device that can choose tokens where the logits are does so for a step of decode rows only
// whose samplers are simple (or forced).
bool EngineRun::device_can_choose() const {
  const DeviceModel* dev = model_.device();
  return dev && dev->can_choose() && admitted_.empty() && resuming_.empty() && n_decode_ > 0 &&
         std::all_of(live_.begin(), live_.end(), [](const Live& s) { return !s.forced.empty() || s.sampler.simple(); });
}

// The host draws each uniform from the sequence's own stream, as choose() would, and no logits
// come back; forced tokens are consumed and counted as in choose().
void EngineRun::choose_on_device(const PagedStep& st) {
  device_choices_.assign(static_cast<size_t>(n_decode_), DeviceChoice{});
  for (int64_t i = 0; i < n_decode_; ++i) {
    Live& s = live_[static_cast<size_t>(i)];
    DeviceChoice& d = device_choices_[static_cast<size_t>(i)];
    if (!s.forced.empty()) {
      d.forced = s.forced.back();
      TEMPER_CHECK(d.forced >= 0 && d.forced < V_) << "rollout request " << s.req << ": forced token " << d.forced
                                                   << " outside the vocabulary [0, " << V_ << ")";
    } else if (s.sampler.config().greedy) {
      d.greedy = true;
    } else {
      d.temperature = s.sampler.config().temperature;
      d.u = s.rng.uniform_f64();
    }
  }
  model_.device()->forward_paged_choose(st, pool_, device_choices_.data());
  for (int64_t i = 0; i < n_decode_; ++i) {
    Live& s = live_[static_cast<size_t>(i)];
    const DeviceChoice& d = device_choices_[static_cast<size_t>(i)];
    Choice& ch = choices_[static_cast<size_t>(i)];
    if (d.forced >= 0) {  // as choose(): consumed, counted, its log-prob the policy's
      s.forced.pop_back();
      ++out_[static_cast<size_t>(s.out)].forced;
    }
    ch.x = {d.token, d.sample_logprob};
    ch.lp = d.policy_logprob;
    ch.ent = d.entropy;
  }
}

void EngineRun::choose_all() {
  parallel_for(n_decode_, 4, [this](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      choices_[static_cast<size_t>(i)] = choose(live_[static_cast<size_t>(i)], logits_.data() + i * V_);
  });
}

// In row order: the decode rows' tokens, the resumed sequences (their prefix now in the cache), the
// admitted requests' members (their first token from the prompt's last row), then the forks.
void EngineRun::record_step() {
  for (int64_t i = 0; i < n_decode_; ++i) {
    Live& s = live_[static_cast<size_t>(i)];
    pool_.advance(s.kv, 1);
    if (!record(s, choices_[static_cast<size_t>(i)])) next_.push_back(std::move(s));
  }
  for (Live& s : resuming_) {
    pool_.advance(s.kv, uncached(s));
    next_.push_back(std::move(s));
  }
  for (size_t a = 0; a < admitted_.size(); ++a) start_members(a);
  adopt_spawned();
}

void EngineRun::start_members(size_t a) {
  auto& [r, root] = admitted_[a];
  const RolloutRequest& q = rq(r);
  pool_.advance(root, static_cast<int64_t>(q.prompt.size()));
  const float* z = logits_.data() + (static_cast<size_t>(n_decode_) + a) * V_;
  for (int64_t g = 0; g < q.group_size; ++g) {
    Live s = new_live(r, first_out_[static_cast<size_t>(r)] + g, pool_.fork(root, root.len));
    if (q.keep_activations) {  // grown once: the decode loop does not allocate for it
      std::vector<int64_t>& slots = out_[static_cast<size_t>(s.out)].act_slots;
      slots.reserve(q.prompt.size() + static_cast<size_t>(q.max_new));
      slots.assign(admitted_slots_[a].begin(), admitted_slots_[a].end());
    }
    s.forced.assign(q.forced.rbegin(), q.forced.rend());
    if (!emit(s, z)) next_.push_back(std::move(s));
  }
  pool_.release(root);  // the members hold the prompt's blocks now
}

void EngineRun::adopt_spawned() {
  for (Live& s : spawned_) next_.push_back(std::move(s));
  live_.swap(next_);
}

std::vector<Completion> EngineRun::collect() {
  std::vector<Completion> result;
  result.reserve(out_.size());
  std::vector<std::vector<size_t>> by_req(static_cast<size_t>(n_requests()));
  for (size_t i = 0; i < out_.size(); ++i) by_req[static_cast<size_t>(out_[i].request)].push_back(i);
  for (auto& idx : by_req) {
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return out_[a].member < out_[b].member; });
    for (size_t i : idx) result.push_back(std::move(out_[i]));
  }
  return result;
}

// Sample (or take the next forced token) from the policy's logits z, with the policy's log-prob and
// entropy there. Touches only this sequence: the decode step chooses for all sequences in parallel.
EngineRun::Choice EngineRun::choose(Live& s, const float* z) {
  const RolloutRequest& q = rq(s.req);
  Completion& c = out_[static_cast<size_t>(s.out)];
  Choice ch;
  if (!s.forced.empty()) {  // teacher-forced: no draw (the stream is not advanced)
    ch.x.token = s.forced.back();
    s.forced.pop_back();
    TEMPER_CHECK(ch.x.token >= 0 && ch.x.token < V_) << "rollout request " << s.req << ": forced token " << ch.x.token
                                                     << " outside the vocabulary [0, " << V_ << ")";
    ++c.forced;
    kernels::logit_row_stats(z, V_, ch.x.token, &ch.lp, &ch.ent);  // the training classifier's arithmetic
    ch.x.logprob = ch.lp;
  } else {
    ch.x = s.sampler.sample(z, V_, s.rng, History{q.prompt, c.tokens});
    kernels::logit_row_stats(z, V_, ch.x.token, &ch.lp, &ch.ent);
  }
  return ch;
}

// Record a chosen token, run the stop checks and the hook (forking where it asks).
bool EngineRun::record(Live& s, const Choice& ch) {
  // A model whose every layer attends a sliding window of W never reads positions before len + 1 - W again
  // (forks are made at the end): those blocks go back to the pool.
  const ModelConfig& mc = model_.config();
  if (mc.sliding_window > 0 && mc.sliding_pattern == 0)
    stats_.kv_blocks_dropped += pool_.drop_before(s.kv, s.kv.len + 1 - mc.sliding_window);
  const RolloutRequest& q = rq(s.req);
  Completion& c = out_[static_cast<size_t>(s.out)];
  const Sample x = ch.x;
  c.tokens.push_back(x.token);
  c.sample_logprob.push_back(x.logprob);
  c.policy_logprob.push_back(ch.lp);
  c.entropy.push_back(ch.ent);
  s.pending = x.token;
  if (q.stop_ids.count(x.token)) return finish(s, FinishReason::stop), true;
  if (hits_stop_string(s, q, c, x.token)) return finish(s, FinishReason::stop), true;
  HookDecision d = hook_ ? hook_->after_token(q, c) : HookDecision{};
  fork(s, q, c, d);
  if (d.stop) return finish(s, FinishReason::hook), true;
  if (static_cast<int64_t>(c.tokens.size()) >= s.max_len) return finish(s, FinishReason::length), true;
  return false;
}

// Appends the token's bytes to the sequence's tail and looks for a stop string ending in them (sets
// c.stop_string); the tail keeps the last max_stop_ - 1 bytes.
bool EngineRun::hits_stop_string(Live& s, const RolloutRequest& q, Completion& c, int32_t token) {
  if (max_stop_ == 0 || q.stop_strings.empty()) return false;
  std::string_view piece = cfg_.token_bytes(token);
  s.tail.append(piece);
  for (size_t i = 0; i < q.stop_strings.size(); ++i) {
    const std::string& ss = q.stop_strings[i];
    size_t from = s.tail.size() >= piece.size() + ss.size() ? s.tail.size() - piece.size() - ss.size() + 1 : 0;
    if (s.tail.find(ss, from) != std::string::npos) {
      c.stop_string = static_cast<int32_t>(i);
      return true;
    }
  }
  if (s.tail.size() >= max_stop_) s.tail.erase(0, s.tail.size() - (max_stop_ - 1));
  return false;
}

// The hook's forks of s into spawned_: at most fork_max_new tokens past the fork point (but every
// forced token), never past the context; none when not one more token fits.
void EngineRun::fork(Live& s, const RolloutRequest& q, const Completion& c, const HookDecision& d) {
  const int64_t here = static_cast<int64_t>(c.tokens.size());
  int64_t cap = d.fork_max_new > 0 ? std::min(q.max_new, here + d.fork_max_new) : q.max_new;
  cap = std::max(cap, here + static_cast<int64_t>(d.fork_forced.size()));
  cap = std::min(cap, model_.config().max_position_embeddings - static_cast<int64_t>(q.prompt.size()));
  for (int32_t k = 0; k < d.forks && cap > here; ++k) {  // children share everything so far, then draw on their own
    Completion& f = out_.emplace_back(c);
    f.member = next_member_[static_cast<size_t>(s.req)]++;
    f.parent = c.member;
    f.fork_pos = here;
    f.stream = fork_stream(c.stream, ++s.forks_made);
    f.forced = 0;
    f.forced_pos = here;
    Live child = new_live(s.req, static_cast<int64_t>(out_.size()) - 1, pool_.fork(s.kv, s.kv.len));
    child.pending = s.pending;
    child.tail = s.tail;
    child.forced.assign(d.fork_forced.rbegin(), d.fork_forced.rend());
    child.max_len = cap;
    spawned_.push_back(std::move(child));
    ++stats_.forks;
  }
}

// The end of a turn: parked when the driver keeps it, else final.
void EngineRun::finish(Live& s, FinishReason why) {
  Completion& c = out_[static_cast<size_t>(s.out)];
  c.finish = why;
  if (driver_ && park(s, why)) return;
  pool_.release(s.kv);
  if (driver_) driver_->finished(c);
}

EngineRun::Live EngineRun::new_live(int64_t r, int64_t out_index, SeqKv kv) {
  const RolloutRequest& q = rq(r);
  Live s{.req = r,
         .out = out_index,
         .kv = std::move(kv),
         .rng = Rng(q.seed, out_[static_cast<size_t>(out_index)].stream),
         .sampler = Sampler(q.sampler),
         .max_len = q.turn_max_new > 0 ? std::min(q.max_new, q.turn_max_new) : q.max_new};
  s.kv.blocks.reserve(static_cast<size_t>(blocks_for(static_cast<int64_t>(q.prompt.size()) + q.max_new) + 1));
  if (max_stop_ > 0) s.tail.reserve(2 * max_stop_ + 64);
  return s;
}

// Kept activations: a fresh slot for the token at position p of a sequence whose slots so far are
// `slots` (its tag links the slot of p - 1, so a row can be checked later); none once a position
// before it went unkept. Entries past p are stale from here on. Always one save_ entry per row.
void EngineRun::keep_activation(bool on, std::vector<int64_t>& slots, int64_t p, int32_t token) {
  int64_t slot = -1;
  if (on && store_) {
    const int64_t prev = p > 0 && p - 1 < static_cast<int64_t>(slots.size()) ? slots[static_cast<size_t>(p - 1)] : -1;
    if (p == 0 || prev >= 0) slot = store_->add(token, static_cast<int32_t>(p), prev);
    slots.resize(static_cast<size_t>(p + 1), -1);
    slots[static_cast<size_t>(p)] = slot;
  }
  save_.push_back(slot);
}

bool EngineRun::any_kept() const {
  return store_ && std::any_of(save_.begin(), save_.end(), [](int64_t x) { return x >= 0; });
}

}  // namespace temper::rollout
