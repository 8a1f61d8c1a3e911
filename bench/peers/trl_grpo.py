#!/usr/bin/env python3
"""TRL peer benchmark: seconds per GRPO RL step on CPU, temper's quickstart configuration.

What it measures
    TRL 0.19.1 GRPOTrainer (pinned in .venv; `scripts/bootstrap --python`), its own code paths with
    their defaults, on CPU (use_cpu=True, fp32, torch.set_num_threads(--threads)). One RL step =
    what GRPOTrainer does for one optimizer step with num_iterations 1 and gradient_accumulation 1:
    tokenize the prompts, model.generate (transformers, KV cache, sampling), decode, reward,
    group-normalised advantages, policy forward for per-token logps + GRPO loss, backward, grad
    clip (max_grad_norm 1.0, Trainer default), torch AdamW step, LR scheduler step. Wall time per
    step comes from a TrainerCallback (on_step_begin -> on_step_end); the first --warmup steps are
    discarded and the mean over the rest is reported (with the median and the minimum: on a shared
    machine OpenMP threads that lose their core make single steps several times slower).

    Phases (seconds per step, same timed steps), by wrapping the trainer's own methods (timing
    only, behaviour unchanged):
      generate       unwrapped_model.generate (prefill + decode of max_new tokens, batch prompts*G)
      score          the rest of _generate_and_score_completions: tokenize, decode, reward,
                     advantages, metrics (no old/ref logps: num_iterations 1 and beta 0 skip them)
      forward_loss   compute_loss: policy forward over prompt+completion, logps, GRPO loss
      backward       training_step minus the two above (accelerator.backward)
      optimizer      on_pre_optimizer_step -> on_optimizer_step (AdamW step)
      other          step minus all of the above (grad-norm clip, zero_grad, scheduler, loop)

Configuration (temper's quickstart)
    Model: LlamaForCausalLM, vocab 259 (bytes 0..255, 256 <|endoftext|> = eos = pad,
    257 <|im_start|>, 258 <|im_end|>), hidden 128, 4 layers, 4 heads, 2 KV heads, head_dim 32,
    intermediate 384, max_position_embeddings 256, rope_theta 1e4, rms_norm_eps 1e-5, tied
    embeddings, random init (transformers' initialiser, std 0.02, seed 0), fp32, SDPA attention; or
    --model DIR: that shape's weights from an HF directory (a temper quickstart checkpoint, e.g. after SFT,
    so rewards are mixed and the update has a real gradient).
    Tokenizer: byte-level, one token per byte (id = byte value), no merges (a `tokenizers` BPE
    with the GPT-2 byte-to-unicode alphabet as its 256-entry vocabulary and no merges).
    Task: plain-text prompts "a op b [op c]=" (--min-ops 1 .. --max-ops 2 ops, operands
    0..--max-operand 20, ops + - *), reward 1 if the text after the last "####" (stripped)
    equals the answer, else 0.
    RL: --prompts 8 prompts x --group 8 completions = 64 per step (per_device_train_batch_size =
    generation batch), max_completion_length --max-new 48, temperature 1, top_p 1 (top_k None:
    no truncation), beta 0, loss_type "grpo", --lr 1e-4, num_iterations 1, no vLLM, bf16 off,
    report_to none, no saving, no logging.
    With random weights sampling is near uniform over 259 tokens, so ~13% of completions hit
    EOS before max_new (~44 of 48 tokens on average; generate still decodes all 64 rows for
    max_new steps); completion_tokens_per_s counts the completion tokens TRL keeps
    (completion_mask, up to and including EOS) over the timed wall time.

A real chat model (--hf DIR, bench/compare_rl_step.sh's MODEL mode)
    The model and tokenizer from a Hugging Face directory (e.g. `temper convert` of a GGUF), loaded in fp32;
    prompts are conversations (--system, then --user-template with {question} = "a op b="), which TRL turns
    into text with the tokenizer's chat template (add_generation_prompt) and whose completions end at the
    tokenizer's EOS; --bf16: GRPOConfig(bf16=True), i.e. accelerate's torch.autocast(cpu, bfloat16) around the
    model's forward (the JSON's "dtypes" records the LM head's output dtype seen in generate and in the update);
    --micro-batch M: per_device_train_batch_size M with gradient_accumulation_steps = prompts x group / M (TRL
    still generates the whole batch at once and takes one optimizer step per batch).

How to run (from the repository root):
    .venv/bin/python bench/peers/trl_grpo.py --threads 2 --steps 6
    (exports OMP_NUM_THREADS / MKL_NUM_THREADS = --threads when unset; pin with taskset for a
    side-by-side run with temper.)

Output: one JSON line on stdout (last line):
    {"engine":"trl","trl":...,"seconds_per_step":... (mean),"median_seconds_per_step":...,
     "min_seconds_per_step":...,"steps":...,"group_size":...,
     "prompts_per_step":...,"max_new":...,"threads":...,"completion_tokens_per_s":...,
     "phases":{...},"step_seconds":[...],...}
"""

import argparse
import json
import os
import random
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description="TRL GRPOTrainer seconds per RL step on CPU (peer benchmark)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6, help="total steps run, warm-up included")
    ap.add_argument("--warmup", type=int, default=1, help="leading steps left out of the mean")
    ap.add_argument("--prompts", type=int, default=8, help="prompts per step")
    ap.add_argument("--group", type=int, default=8, help="completions per prompt (num_generations)")
    ap.add_argument("--max-new", type=int, default=48, help="max_completion_length")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--min-ops", type=int, default=1, help="operations per arithmetic prompt, low end")
    ap.add_argument("--max-ops", type=int, default=2, help="operations per arithmetic prompt, high end")
    ap.add_argument("--max-operand", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="", help="HF directory with the quickstart shape's weights (default: random init)")
    ap.add_argument("--hf", default="", help="a chat model's HF directory (model + tokenizer) instead of the quickstart")
    ap.add_argument("--system", default="You are a careful calculator.", help="--hf: the system turn")
    ap.add_argument("--user-template", default="Calculate {question} and end with the line #### <number>.",
                    help="--hf: the user turn, {question} = the problem")
    ap.add_argument("--ops", default="+-*", help="operators drawn from")
    ap.add_argument("--bf16", action="store_true", help="GRPOConfig(bf16=True): autocast to bfloat16 on CPU")
    ap.add_argument("--micro-batch", type=int, default=0,
                    help="rows per forward/backward, gradient accumulation over the batch (0: the whole batch)")
    args = ap.parse_args()
    if args.threads < 1 or args.prompts < 1 or args.group < 2 or args.max_new < 1:
        ap.error("need threads >= 1, prompts >= 1, group >= 2, max-new >= 1")
    if not 1 <= args.min_ops <= args.max_ops or args.max_operand < 1:
        ap.error("need 1 <= min-ops <= max-ops and max-operand >= 1")
    if args.steps <= args.warmup or args.warmup < 0:
        ap.error("need steps > warmup >= 0")
    if args.micro_batch < 0 or (args.micro_batch and (args.prompts * args.group) % args.micro_batch):
        ap.error("--micro-batch must divide prompts x group")
    if args.hf and args.model:
        ap.error("--hf and --model exclude each other")
    if not args.ops or any(c not in "+-*" for c in args.ops):
        ap.error("--ops: characters of + - *")
    return args


def make_tokenizer():
    """Byte-level tokenizer: id = byte value, no merges, specials at 256..258."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   padding_side="left")
    ids = fast("16*16-8-13=\n#### é", add_special_tokens=False)["input_ids"]
    assert ids == list("16*16-8-13=\n#### é".encode()), ids
    assert [fast.convert_tokens_to_ids(s) for s in specials] == [256, 257, 258]
    assert fast.decode(ids) == "16*16-8-13=\n#### é" and len(fast) == 259
    return fast


def make_dataset(n, seed, min_ops, max_ops, max_operand, ops="+-*", chat=None):
    """n arithmetic problems: min_ops..max_ops ops over operands 0..max_operand, ops from `ops`, usual precedence.
    chat = (system, user_template): each prompt a conversation instead of plain text."""
    from datasets import Dataset

    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        nops = rng.randint(min_ops, max_ops)
        text = str(rng.randint(0, max_operand))
        for _ in range(nops):
            text += rng.choice(ops) + str(rng.randint(0, max_operand))
        prompt = text + "="
        if chat:
            prompt = [{"role": "system", "content": chat[0]},
                      {"role": "user", "content": chat[1].replace("{question}", prompt)}]
        rows.append({"prompt": prompt, "answer": str(eval(text))})  # digits and + - * only
    return Dataset.from_list(rows)


REWARDS = []  # every reward given, in order (the mean is reported)


def arithmetic_reward(completions, answer, **kwargs):
    out = []
    for text, ans in zip(completions, answer):
        if isinstance(text, list):  # a conversation's completion: [{"role": "assistant", "content": ...}]
            text = text[0]["content"]
        k = text.rfind("####")
        out.append(1.0 if k >= 0 and text[k + 4 :].strip() == ans else 0.0)
    REWARDS.extend(out)
    return out


def main():
    args = parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("MKL_NUM_THREADS", str(args.threads))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    import transformers
    import trl
    from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PrinterCallback,
                              TrainerCallback)
    from trl import GRPOConfig, GRPOTrainer

    transformers.logging.set_verbosity_error()
    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.hf) if args.hf else make_tokenizer()
    cfg = LlamaConfig(vocab_size=259, hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=32, intermediate_size=384, max_position_embeddings=256,
                      rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, initializer_range=0.02,
                      hidden_act="silu", bos_token_id=None, eos_token_id=256, pad_token_id=256,
                      attn_implementation="sdpa", torch_dtype=torch.float32)
    if args.hf:
        model = AutoModelForCausalLM.from_pretrained(args.hf, torch_dtype=torch.float32, attn_implementation="sdpa")
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    elif args.model:
        model = LlamaForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32, attn_implementation="sdpa")
        for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                  "intermediate_size", "tie_word_embeddings"):
            if getattr(model.config, k) != getattr(cfg, k):
                sys.exit(f"{args.model}/config.json: {k} = {getattr(model.config, k)}, expected {getattr(cfg, k)}")
        model.config.pad_token_id = 256
        model.generation_config.pad_token_id = 256
    else:
        model = LlamaForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())

    batch = args.prompts * args.group
    gcfg = GRPOConfig(
        output_dir=os.path.join(os.environ.get("TMPDIR", "/tmp"), "trl_grpo_bench"),
        use_cpu=True, bf16=args.bf16, fp16=False,
        per_device_train_batch_size=args.micro_batch or batch,
        gradient_accumulation_steps=batch // (args.micro_batch or batch), num_generations=args.group,
        num_iterations=1, max_completion_length=args.max_new, temperature=1.0, top_p=1.0,
        beta=0.0, loss_type="grpo", learning_rate=args.lr, max_steps=args.steps, use_vllm=False,
        report_to="none", logging_strategy="no", save_strategy="no", disable_tqdm=True,
        log_level="error", seed=args.seed, dataloader_num_workers=0,
    )

    phases = {k: [] for k in ("generate", "score", "forward_loss", "backward", "optimizer", "other")}
    acc = {}  # per-step accumulators
    tokens = []  # completion tokens kept per step
    step_seconds = []

    class Timed(GRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            acc["rollout"] = acc.get("rollout", 0.0) + time.perf_counter() - t0
            acc["tokens"] = acc.get("tokens", 0) + int(out["completion_mask"].sum())
            return out

        def compute_loss(self, *a, **kw):
            t0 = time.perf_counter()
            out = super().compute_loss(*a, **kw)
            acc["forward_loss"] = acc.get("forward_loss", 0.0) + time.perf_counter() - t0
            return out

        def training_step(self, *a, **kw):
            t0 = time.perf_counter()
            out = super().training_step(*a, **kw)
            acc["training_step"] = acc.get("training_step", 0.0) + time.perf_counter() - t0
            return out

    generate = model.generate
    dtypes = {"generate": set(), "update": set()}  # the LM head's output dtype seen in each phase
    in_generate = [False]

    def timed_generate(*a, **kw):
        t0 = time.perf_counter()
        in_generate[0] = True
        try:
            out = generate(*a, **kw)
        finally:
            in_generate[0] = False
        acc["generate"] = acc.get("generate", 0.0) + time.perf_counter() - t0
        return out

    model.get_output_embeddings().register_forward_hook(
        lambda mod, inp, out: dtypes["generate" if in_generate[0] else "update"].add(str(out.dtype).replace("torch.", "")))

    model.generate = timed_generate  # instance attribute; TRL calls unwrapped_model.generate

    class StepTimer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            assert torch.get_num_threads() == args.threads, torch.get_num_threads()
            acc.clear()
            acc["t0"] = time.perf_counter()

        def on_pre_optimizer_step(self, a, state, control, **kw):
            acc["opt0"] = time.perf_counter()

        def on_optimizer_step(self, a, state, control, **kw):
            acc["optimizer"] = time.perf_counter() - acc["opt0"]

        def on_step_end(self, a, state, control, **kw):
            total = time.perf_counter() - acc["t0"]
            step_seconds.append(total)
            tokens.append(acc.get("tokens", 0))
            gen = acc.get("generate", 0.0)
            fl = acc.get("forward_loss", 0.0)
            ts = acc.get("training_step", 0.0)
            roll = acc.get("rollout", 0.0)
            opt = acc.get("optimizer", 0.0)
            phases["generate"].append(gen)
            phases["score"].append(roll - gen)
            phases["forward_loss"].append(fl)
            phases["backward"].append(ts - roll - fl)
            phases["optimizer"].append(opt)
            phases["other"].append(total - ts - opt)
            print(f"step {state.global_step}: {total:.3f} s ("
                  + ", ".join(f"{k} {v[-1]:.3f}" for k, v in phases.items())
                  + f"), {acc.get('tokens', 0)} completion tokens", file=sys.stderr, flush=True)

    trainer = Timed(model=model, reward_funcs=arithmetic_reward, args=gcfg,
                    train_dataset=make_dataset(max(1024, args.steps * args.prompts), args.seed,
                                               args.min_ops, args.max_ops, args.max_operand, args.ops,
                                               (args.system, args.user_template) if args.hf else None),
                    processing_class=tokenizer, callbacks=[StepTimer()])
    trainer.remove_callback(PrinterCallback)  # its end-of-training summary would go to stdout
    torch.set_num_threads(args.threads)  # in case anything in setup changed it
    trainer.train()
    assert len(step_seconds) == args.steps, (len(step_seconds), args.steps)

    w = args.warmup
    timed = step_seconds[w:]
    mean = sum(timed) / len(timed)
    result = {
        "engine": "trl",
        "trl": trl.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "seconds_per_step": round(mean, 4),
        "median_seconds_per_step": round(sorted(timed)[len(timed) // 2] if len(timed) % 2
                                         else sum(sorted(timed)[len(timed) // 2 - 1 : len(timed) // 2 + 1]) / 2, 4),
        "min_seconds_per_step": round(min(timed), 4),
        "steps": len(timed),
        "warmup": w,
        "group_size": args.group,
        "prompts_per_step": args.prompts,
        "max_new": args.max_new,
        "threads": args.threads,
        "lr": args.lr,
        "ops": [args.min_ops, args.max_ops],
        "completion_tokens_per_s": round(sum(tokens[w:]) / sum(timed), 1),
        "completion_tokens_per_step": sum(tokens[w:]) / len(timed),
        "phases": {k: round(sum(v[w:]) / len(timed), 4) for k, v in phases.items()},
        "step_seconds": [round(s, 4) for s in step_seconds],
        "params": n_params,
        "model": args.hf or args.model or "random init",
        "bf16": args.bf16,
        "micro_batch": args.micro_batch or batch,
        "dtypes": {k: sorted(v) for k, v in dtypes.items()},
        "reward_mean": round(sum(REWARDS) / max(1, len(REWARDS)), 4),
    }
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
