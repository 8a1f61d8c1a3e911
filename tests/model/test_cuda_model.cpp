// The CUDA decoder against the CPU decoder (itself golden-tested against transformers): the same
// random weights give the same log-probs, entropies and gradients within bf16 tolerance (the device
// runs bf16 GEMMs), an AdamW step moves the weights as the CPU optimizer does, and decode steps on
// the paged device KV cache (eager and CUDA-graph replay) reproduce the CPU's full-sequence
// log-probs; the speculative drafter's steps on the device (its int4 block linears) give the CPU drafter's logits,
// over the whole vocabulary and over a subset. Every golden architecture (tests/data/golden: Llama-3.1, Mistral,
// Qwen3, Gemma-2/3, Phi-3, ...) on the device against the CPU model with the golden's weights: log-probs,
// entropies, every gradient, the weights and the forward after an AdamW step, paged rollout logits, decode steps;
// and the device ops those families add (per-head RMSNorm, the sandwich norm, the embedding gradient's scale and
// padding rows) against the CPU kernels. Skips where no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "common/tolerance.h"
#include "temper/io/hf_config.h"
#include "temper/io/hf_weights.h"
#include "temper/io/safetensors.h"
#include "temper/kernels/adamw.h"
#include "temper/kernels/cuda/ops.h"
#include "temper/kernels/cuda/runtime.h"
#include "temper/kernels/rmsnorm.h"
#include "temper/model/cuda_transformer.h"
#include "temper/model/int4_drafter.h"
#include "temper/model/kv_pool.h"
#include "temper/model/transformer.h"

namespace temper {
namespace {

using test::all_close;
using test::Kind;
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

// Recomputation on the device (switched on after planning, so the arena is carved anew): the same log-probs and
// gradients as the stored path's (the same kernels on the same inputs; bitwise where they are deterministic, held
// here to the device tolerances), and a smaller arena.
TEST_P(CudaModel, RecomputeGivesTheStoredPathsGradients) {
  const ModelConfig cfg = small(GetParam());
  const int64_t B = 3, T = 37, N = B * T;
  Transformer cpu(cfg);
  cpu.init_random(7, 0.05f);
  std::vector<int32_t> tokens(N), targets(N);
  for (int64_t n = 0; n < N; ++n) {
    tokens[n] = static_cast<int32_t>((n * 31 + 5) % cfg.vocab_size);
    targets[n] = (n % T == T - 1) ? -1 : static_cast<int32_t>(((n + 1) * 31 + 5) % cfg.vocab_size);
  }
  PgLoss loss;
  std::vector<float> lp[2], ent[2], grads[2];
  size_t arena[2] = {0, 0};
  for (int rc = 0; rc < 2; ++rc) {
    CudaTransformer gpu(cfg);
    gpu.set_params(cpu.params());
    gpu.plan(N, T);
    gpu.set_recompute(rc == 1);
    EXPECT_EQ(gpu.recompute(), rc == 1);
    arena[rc] = gpu.activation_bytes();
    gpu.zero_grad();
    lp[rc].resize(N), ent[rc].resize(N), grads[rc].resize(static_cast<size_t>(cpu.flat_size()));
    gpu.forward_backward(tokens.data(), targets.data(), B, T, loss, lp[rc].data(), ent[rc].data());
    gpu.get_grads(grads[rc].data());
  }
  EXPECT_LT(arena[1], arena[0]);
  EXPECT_TRUE(all_close(lp[1], lp[0], tolerance(Kind::reduction, cfg.hidden_size)));
  EXPECT_TRUE(all_close(ent[1], ent[0], tolerance(Kind::reduction, cfg.hidden_size)));
  EXPECT_TRUE(grads_close(grads[1], grads[0]));
}

// Decode steps on the device's paged cache (eager, then CUDA-graph replay) drawing tokens: the policy log-probs
// of the drawn tokens equal the CPU model's full-sequence forward over the same tokens.
void check_decode_steps(Transformer& cpu) {
  const ModelConfig& cfg = cpu.config();
  const int64_t rows = 4, prompt = 1, steps = 12, bs = 4, blocks_per_row = 8;
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "CUDA graph" : "eager");
    CudaTransformer gpu(cfg);
    gpu.set_params(cpu.params());
    gpu.plan_decode(rows, rows * blocks_per_row, bs, blocks_per_row);
    auto& d = gpu.decode_buffers();
    std::vector<int32_t> tok(rows), pos(rows, 0), len(rows, 1), tables(rows * blocks_per_row);
    for (int64_t r = 0; r < rows; ++r) tok[r] = static_cast<int32_t>(10 + r);
    for (int64_t i = 0; i < rows * blocks_per_row; ++i)
      tables[i] = static_cast<int32_t>((i * 5) % (rows * blocks_per_row));
    std::vector<float> temps(rows, 1.0f);
    temps[1] = 0.f;                  // one greedy row
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

TEST_P(CudaModel, DecodeStepsOnThePagedCacheReproduceTheFullSequenceLogprobs) {
  Transformer cpu(small(GetParam()));
  cpu.init_random(11, 0.05f);
  check_decode_steps(cpu);
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

// ---- The device ops of the other families against the CPU kernels.

std::vector<float> ramp(int64_t n, double a, double b) {  // deterministic values in about [-b, b]
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(b * std::sin(a * double(i + 1)));
  return v;
}

std::vector<float> to_host(const cuda::DeviceBuffer<float>& d) {
  std::vector<float> out(d.size());
  cuda::copy_to_host(out.data(), d.data(), out.size() * sizeof(float), nullptr);
  return out;
}

cuda::DeviceBuffer<float> to_device(const std::vector<float>& h) {
  cuda::DeviceBuffer<float> d(h.size());
  cuda::copy_to_device(d.data(), h.data(), h.size() * sizeof(float), nullptr);
  cuda::synchronize(nullptr);
  return d;
}

class CudaModelOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::available()) GTEST_SKIP() << "no CUDA device on this machine (scripts/gpu-check runs these on a GPU)";
  }
};

// Qwen3's q/k norms: N rows of [q (H heads) | k (Hkv heads) | v] in a row of `stride`; the device's forward (y, rstd),
// in-place backward (dx over dy) and dw equal kernels::rmsnorm_heads_* (D = 48: lanes past D in the last pass).
TEST_F(CudaModelOps, PerHeadRmsNormMatchesTheCpuKernels) {
  const int64_t N = 300, H = 3, D = 48, stride = 7 * D + 5;  // 300 rows: three column chunks
  const float eps = 1e-6f;
  const std::vector<float> x = ramp(N * stride, 0.37, 2.0), dy = ramp(N * stride, 0.11, 1.0), w = ramp(D, 0.7, 1.5);
  std::vector<float> y(x), rstd(static_cast<size_t>(N * H)), dx(dy), dw(static_cast<size_t>(D), 0.25f);
  kernels::rmsnorm_heads_fwd(x.data(), w.data(), y.data(), rstd.data(), N, H, D, stride, eps);
  kernels::rmsnorm_heads_bwd(dx.data(), x.data(), w.data(), rstd.data(), dx.data(), dw.data(), N, H, D, stride);
  auto dx_d = to_device(x), dy_d = to_device(dy), w_d = to_device(w), y_d = to_device(x);
  auto rstd_d = to_device(std::vector<float>(rstd.size())), dw_d = to_device(std::vector<float>(D, 0.25f));
  auto ws = to_device(std::vector<float>(static_cast<size_t>(cuda::column_workspace(N, D))));
  cuda::rmsnorm_heads_fwd(dx_d.data(), w_d.data(), y_d.data(), rstd_d.data(), N, H, D, stride, eps, nullptr);
  cuda::rmsnorm_heads_bwd(dy_d.data(), dx_d.data(), w_d.data(), rstd_d.data(), dy_d.data(), dw_d.data(), N, H, D,
                          stride, ws.data(), nullptr);
  EXPECT_TRUE(all_close(to_host(y_d), y, tolerance(Kind::reduction, D)));  // (the rows' other columns untouched)
  EXPECT_TRUE(all_close(to_host(rstd_d), rstd, tolerance(Kind::reduction, D)));
  EXPECT_TRUE(all_close(to_host(dy_d), dx, tolerance(Kind::reduction, D)));
  EXPECT_TRUE(all_close(to_host(dw_d), dw, tolerance(Kind::reduction, N * H)));
}

// Gemma's sandwich norm (y = res + rmsnorm(x) w), the (1 + w) weights, the embedding scale, and the embedding
// gradient's scale with the padding_idx rows zeroed, against the CPU kernels and formulas.
TEST_F(CudaModelOps, SandwichNormScaleAndEmbeddingGradientMatchTheCpu) {
  const int64_t N = 5, C = 200;
  const float eps = 1e-6f, s = std::sqrt(200.f);
  const std::vector<float> x = ramp(N * C, 0.29, 3.0), res = ramp(N * C, 0.05, 1.0), w = ramp(C, 0.9, 0.5);
  std::vector<float> y(x.size()), rstd(N), want(x.size()), w1(w.size()), xs(x), g(x);
  kernels::rmsnorm_fwd(x.data(), w.data(), y.data(), rstd.data(), N, C, eps);
  for (size_t i = 0; i < y.size(); ++i) want[i] = res[i] + y[i];
  for (size_t i = 0; i < w.size(); ++i) w1[i] = 1.f + w[i];
  for (float& v : xs) v *= s;
  const std::vector<int32_t> ids = {3, 47, 9, 47, 0};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) g[n * C + c] = ids[n] == 47 ? 0.f : g[n * C + c] * s;
  auto x_d = to_device(x), res_d = to_device(res), w_d = to_device(w), y_d = to_device(x), r_d = to_device(rstd);
  cuda::rmsnorm_residual_fwd(x_d.data(), w_d.data(), res_d.data(), y_d.data(), r_d.data(), N, C, eps, nullptr);
  EXPECT_TRUE(all_close(to_host(y_d), want, tolerance(Kind::reduction, C)));
  EXPECT_TRUE(all_close(to_host(r_d), rstd, tolerance(Kind::reduction, C)));
  auto w1_d = to_device(w);
  cuda::add_scalar(w_d.data(), 1.f, w1_d.data(), C, nullptr);
  EXPECT_EQ(to_host(w1_d), w1);
  cuda::scale(x_d.data(), s, N * C, nullptr);
  EXPECT_EQ(to_host(x_d), xs);
  cuda::DeviceBuffer<int32_t> ids_d(ids.size());
  cuda::copy_to_device(ids_d.data(), ids.data(), ids.size() * sizeof(int32_t), nullptr);
  auto g_d = to_device(x);
  cuda::embedding_grad_prep(g_d.data(), ids_d.data(), N, C, s, 47, nullptr);
  EXPECT_EQ(to_host(g_d), g);
}

// ---- Every golden architecture on the device against the CPU model with the golden's weights.

struct GoldenCase {
  ModelConfig cfg;
  std::unique_ptr<Transformer> cpu;
  std::vector<int32_t> ids;  // [B, T] the golden's input ids
  int64_t B = 0, T = 0;
};

GoldenCase load_golden(const std::string& name) {
  GoldenCase g;
  const std::string dir = test::test_data("golden/" + name);
  g.cfg = io::read_hf_config(dir + "/config.json");
  io::SafetensorsFile f = io::SafetensorsFile::open(dir + "/golden.safetensors");
  g.cpu = std::make_unique<Transformer>(g.cfg);
  io::load_hf_weights(*g.cpu, f, io::ExtraTensors::ignore);
  Tensor ids = f.get("input_ids");
  g.B = ids.dim(0);
  g.T = ids.dim(1);
  g.ids.assign(ids.data<int32_t>(), ids.data<int32_t>() + g.B * g.T);
  return g;
}

// A longer batch than the golden's: past every window, past Phi-3's original_max_position (its long RoPE factors),
// the padding token among the inputs.
std::vector<int32_t> long_batch(const ModelConfig& cfg, int64_t B, int64_t T) {
  std::vector<int32_t> ids(static_cast<size_t>(B * T));
  for (int64_t n = 0; n < B * T; ++n)
    ids[static_cast<size_t>(n)] = static_cast<int32_t>((n * 37 + 11) % cfg.vocab_size);
  if (cfg.pad_token_id >= 0) ids[3] = ids[T + 5] = static_cast<int32_t>(cfg.pad_token_id);
  return ids;
}

std::vector<int32_t> next_targets(const std::vector<int32_t>& ids, int64_t B, int64_t T) {
  std::vector<int32_t> t(ids.size(), -1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i + 1 < T; ++i) t[static_cast<size_t>(b * T + i)] = ids[static_cast<size_t>(b * T + i + 1)];
  return t;
}

// Per parameter tensor: the device gradient against the CPU's (bf16 GEMMs: a cosine and a relative error a little
// looser than the whole vector's). A tensor whose gradient is tiny next to the rest (Qwen2's k bias, felt only
// through RoPE's rotation) is held to the error bound on the scale of the whole gradient's RMS instead.
void expect_grads_per_tensor(const Transformer& cpu, const std::vector<float>& got, const std::vector<float>& want) {
  double all = 0;
  for (float w : want) all += double(w) * w;
  const double rms = std::sqrt(all / double(want.size()));
  for (const ParamEntry& e : cpu.layout().entries()) {
    double ww = 0, dd = 0, gw = 0, gg = 0;
    for (int64_t i = e.offset; i < e.offset + e.numel(); ++i) {
      const double g = got[static_cast<size_t>(i)], w = want[static_cast<size_t>(i)];
      ww += w * w;
      gg += g * g;
      gw += g * w;
      dd += (g - w) * (g - w);
    }
    const double floor = 0.05 * rms * std::sqrt(double(e.numel()));
    EXPECT_LT(std::sqrt(dd) / std::max(std::sqrt(ww), floor), 0.1) << e.name;
    if (std::sqrt(ww) > floor) {
      EXPECT_GT(gw / std::sqrt(gg * ww), 0.995) << e.name;
    }
  }
}

class CudaGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!cuda::available()) GTEST_SKIP() << "no CUDA device on this machine (scripts/gpu-check runs these on a GPU)";
  }
};

// The training pass (log-probs, entropies, every gradient) on the golden batch and a longer one; forward-only
// log-probs equal the training pass's bit for bit.
TEST_P(CudaGolden, ForwardBackwardMatchesTheCpuModel) {
  GoldenCase g = load_golden(GetParam());
  Transformer& cpu = *g.cpu;
  CudaTransformer gpu(g.cfg);
  gpu.set_params(cpu.params());
  for (int64_t T : {g.T, int64_t{40}}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    const int64_t B = g.B, N = B * T;
    const std::vector<int32_t> ids = T == g.T ? g.ids : long_batch(g.cfg, B, T), targets = next_targets(ids, B, T);
    PgLoss loss;
    std::vector<float> lp(N), ent(N), glp(N), gent(N), flp(N), fent(N);
    cpu.zero_grad();
    cpu.forward_backward(ids.data(), targets.data(), B, T, loss, lp.data(), ent.data());
    const std::vector<float> want(cpu.grads(), cpu.grads() + cpu.flat_size());
    gpu.zero_grad();
    gpu.forward_backward(ids.data(), targets.data(), B, T, loss, glp.data(), gent.data());
    EXPECT_TRUE(all_close(glp, lp, tolerance(Kind::bf16, g.cfg.hidden_size), 2e-2));
    EXPECT_TRUE(all_close(gent, ent, tolerance(Kind::bf16, g.cfg.hidden_size), 2e-2));
    std::vector<float> got(static_cast<size_t>(cpu.flat_size()));
    gpu.get_grads(got.data());
    EXPECT_TRUE(grads_close(got, want));
    expect_grads_per_tensor(cpu, got, want);
    gpu.forward_logprobs(ids.data(), targets.data(), B, T, flp.data(), fent.data());
    EXPECT_EQ(flp, glp);
    EXPECT_EQ(fent, gent);
  }
}

// After an AdamW step on the device the forward reads the new weights everywhere, Gemma's (1 + w) norm weights
// included: it equals, bit for bit, a fresh device model given the stepped weights, and the CPU model after the
// same step within bf16 tolerance.
TEST_P(CudaGolden, AdamWStepThenForwardReadsTheNewWeights) {
  GoldenCase g = load_golden(GetParam());
  Transformer& cpu = *g.cpu;
  const int64_t B = g.B, T = g.T, N = B * T;
  const std::vector<int32_t> targets = next_targets(g.ids, B, T);
  CudaTransformer gpu(g.cfg);
  gpu.set_params(cpu.params());
  PgLoss loss;
  std::vector<float> lp(N), ent(N);
  gpu.zero_grad();
  gpu.forward_backward(g.ids.data(), targets.data(), B, T, loss, lp.data(), ent.data());
  kernels::AdamWConfig ac;
  gpu.adamw_step(ac, 2e-2f, 1, 0.0);
  std::vector<float> stepped(static_cast<size_t>(cpu.flat_size()));
  gpu.get_params(stepped.data());
  CudaTransformer fresh(g.cfg);
  fresh.set_params(stepped.data());
  std::vector<float> a(N), ae(N), b(N), be(N), c(N), ce(N);
  gpu.forward_logprobs(g.ids.data(), targets.data(), B, T, a.data(), ae.data());
  fresh.forward_logprobs(g.ids.data(), targets.data(), B, T, b.data(), be.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(ae, be);
  EXPECT_FALSE(all_close(a, lp, 1e-3)) << "the step did not change the log-probs";
  std::memcpy(cpu.params(), stepped.data(), stepped.size() * sizeof(float));
  cpu.params_updated();
  cpu.forward_logprobs(g.ids.data(), targets.data(), B, T, c.data(), ce.data());
  EXPECT_TRUE(all_close(a, c, tolerance(Kind::bf16, g.cfg.hidden_size), 2e-2));
}

// The rollout path on the device (a prefill chunk, then one token a step, as test_golden's CPU check) gives the
// CPU's training-forward logits within bf16 tolerance, and its log-probs the device's own training forward's.
TEST_P(CudaGolden, PagedForwardEqualsTheTrainingForward) {
  GoldenCase g = load_golden(GetParam());
  Transformer& cpu = *g.cpu;
  const int64_t B = g.B, T = g.T, V = g.cfg.vocab_size, P = 6;
  std::vector<float> want(static_cast<size_t>(B * T * V)), got(want.size());
  cpu.forward_logits(g.ids.data(), B, T, want.data());
  CudaTransformer gpu(g.cfg);
  gpu.set_params(cpu.params());
  KvPool pool(g.cfg, 4, 16);
  std::vector<int32_t> pos(static_cast<size_t>(T));
  std::vector<int64_t> rows(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(rows[static_cast<size_t>(t)] = t);
  for (int64_t b = 0; b < B; ++b) {
    SeqKv s;
    pool.reserve(s, T);
    std::vector<const int32_t*> tables(static_cast<size_t>(T), s.blocks.data());
    for (int64_t t0 = 0; t0 < T; t0 = t0 < P ? P : t0 + 1) {  // rows 0..P-1 in one chunk, then one row a step
      PagedStep st;
      st.n = st.n_out = t0 < P ? P : 1;
      st.tokens = g.ids.data() + b * T + t0;
      st.pos = pos.data() + t0;
      st.tables = tables.data();
      st.out_rows = rows.data();
      st.logits = got.data() + (b * T + t0) * V;
      gpu.forward_paged(st, pool);
    }
    pool.release(s);
  }
  EXPECT_TRUE(all_close(got, want, tolerance(Kind::bf16, g.cfg.hidden_size), 2e-2));
  const std::vector<int32_t> targets = next_targets(g.ids, B, T);
  std::vector<float> lp(B * T), ent(B * T), paged_lp;
  gpu.forward_logprobs(g.ids.data(), targets.data(), B, T, lp.data(), ent.data());
  std::vector<float> train_lp;
  for (int64_t n = 0; n < B * T; ++n) {
    if (targets[n] < 0) continue;
    const float* z = got.data() + n * V;
    double m = z[0], sum = 0;
    for (int64_t v = 1; v < V; ++v) m = std::max(m, double(z[v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - m);
    paged_lp.push_back(static_cast<float>(double(z[targets[n]]) - m - std::log(sum)));
    train_lp.push_back(lp[n]);
  }
  EXPECT_TRUE(all_close(paged_lp, train_lp, tolerance(Kind::bf16, g.cfg.hidden_size), 2e-2));
}

// Decode steps (eager and graph replay) on every golden architecture; Phi-3's longrope is refused there with a
// clear error (its RoPE table depends on positions that stay on the device).
TEST_P(CudaGolden, DecodeStepsReproduceTheFullSequenceLogprobs) {
  GoldenCase g = load_golden(GetParam());
  if (g.cfg.rope_scaling.type == kernels::RopeScaling::Type::longrope) {
    CudaTransformer gpu(g.cfg);
    gpu.set_params(g.cpu->params());
    gpu.plan_decode(2, 8, 4, 4);
    EXPECT_THROW(gpu.decode_step(2, false), Error);
    return;
  }
  check_decode_steps(*g.cpu);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGolden,
                         ::testing::Values("llama", "qwen2", "qwen3", "llama31", "mistral", "gemma2", "gemma3",
                                           "phi3"));

INSTANTIATE_TEST_SUITE_P(LlamaAndQwen2, CudaModel, ::testing::Values(false, true));

}  // namespace
}  // namespace temper
