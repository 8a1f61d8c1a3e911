#include "temper/kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

namespace {
// Per-task stack buffers: a query row's heads' accumulators (64 KiB), one block's scores for a group of
// query heads (64 KiB), a bf16 block's K and V rows of one head widened to f32 (2 x 32 KiB:
// block_size x head_dim <= kMaxWidened).
constexpr int64_t kMaxHeadDim = 512, kMaxBlock = 256, kMaxHeads = 128, kMaxQueryFloats = 16384, kMaxWidened = 8192,
                  kMaxScores = 16384;
// A row's visible positions are cut wherever they cross a multiple of this many (rounded up to whole blocks) into
// pieces, merged afterwards: a long row then takes every core, not one (a batch of few long sequences: the long tail
// of a rollout, a served chat). The cuts sit at fixed positions, so a row's result depends on its own length (and
// window) only, never on the batch it is in; a row that crosses no cut is one piece and merges nothing.
constexpr int64_t kSplitPositions = 512;

// Positions [begin, end) of query row `row`: a piece of it, or all of it (piece -1). A piece's state goes to slot
// `piece` of the call's state buffer (a row's pieces in consecutive slots) for the merge.
struct Span {
  int64_t row, begin, end, piece;
};

// A task's online-softmax state: per query head the running max and sum, and its D accumulators.
struct SoftmaxState {
  float* m;
  float* l;
  float* acc;
};

// One call's constants and the per-span work.
class PagedRun {
 public:
  explicit PagedRun(const PagedAttnArgs& a)
      : a_(a),
        t_(isa_table()),
        group_(a.H / a.Hkv),
        row_(a.Hkv * a.D),
        elem_(a.k_pool16 ? 2 : 4),
        scale_(attn_scale(a.opt, a.D)),
        cap_(a.opt.softcap),
        widen_(a.k_pool16 && a.block_size * a.D <= kMaxWidened),
        // Query heads per kernel call: a KV head's whole group when its scores fit the scratch, else one.
        hstep_(group_ * ((a.block_size + 15) / 16 * 16) <= kMaxScores ? group_ : 1),
        k_bytes_(a.k_pool16 ? reinterpret_cast<const char*>(a.k_pool16) : reinterpret_cast<const char*>(a.k_pool)),
        v_bytes_(a.k_pool16 ? reinterpret_cast<const char*>(a.v_pool16) : reinterpret_cast<const char*>(a.v_pool)) {}

  // Positions [first, len) of a row of len are read: a window's first position may fall inside a block.
  int64_t first_of(int64_t len) const { return a_.opt.window > 0 ? std::max<int64_t>(0, len - a_.opt.window) : 0; }

  // Where the span's first block sits in the pools (bytes), and its bytes up to the span's end (from the block's
  // start: a window's first position may fall inside it).
  void first_block(const Span& s, int64_t& at, int64_t& bytes) const {
    const int64_t b0 = s.begin / a_.block_size * a_.block_size;
    bytes = s.end > s.begin ? std::min(a_.block_size, s.end - b0) * row_ * elem_ : 0;
    at = bytes > 0 ? a_.block_tables[s.row][b0 / a_.block_size] * a_.block_size * row_ * elem_ : 0;
  }

  // The span's first block on its way into L2 (a stream's first block has no earlier one to hide behind).
  void prefetch_first(const Span& s) const {
    int64_t at = 0, bytes = 0;
    first_block(s, at, bytes);
    for (int64_t off = 0; off < bytes; off += 64) {
      __builtin_prefetch(k_bytes_ + at + off, 0, 2);
      __builtin_prefetch(v_bytes_ + at + off, 0, 2);
    }
  }

  // The span's blocks into st (which starts empty: m -inf, l and acc 0). Each KV block is read once (all KV heads'
  // rows, contiguous) while the query heads of each KV head take it together (the ISA kernel shares each K/V row among
  // them). next: the span this thread takes after this one (its first block is prefetched as the last one is used).
  void attend(const Span& s, SoftmaxState st, const Span* next) const {
    const int32_t* table = a_.block_tables[s.row];
    const float* q = a_.q + s.row * a_.q_stride;
    float scores[kMaxScores];        // on the stack: no allocation on any thread
    float widened[2 * kMaxWidened];  // a bf16 block's rows in f32, where the ISA kernel needs them
    const int64_t bs = a_.block_size;
    for (int64_t b0 = s.begin / bs * bs; b0 < s.end; b0 += bs) {
      const int64_t p0 = std::max(b0, s.begin), nb = std::min(b0 + bs, s.end) - p0;
      const int64_t blk = table[b0 / bs];
      // The next block's K and V rows on their way into L1 while this one is used: a share with each head group's
      // pass, which the ISA kernel spreads over its keys (a burst of the whole block's lines at once holds the miss
      // buffers this block's own loads need: with the burst into L2, 19.3-20.6 ms for bench/paged_attention's step;
      // spread into L1, 11.7-12.2).
      const int64_t b1 = b0 + bs;
      int64_t next_bytes = b1 < s.end ? std::min(bs, s.end - b1) * row_ * elem_ : 0;
      int64_t next_at = next_bytes > 0 ? table[b1 / bs] * bs * row_ * elem_ : 0;
      if (b1 >= s.end && next) first_block(*next, next_at, next_bytes);
      const int64_t passes = (a_.H + hstep_ - 1) / hstep_, share = (next_bytes / 64 + passes - 1) / passes * 64;
      for (int64_t h = 0; h < a_.H; h += hstep_) {  // the query heads of one KV head together
        const int64_t pb = h / hstep_ * share, pe = std::min(next_bytes, (h / hstep_ + 1) * share);
        const PrefetchSpan pf{k_bytes_ + next_at + pb, v_bytes_ + next_at + pb, pe > pb ? (pe - pb + 63) / 64 : 0};
        const int64_t at = (blk * bs + p0 - b0) * row_ + h / group_ * a_.D;
        if (a_.k_pool16)
          t_.attn_group_update_bf16(q + h * a_.D, hstep_, a_.k_pool16 + at, a_.v_pool16 + at, row_, nb, a_.D, scale_,
                                    cap_, scores, st.m + h, st.l + h, st.acc + h * a_.D, widen_ ? widened : nullptr,
                                    pf);
        else
          t_.attn_group_update(q + h * a_.D, hstep_, a_.k_pool + at, a_.v_pool + at, row_, nb, a_.D, scale_, cap_,
                               scores, st.m + h, st.l + h, st.acc + h * a_.D, pf);
      }
    }
  }

  // Row i's output (and lse) from its state.
  void finish(int64_t i, SoftmaxState st) const {
    for (int64_t h = 0; h < a_.H; ++h) {
      float* o = a_.o + i * a_.o_stride + h * a_.D;
      const float inv = st.l[h] > 0.f ? 1.0f / st.l[h] : 0.f;
      for (int64_t d = 0; d < a_.D; ++d) o[d] = st.acc[h * a_.D + d] * inv;
      if (a_.lse) a_.lse[i * a_.H + h] = st.m[h] + std::log(st.l[h]);
    }
  }

  // States [first, first + count) of base (one row's pieces), in order, into the first: each head's max, its sums
  // and accumulators rescaled to it. Returns the merged state.
  SoftmaxState merge(float* base, int64_t first, int64_t count) const {
    const SoftmaxState into = state_at(base, first);
    for (int64_t c = first + 1; c < first + count; ++c)
      for (int64_t h = 0; h < a_.H; ++h) {
        const SoftmaxState p = state_at(base, c);
        const float mn = std::max(into.m[h], p.m[h]);
        const float ci = into.m[h] == -INFINITY ? 0.f : std::exp(into.m[h] - mn);
        const float cp = p.m[h] == -INFINITY ? 0.f : std::exp(p.m[h] - mn);
        for (int64_t d = 0; d < a_.D; ++d)
          into.acc[h * a_.D + d] = into.acc[h * a_.D + d] * ci + p.acc[h * a_.D + d] * cp;
        into.l[h] = into.l[h] * ci + p.l[h] * cp;
        into.m[h] = mn;
      }
    return into;
  }

  // State c of an array of them, and an empty one (m -inf, l and acc 0).
  SoftmaxState state_at(float* base, int64_t c) const {
    float* at = base + c * state_floats();
    return {at, at + a_.H, at + 2 * a_.H};
  }
  SoftmaxState empty_state(float* base, int64_t c = 0) const {
    const SoftmaxState st = state_at(base, c);
    std::fill(st.m, st.m + a_.H, -INFINITY);
    std::fill(st.l, st.l + a_.H + a_.H * a_.D, 0.f);  // l, then acc
    return st;
  }
  int64_t state_floats() const { return a_.H * (a_.D + 2); }

 private:
  const PagedAttnArgs& a_;
  const IsaTable& t_;
  const int64_t group_, row_, elem_;
  const float scale_, cap_;
  const bool widen_;
  const int64_t hstep_;
  const char* k_bytes_;
  const char* v_bytes_;
};

void check_args(const PagedAttnArgs& a) {
  TEMPER_CHECK(a.Hkv > 0 && a.H % a.Hkv == 0 && a.block_size > 0)
      << "paged attention: " << a.H << " heads over " << a.Hkv << " KV heads (a positive divisor of the heads), block "
      << "size " << a.block_size << " (positive)";
  TEMPER_CHECK((a.k_pool16 != nullptr) == (a.v_pool16 != nullptr)) << "paged attention: K and V caches of one dtype";
  TEMPER_CHECK(a.D <= kMaxHeadDim && a.block_size <= kMaxBlock)
      << "paged attention: head_dim " << a.D << " (max " << kMaxHeadDim << ") or block size " << a.block_size << " (max "
      << kMaxBlock << ") too large";
  TEMPER_CHECK(a.H <= kMaxHeads && a.H * a.D <= kMaxQueryFloats)
      << "paged attention: " << a.H << " heads x head_dim " << a.D << " (at most " << kMaxHeads << " heads, "
      << kMaxQueryFloats << " query floats)";
  attn_opts_check(a.opt, "paged_attention_fwd");
}

// Every row's spans in row order (cut at multiples of `cut`); row_span[i] is row i's first, row_span[n] the count.
// Returns the pieces: spans of rows cut in more than one, numbered in order.
int64_t plan_spans(const PagedRun& run, const PagedAttnArgs& a, int64_t cut, std::vector<Span>& spans,
                   std::vector<int64_t>& row_span) {
  spans.clear();
  row_span.assign(static_cast<size_t>(a.n + 1), 0);
  int64_t pieces = 0;
  for (int64_t i = 0; i < a.n; ++i) {
    const size_t s0 = spans.size();
    row_span[static_cast<size_t>(i)] = static_cast<int64_t>(s0);
    const int64_t len = a.kv_len[i];
    int64_t p = run.first_of(len);
    do {
      const int64_t e = std::min(len, (p / cut + 1) * cut);
      spans.push_back({i, p, e, -1});
      p = e;
    } while (p < len);
    if (spans.size() - s0 > 1)
      for (size_t k = s0; k < spans.size(); ++k) spans[k].piece = pieces++;
  }
  row_span[static_cast<size_t>(a.n)] = static_cast<int64_t>(spans.size());
  return pieces;
}

// run_at[r] .. run_at[r + 1]: run r's spans, contiguous, cut where the positions before reach r / runs of all (a span
// counts 16 positions more than it holds: each costs a start).
void plan_runs(const std::vector<Span>& spans, int64_t runs, std::vector<int64_t>& run_at) {
  constexpr int64_t kSpanCost = 16;
  int64_t total = 0;
  for (const Span& s : spans) total += s.end - s.begin + kSpanCost;
  run_at.assign(static_cast<size_t>(runs + 1), static_cast<int64_t>(spans.size()));
  run_at[0] = 0;
  int64_t done = 0, r = 1;
  for (size_t i = 0; i < spans.size() && r < runs; ++i) {
    done += spans[i].end - spans[i].begin + kSpanCost;
    while (r < runs && done * runs >= total * r) run_at[static_cast<size_t>(r++)] = static_cast<int64_t>(i + 1);
  }
}

}  // namespace

void paged_attention_fwd(const PagedAttnArgs& a) {
  check_args(a);
  if (a.n <= 0) return;
  const PagedRun run(a);
  const int64_t cut = (kSplitPositions + a.block_size - 1) / a.block_size * a.block_size;
  // The calling thread's buffers, reused from call to call (the tasks run on other threads: a thread_local named in
  // them would be theirs, so they see these through references).
  thread_local std::vector<Span> spans_buf;
  thread_local std::vector<int64_t> row_span_buf;
  thread_local std::vector<float> states_buf;
  thread_local std::vector<int64_t> run_at_buf;
  std::vector<Span>& spans = spans_buf;
  std::vector<int64_t>& row_span = row_span_buf;
  std::vector<float>& states = states_buf;
  const int64_t pieces = plan_spans(run, a, cut, spans, row_span);  // their states merge after the tasks
  const int64_t n_spans = static_cast<int64_t>(spans.size());
  if (static_cast<int64_t>(states.size()) < pieces * run.state_floats())
    states.resize(static_cast<size_t>(pieces * run.state_floats()));
  // The spans in contiguous runs of about equal positions, one per thread: a thread streams through its run (each
  // block, also a span's first, prefetched while the one before is used). Which thread runs a span never changes
  // its arithmetic.
  const int64_t runs = std::min<int64_t>(thread_pool().size(), n_spans);
  std::vector<int64_t>& run_at = run_at_buf;
  plan_runs(spans, runs, run_at);
  parallel_tasks(runs, [&](int64_t r) {
    float local[kMaxQueryFloats + 2 * kMaxHeads];
    const int64_t s0 = run_at[static_cast<size_t>(r)], s1 = run_at[static_cast<size_t>(r + 1)];
    if (s0 < s1) run.prefetch_first(spans[static_cast<size_t>(s0)]);
    for (int64_t sp = s0; sp < s1; ++sp) {
      const Span& s = spans[static_cast<size_t>(sp)];
      const SoftmaxState st = s.piece < 0 ? run.empty_state(local) : run.empty_state(states.data(), s.piece);
      run.attend(s, st, sp + 1 < s1 ? &spans[static_cast<size_t>(sp + 1)] : nullptr);
      if (s.piece < 0) run.finish(s.row, st);
    }
  });
  if (pieces == 0) return;
  parallel_tasks(a.n, [&](int64_t i) {
    const int64_t s0 = row_span[static_cast<size_t>(i)], s1 = row_span[static_cast<size_t>(i + 1)];
    const int64_t p0 = spans[static_cast<size_t>(s0)].piece;
    if (p0 < 0) return;  // whole: finished above
    run.finish(i, run.merge(states.data(), p0, s1 - s0));
  });
}

}  // namespace temper::kernels
