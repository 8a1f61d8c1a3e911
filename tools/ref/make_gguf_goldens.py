#!/usr/bin/env python3
"""Write the GGUF goldens for temper's GGUF tests (tests/io/test_gguf*.cpp).

Reference script only (Python is never part of the engine). It writes

    tests/data/gguf/quant_goldens.gguf      written by the `gguf` package (llama.cpp's gguf-py):
        metadata of every GGUF value type (incl. nested arrays), and for a fixed f32 matrix `x`
        its F16/BF16/Q8_0/Q4_0/Q4_1 encodings (gguf.quants.quantize) beside the f32 values
        gguf.quants.dequantize gives back (`<name>.deq`); plus a 3-D tensor (dimension order)
        and an I32 tensor.
    tests/data/gguf/smollm2_logits.safetensors
        transformers (torch float32) run on SmolLM2-135M-Instruct.Q4_1.gguf: a 24-token prompt,
        the top-1 token at every position and full logit rows at a few positions.

Run from the repository root with the pinned environment (tools/ref/requirements.txt; gguf 0.17.1,
transformers 4.51.3, torch 2.5.1, numpy 2.2.5):

    .venv/bin/python tools/ref/make_gguf_goldens.py             # both goldens
    .venv/bin/python tools/ref/make_gguf_goldens.py --skip-model  # only quant_goldens.gguf

The model part needs .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/bootstrap fetches it).
transformers 4.51 refuses `from_pretrained(..., gguf_file=...)` without the `accelerate` package,
which the pinned venv does not have; the script therefore calls the function that
from_pretrained uses internally (`load_gguf_checkpoint`, same dequantization with gguf-py and the
same reverse q/k permutation) and loads the state dict into a LlamaForCausalLM built from the
GGUF-derived config. Output is bitwise reproducible (single thread, fixed seeds).
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np

import gguf

PINNED = {"gguf": "0.17.1", "transformers": "4.51.3", "torch": "2.5.1", "numpy": "2.2.5"}

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = ("The capital of France is Paris, and the capital of Germany is Berlin. "
          "Rivers that flow through these cities carry boats full of tourists every summer.")
T = 24
ROW_POSITIONS = [0, 11, 23]  # full logit rows kept for these positions (49152 floats each)


def make_x():
    """[4, 96] f32: 12 blocks of 32. Row 0 normal, row 1 has an all-zero block, an all-equal
    block and a block of exact rounding ties for Q8_0, row 2 a wide dynamic range with a negative
    absolute maximum (Q4_0 takes d from the signed max), row 3 small values near f16 subnormals."""
    rng = np.random.RandomState(20240611)
    x = np.zeros((4, 96), dtype=np.float32)
    x[0] = rng.standard_normal(96).astype(np.float32)
    x[1, :32] = 0.0
    x[1, 32:64] = 0.75
    # Q8_0: amax 127 -> d = 1, id = 1, so x*id are exactly these halves: roundf ties go away from 0
    x[1, 64:96] = np.array([127.0, -127.0] + [k + 0.5 for k in range(-15, 15)], dtype=np.float32)
    x[2] = (rng.standard_normal(96) * np.repeat([1e-3, 1.0, 300.0], 32)).astype(np.float32)
    x[2, 40] = -9.5  # the signed max of block 1 is negative
    x[3] = (rng.standard_normal(96) * 1e-5).astype(np.float32)
    return x


def write_quant_goldens(path):
    Q = gguf.GGMLQuantizationType
    V = gguf.GGUFValueType
    x = make_x()
    w = gguf.GGUFWriter(path, arch="testarch")
    # One key per value type. Python's writer picks f32 for floats and i32 for ints unless told.
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_bool("test.bool", True)
    w.add_string("test.str", "héllo wörld ✓")
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", 2.718281828459045)
    w.add_key_value("test.arr_i32", [1, -2, 3], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("test.arr_u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("test.arr_f32", [0.5, -1.25], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("test.arr_bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)
    w.add_key_value("test.arr_str", ["a", "", "ü€"], V.ARRAY, sub_type=V.STRING)
    w.add_key_value("test.arr_nested", [[1, 2], [3], [4, 5, 6]], V.ARRAY)  # array of i32 arrays
    w.add_tensor("x", x)
    for qt in (Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1):
        blocks = gguf.quants.quantize(x, qt)
        deq = gguf.quants.dequantize(blocks, qt).astype(np.float32)
        assert deq.shape == x.shape
        w.add_tensor(f"x.{qt.name}", blocks, raw_dtype=qt)
        w.add_tensor(f"x.{qt.name}.deq", deq)
    w.add_tensor("cube", np.arange(24, dtype=np.float32).reshape(2, 3, 4))  # GGUF ne = [4, 3, 2]
    w.add_tensor("ids", np.array([7, -1, 49151], dtype=np.int32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def write_model_golden(model_path, out_path):
    import torch
    import transformers
    from safetensors.numpy import save_file
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    torch.set_num_threads(1)
    d, f = os.path.dirname(model_path), os.path.basename(model_path)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    ids = tok(PROMPT, add_special_tokens=False)["input_ids"]
    assert len(ids) >= T, f"prompt gives {len(ids)} tokens, need {T}"
    ids = ids[:T]

    parsed = load_gguf_checkpoint(model_path, return_tensors=False)
    cfg_dict = dict(parsed["config"])
    cfg_dict.pop("model_type", None)
    cfg = LlamaConfig(**cfg_dict)
    cfg.torch_dtype = torch.float32
    cfg._attn_implementation = "eager"
    model = LlamaForCausalLM(cfg).float().eval()
    sd = load_gguf_checkpoint(model_path, return_tensors=True, model_to_load=model)["tensors"]
    sd = {k: (v if isinstance(v, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(v))).float()
          for k, v in sd.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    assert set(missing) <= {"lm_head.weight"}, missing  # tied: lm_head shares embed_tokens
    assert cfg.tie_word_embeddings
    model.tie_weights()
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()

    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()  # [T, V]
        logits64 = model.double()(torch.tensor([ids])).logits[0]
    top1 = logits.argmax(-1)
    top2 = logits.topk(2, dim=-1).values
    margin = (top2[:, 0] - top2[:, 1]).numpy()
    f32_vs_f64 = (logits.double() - logits64).abs().max().item()
    assert torch.equal(top1, logits64.argmax(-1)), "HF f32 and f64 disagree on a top-1 token"

    with open(model_path, "rb") as fh:
        sha = hashlib.sha256(fh.read()).hexdigest()
    meta = {
        "generator": "tools/ref/make_gguf_goldens.py",
        "transformers": transformers.__version__, "torch": torch.__version__, "gguf": PINNED["gguf"],
        "model_file": f, "model_bytes": os.path.getsize(model_path), "model_sha256": sha,
        "prompt": PROMPT, "config": {k: cfg_dict[k] for k in sorted(cfg_dict) if isinstance(cfg_dict[k], (int, float, bool, str))},
        "hf_f32_vs_f64_max_abs": f32_vs_f64,
        "min_top1_margin": float(margin.min()),
    }
    out = {
        "input_ids": np.array(ids, dtype=np.int32),
        "top1": top1.numpy().astype(np.int32),
        "top1_margin": margin.astype(np.float32),
        "row_positions": np.array(ROW_POSITIONS, dtype=np.int32),
        "logits_rows": logits[ROW_POSITIONS].numpy().astype(np.float32),
        "logits_max": logits.max(-1).values.numpy().astype(np.float32),
    }
    save_file(out, out_path, metadata={"golden": json.dumps(meta, sort_keys=True)})
    print(f"wrote {out_path} ({os.path.getsize(out_path)} bytes)")
    print(f"  ids {ids}")
    print(f"  top1 {top1.tolist()}")
    print(f"  decoded top1 {[tok.decode([i]) for i in top1.tolist()]}")
    print(f"  min top1-top2 margin {margin.min():.4f}; HF f32 vs f64 max |diff| {f32_vs_f64:.3e}; "
          f"max |logit| {logits.abs().max().item():.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/gguf")
    ap.add_argument("--model", default=os.path.join(".cache/models", MODEL_FILE))
    ap.add_argument("--skip-model", action="store_true", help="only write quant_goldens.gguf")
    args = ap.parse_args()
    from importlib.metadata import version
    for pkg, want in PINNED.items():
        got = version(pkg)
        if not got.startswith(want):
            print(f"warning: {pkg} {got} is not the pinned {want}; goldens may differ", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    write_quant_goldens(os.path.join(args.out, "quant_goldens.gguf"))
    if not args.skip_model:
        if not os.path.exists(args.model):
            sys.exit(f"{args.model} not found (run scripts/bootstrap), or pass --skip-model")
        write_model_golden(args.model, os.path.join(args.out, "smollm2_logits.safetensors"))


if __name__ == "__main__":
    main()
