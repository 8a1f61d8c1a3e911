// The CUDA decoder against the CPU decoder (itself golden-tested against transformers): the same
// random weights give the same log-probs, entropies and gradients within bf16 tolerance (the device
// runs bf16 GEMMs), an AdamW step moves the weights as the CPU optimizer does, and decode steps on
// the paged device KV cache (eager and CUDA-graph replay) reproduce the CPU's full-sequence
// log-probs; the speculative drafter's steps on the device (its int4 block linears) give the CPU drafter's logits,
// over the whole vocabulary and over a subset.
// Skips where no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/tolerance.h"
#include "temper/kernels/adamw.h"
#include "temper/kernels/cuda/runtime.h"
#include "temper/model/cuda_transformer.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"

namespace temper {
namespace {

using test::Kind;
using test::all_close;
using test::tolerance;

ModelConfig small(bool qwen2) {
  ModelConfig c;
  c.arch = qwen2 ? Arch::qwen2 : Arch::llama;
  c.vocab_size = 300;
  c.hidden_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.intermediate_size = 256;
  c.max_position_embeddings = 128;
  c.rope_theta = qwen2 ? 1e6 : 1e4;
  c.tie_word_embeddings = !qwen2;
  c.qkv_bias = qwen2;
  return c;
}

class PgLoss : public kernels::ClassifierLoss {  // -A_n * logprob - 0.01 * entropy
 public:
  void coefs(int64_t n, float, float, float* g_lp, float* g_ent) const override {
    *g_lp = -(static_cast<float>(n % 5) - 2.f) * 0.1f;
    *g_ent = -0.01f;
  }
};

// Cosine similarity and relative norm error of two gradient vectors.
::testing::AssertionResult grads_close(const std::vector<float>& got, const std::vector<float>& want) {
  double dot = 0, gg = 0, ww = 0, dd = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    dot += double(got[i]) * want[i];
    gg += double(got[i]) * got[i];
    ww += double(want[i]) * want[i];
    dd += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
  }
  const double cos = dot / std::sqrt(gg * ww + 1e-300), rel = std::sqrt(dd / (ww + 1e-300));
  if (cos > 0.999 && rel < 0.05) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "gradient cosine " << cos << ", relative error " << rel;
}

class CudaModel : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!cuda::available()) GTEST_SKIP() << "no CUDA device on this machine (scripts/gpu-check runs these on a GPU)";
  }
};

TEST_P(CudaModel, ForwardBackwardMatchesTheCpuModel) {
  const ModelConfig cfg = small(GetParam());
  const int64_t B = 3, T = 37, N = B * T;
  Transformer cpu(cfg);
  cpu.init_random(7, 0.05f);
  cpu.plan(N, T);
  std::vector<int32_t> tokens(N), targets(N);
  for (int64_t n = 0; n < N; ++n) {
    tokens[n] = static_cast<int32_t>((n * 31 + 5) % cfg.vocab_size);
    targets[n] = (n % T == T - 1) ? -1 : static_cast<int32_t>(((n + 1) * 31 + 5) % cfg.vocab_size);
  }
  PgLoss loss;
  std::vector<float> lp(N), ent(N);
  cpu.zero_grad();
  cpu.forward_backward(tokens.data(), targets.data(), B, T, loss, lp.data(), ent.data());
  std::vector<float> want_grads(cpu.grads(), cpu.grads() + cpu.flat_size());

  CudaTransformer gpu(cfg);
  gpu.set_params(cpu.params());
  gpu.plan(N, T);
  gpu.zero_grad();
  std::vector<float> glp(N), gent(N);
  gpu.forward_backward(tokens.data(), targets.data(), B, T, loss, glp.data(), gent.data());
  EXPECT_TRUE(all_close(glp, lp, tolerance(Kind::bf16, cfg.hidden_size), 2e-2));
  EXPECT_TRUE(all_close(gent, ent, tolerance(Kind::bf16, cfg.hidden_size)));
  std::vector<float> got_grads(static_cast<size_t>(cpu.flat_size()));
  gpu.get_grads(got_grads.data());
  EXPECT_TRUE(grads_close(got_grads, want_grads));

  // One AdamW step from these gradients on both sides.
  kernels::AdamWConfig ac;
  gpu.adamw_step(ac, 1e-3f, 1, 1.0);
  std::vector<float> p(cpu.params(), cpu.params() + cpu.flat_size()), m(p.size()), v(p.size());
  kernels::clip_grad_norm(want_grads.data(), cpu.flat_size(), 1.0);
  kernels::adamw_step(p.data(), want_grads.data(), m.data(), v.data(), cpu.flat_size(), ac, 1e-3f, 1);
  std::vector<float> gp(p.size());
  gpu.get_params(gp.data());
  // Adam's first step moves every weight by ~lr * sign(g): compare the moves where the gradient is
  // clearly away from 0 (where bf16 noise cannot flip its sign).
  double ss = 0;
  for (float g : want_grads) ss += double(g) * g;
  const double rms = std::sqrt(ss / double(want_grads.size()));
  std::vector<float> dm_got, dm_want;
  for (size_t i = 0; i < p.size(); ++i)
    if (std::fabs(want_grads[i]) > 0.05 * rms) {
      dm_got.push_back(gp[i] - cpu.params()[i]);
      dm_want.push_back(p[i] - cpu.params()[i]);
    }
  ASSERT_GT(dm_want.size(), p.size() / 4);
  EXPECT_TRUE(grads_close(dm_got, dm_want));
}

TEST_P(CudaModel, DecodeStepsOnThePagedCacheReproduceTheFullSequenceLogprobs) {
  const ModelConfig cfg = small(GetParam());
  const int64_t rows = 4, prompt = 1, steps = 12, bs = 4, blocks_per_row = 8;
  Transformer cpu(cfg);
  cpu.init_random(11, 0.05f);
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "CUDA graph" : "eager");
    CudaTransformer gpu(cfg);
    gpu.set_params(cpu.params());
    gpu.plan_decode(rows, rows * blocks_per_row, bs, blocks_per_row);
    auto& d = gpu.decode_buffers();
    std::vector<int32_t> tok(rows), pos(rows, 0), len(rows, 1), tables(rows * blocks_per_row);
    for (int64_t r = 0; r < rows; ++r) tok[r] = static_cast<int32_t>(10 + r);
    for (int64_t i = 0; i < rows * blocks_per_row; ++i) tables[i] = static_cast<int32_t>((i * 5) % (rows * blocks_per_row));
    std::vector<float> temps(rows, 1.0f);
    temps[1] = 0.f;  // one greedy row
    cudaStream_t st = gpu.stream();  // the model's stream does not wait for the legacy one
    cuda::copy_to_device(d.tokens.data(), tok.data(), sizeof(int32_t) * rows, st);
    cuda::copy_to_device(d.pos.data(), pos.data(), sizeof(int32_t) * rows, st);
    cuda::copy_to_device(d.kv_len.data(), len.data(), sizeof(int32_t) * rows, st);
    cuda::copy_to_device(d.tables.data(), tables.data(), sizeof(int32_t) * tables.size(), st);
    cuda::copy_to_device(d.temperature.data(), temps.data(), sizeof(float) * rows, st);
    cuda::synchronize(st);
    std::vector<std::vector<int32_t>> seq(rows);
    std::vector<std::vector<float>> plp(rows);
    for (int64_t r = 0; r < rows; ++r) seq[r].push_back(tok[r]);
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<double> u(rows);
      for (int64_t r = 0; r < rows; ++r) u[r] = std::fmod(0.137 * double(s * rows + r + 1), 1.0);
      cuda::copy_to_device(d.u.data(), u.data(), sizeof(double) * rows, gpu.stream());
      cuda::synchronize(gpu.stream());  // u is a stack vector
      gpu.decode_step(rows, graph);
      std::vector<int32_t> drawn(rows);
      std::vector<float> lp(rows);
      cuda::copy_to_host(drawn.data(), d.drawn.data(), sizeof(int32_t) * rows, gpu.stream());
      cuda::copy_to_host(lp.data(), d.policy_logprob.data(), sizeof(float) * rows, gpu.stream());
      for (int64_t r = 0; r < rows; ++r) {
        seq[r].push_back(drawn[r]);
        plp[r].push_back(lp[r]);
      }
    }
    // The CPU model scores each whole sequence: step s drew seq[s + 1] after seq[0..s].
    const int64_t T = prompt + steps - 1;  // inputs seq[0..T), targets seq[1..T]
    cpu.plan(T, T);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int32_t> toks(seq[r].begin(), seq[r].begin() + T), tg(seq[r].begin() + 1, seq[r].begin() + 1 + T);
      std::vector<float> lp(T), ent(T);
      cpu.forward_logprobs(toks.data(), tg.data(), 1, T, lp.data(), ent.data());
      EXPECT_TRUE(all_close(plp[r], lp, tolerance(Kind::bf16, cfg.hidden_size), 2e-2)) << "row " << r;
    }
  }
}

// The drafter's pass through a model with the CUDA device attached (Transformer::forward_paged with a drafter ->
// CudaTransformer::forward_paged_draft): after the policy has written a prompt's K/V, a drafter step over two rows
// gives the CPU drafter's logits within bf16 tolerance (the device's activations are bf16), with the bf16 head and
// the int4 one, and after a refresh (new weights uploaded); they differ from the policy's own logits (the 4-bit
// weights were used). With a vocabulary subset (the drafter's own head rows uploaded, the logits scattered on the
// device) the same tokens are -inf on both and the rest agree as before.
TEST_P(CudaModel, DrafterStepsOnTheDeviceMatchTheCpuDrafter) {
  const ModelConfig cfg = small(GetParam());
  const int64_t V = cfg.vocab_size, P = 6;
  Transformer cpu(cfg), dev(cfg);
  cpu.init_random(13, 0.05f);
  auto same_weights = [&] {
    std::memcpy(dev.params(), cpu.params(), sizeof(float) * static_cast<size_t>(cpu.flat_size()));
    dev.params_updated();
  };
  same_weights();
  dev.attach_device(std::make_shared<CudaTransformer>(cfg));
  // Prompt rows 0..P-1 of one sequence (the policy), then R rows P.. (the drafter), all wanting logits: R = 2 takes
  // the device's one-warp-per-column product for the bf16 head, R = 3 cuBLASLt's.
  auto run = [&](Transformer& m, const Int4Drafter* drafter, int64_t R) {
    KvPool pool(cfg, 4, 16);
    SeqKv s;
    pool.reserve(s, P + R);
    std::vector<int32_t> tok(P + R), pos(P + R);
    for (int64_t i = 0; i < P + R; ++i) {
      tok[i] = static_cast<int32_t>((7 * i + 3) % V);
      pos[i] = static_cast<int32_t>(i);
    }
    std::vector<const int32_t*> tables(P + R, s.blocks.data());
    std::vector<int64_t> out(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) out[static_cast<size_t>(r)] = r;
    std::vector<float> logits(static_cast<size_t>(R * V));
    PagedStep st;
    st.n = P;
    st.tokens = tok.data();
    st.pos = pos.data();
    st.tables = tables.data();
    m.forward_paged(st, pool);
    st.n = R;
    st.tokens = tok.data() + P;
    st.pos = pos.data() + P;
    st.out_rows = out.data();
    st.n_out = R;
    st.logits = logits.data();
    m.forward_paged(st, pool, drafter);
    return logits;
  };
  // A vocabulary subset: 120 of the 300 tokens, ranked from counts that favour every third token (then the lowest
  // ids); the subset's logits equal the whole head's on the CPU and are -inf elsewhere.
  std::vector<int32_t> seen;
  for (int32_t t = 0; t < V; t += 3) seen.insert(seen.end(), 1 + t % 4, t);
  for (int64_t R : {int64_t{2}, int64_t{3}}) {
    for (int64_t vocab : {int64_t{0}, int64_t{120}}) {
      for (DraftHead head : {DraftHead::bf16, DraftHead::int4}) {
        SCOPED_TRACE(std::string(head == DraftHead::bf16 ? "bf16 head" : "int4 head") + ", vocabulary " +
                     std::to_string(vocab) + ", " + std::to_string(R) + " rows");
        for (int refresh = 0; refresh < 2; ++refresh) {
          if (refresh) {  // new weights: the drafter's copy changes, the device uploads it again
            for (int64_t i = 0; i < cpu.flat_size(); ++i) cpu.params()[i] *= 1.1f;
            cpu.params_updated();
            same_weights();
          }
          Int4Drafter drafter(128, 0, head);
          drafter.set_vocab(vocab);
          drafter.observe(seen);
          drafter.refresh(dev);  // quantized in the device's layout (rows); the CPU reads it too
          ASSERT_EQ(drafter.layers()[0].qkv.layout, kernels::Int4Layout::rows);
          ASSERT_EQ(static_cast<int64_t>(drafter.vocab_ids().size()), vocab);
          const auto want = run(cpu, &drafter, R), got = run(dev, &drafter, R), policy = run(dev, nullptr, R);
          std::vector<float> got_in, want_in;  // the logits inside the subset (all of them without one)
          int64_t outside = 0;
          for (int64_t i = 0; i < R * V; ++i) {
            ASSERT_EQ(std::isinf(got[i]), std::isinf(want[i]))
                << "logit " << i << ": device " << got[i] << ", CPU " << want[i];
            if (std::isinf(want[i])) {
              EXPECT_LT(want[i], 0.f);
              ++outside;
              continue;
            }
            got_in.push_back(got[i]);
            want_in.push_back(want[i]);
          }
          EXPECT_EQ(outside, vocab ? R * (V - vocab) : 0);
          EXPECT_TRUE(all_close(got_in, want_in, tolerance(Kind::bf16, cfg.hidden_size), 2e-2))
              << "refresh " << refresh;
          double apart = 0;
          for (int64_t i = 0; i < R * V; ++i)
            if (!std::isinf(got[i])) apart = std::max(apart, double(std::fabs(got[i] - policy[i])));
          EXPECT_GT(apart, 1e-3) << "the drafter's logits equal the policy's: its 4-bit weights were not used";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaAndQwen2, CudaModel, ::testing::Values(false, true));

}  // namespace
}  // namespace temper
