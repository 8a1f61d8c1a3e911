// A model stored as GGUF (architectures llama (also Mistral), qwen2, qwen3, gemma2, gemma3, phi3, as
// llama.cpp's convert_hf_to_gguf.py writes them): the ModelConfig from `{arch}.*` metadata and the RoPE
// tensors, the map between llama.cpp tensor names and Hugging Face names, the q/k row permutation of arch
// llama, Gemma's norms stored as 1 + w, and loading the weights into a Transformer (dequantized to f32).
// Leaves out: MoE and other architectures (refused), tokenizer metadata (GgufFile's typed getters).
#pragma once

#include <string>

#include "temper/io/gguf_file.h"
#include "temper/model/config.h"
#include "temper/model/transformer.h"

namespace temper::io {

// Arch <-> general.architecture (Mistral is "llama" with {arch}.attention.sliding_window); the parse throws
// naming the file and the supported list.
std::string gguf_arch_name(Arch a);
Arch gguf_arch_from_name(const std::string& name, const std::string& where);

// ModelConfig from general.architecture and {arch}.block_count, embedding_length,
// feed_forward_length, attention.head_count, attention.head_count_kv (default: head_count),
// attention.key_length (head_dim; default embedding_length / head_count), rope.freq_base (default
// 10000, as llama.cpp), attention.layer_norm_rms_epsilon, context_length, vocab_size (default: the
// rows of token_embd.weight). Tied embeddings when output.weight is absent. Qwen2: q/k/v biases;
// Qwen3: q/k norms. Gemma: soft-caps, attention.sliding_window(_pattern), rope.freq_base_swa; RoPE scaling
// from rope.scaling.type linear, rope_freqs (Llama-3.x) or rope_factors_long/short (Phi-3). Errors name the
// file and the key.
ModelConfig gguf_model_config(const GgufFile& f);

// llama.cpp name of a Hugging Face parameter name and back ("" when there is none):
// model.embed_tokens.weight <-> token_embd.weight, model.layers.N.self_attn.q_proj.weight <->
// blk.N.attn_q.weight, ... (full table in docs/GGUF.md).
// The norm names differ by family (Gemma's four norms; Phi-3's fused attn_qkv and ffn_up).
std::string gguf_name_from_hf(const std::string& hf_name, Arch arch = Arch::llama);
std::string hf_name_from_gguf(const std::string& gguf_name, Arch arch = Arch::llama);

// llama.cpp's convert_hf_to_gguf.py (LlamaModel.permute) reorders the rows of q_proj and k_proj for
// arch llama so that its interleaved ("NORM") RoPE rotates the pairs HF's rotate-half RoPE rotates:
// within each head of D rows, GGUF row 2i + s holds HF row s * D/2 + i (i < D/2, s in {0, 1}).
// `w` is [n_head * D, cols] row-major (cols = 1 for a bias). In place.
void gguf_permute_qk_rows(float* w, int64_t n_head, int64_t head_dim, int64_t cols);    // HF -> GGUF
void gguf_unpermute_qk_rows(float* w, int64_t n_head, int64_t head_dim, int64_t cols);  // GGUF -> HF
// Whether the llama.cpp layout of `arch` has permuted q/k rows (llama, Mistral: yes; the others: no).
bool gguf_arch_permutes_qk(Arch a);
// Whether llama.cpp stores the arch's RMSNorm weights as 1 + w (Gemma), and whether a parameter is such a norm.
bool gguf_arch_shifts_norms(Arch a);
bool gguf_is_norm(const std::string& hf_name);

// Fills every parameter of `model` from the file (dequantized to f32, q/k un-permuted for llama)
// and calls model.params_updated(). Every parameter must be present with the shape the config
// implies, and every tensor of the file must be a parameter (else it holds a different model);
// errors name the file, the GGUF tensor and its HF name. Tensors of a type temper cannot decode
// are refused by name. As io::load_hf_weights, each tensor's file pages are given back once it is read and the model
// told (Transformer::params_written) with its final values.
void load_gguf_weights(Transformer& model, const GgufFile& f);

}  // namespace temper::io
