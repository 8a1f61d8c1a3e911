#!/usr/bin/env python3
"""Slow check (ctest -L slow): temper's LoRA adapters and the real peft agree, both ways.

For golden configs (tests/data/golden/{llama,qwen2,qwen3,gemma2}): transformers builds the model with the golden
weights and save_pretrained()s it (dir M).
  temper -> peft: `peft_lora_tool write M A` makes random adapters (every target; rank 4, alpha 8; rsLoRA for one
    family; B nonzero) and writes them in PEFT's format; peft.PeftModel.from_pretrained(model, A) must give temper's
    logits with adapters, and merge_and_unload() temper's merged logits.
  peft -> temper: peft.get_peft_model with init_lora_weights=False (A and B random, as nn.Linear's init) on a subset
    of targets, save_pretrained(B); `peft_lora_tool read M B` must give peft's logits, unmerged and merged.
Tolerance: max |diff| / max |logit| <= 1e-5 (f32), and top-1 equal at every position.
Exits 77 (skipped) when peft is not installed (tools/ref/requirements.txt pins it).
Usage: check_peft_lora.py --tool build/tests/peft_lora_tool
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import peft
    from peft import LoraConfig, PeftModel, get_peft_model
except ImportError:
    print("skipped: peft is not installed (pip install -r tools/ref/requirements.txt)")
    sys.exit(77)

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDS = [1, 5, 9, 33, 2, 100, 7, 64, 12, 0, 127, 45]
TOL = 1e-5


def golden_model(name):
    gdir = os.path.join(ROOT, "tests", "data", "golden", name)
    cfg = AutoConfig.from_pretrained(gdir)
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32, attn_implementation="eager").eval()
    st = load_file(os.path.join(gdir, "golden.safetensors"))
    sd = {k: v for k, v in st.items() if k in model.state_dict()}
    missing, _ = model.load_state_dict(sd, strict=False)
    assert all(m == "lm_head.weight" for m in missing), missing
    return model


def logits(model):
    with torch.no_grad():
        return model(torch.tensor([IDS])).logits[0].float()


def compare(what, got, want):
    got = torch.tensor(got)
    rel = float((got - want).abs().max() / want.abs().max())
    top1 = bool((got.argmax(-1) == want.argmax(-1)).all())
    ok = rel <= TOL and top1
    print(f"  {what}: max |diff| / max |logit| = {rel:.3e}, top-1 equal: {top1}{'' if ok else '  FAIL'}")
    return ok, rel


def tool(args, mode, mdir, adir, extra=()):
    out = subprocess.run([args.tool, mode, mdir, adir, "--ids", ",".join(map(str, IDS)), *extra],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    args = ap.parse_args()
    print(f"peft {peft.__version__}, torch {torch.__version__}")
    torch.manual_seed(0)
    ok_all, worst = True, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, rslora in (("llama", False), ("qwen2", True), ("qwen3", False), ("gemma2", False)):
            print(name)
            mdir = os.path.join(tmp, name)
            golden_model(name).save_pretrained(mdir, safe_serialization=True)
            # temper -> peft
            adir = os.path.join(tmp, name + "_temper_adapter")
            extra = ["--rank", "4", "--alpha", "8", "--seed", "3"] + (["--rslora"] if rslora else [])
            t = tool(args, "write", mdir, adir, extra)
            pm = PeftModel.from_pretrained(golden_model(name), adir).eval()
            base = logits(golden_model(name))
            moved = float((torch.tensor(t["logits"]) - base).abs().max())
            print(f"  temper adapters move the logits by up to {moved:.3f}")
            ok_all &= moved > 1e-2
            for what, got, want in (("temper adapters vs peft.PeftModel.from_pretrained", t["logits"], logits(pm)),
                                    ("temper merged vs peft merge_and_unload", t["merged_logits"],
                                     logits(pm.merge_and_unload()))):
                ok, rel = compare(what, got, want)
                ok_all &= ok
                worst = max(worst, rel)
            # peft -> temper
            bdir = os.path.join(tmp, name + "_peft_adapter")
            lc = LoraConfig(r=3, lora_alpha=5, lora_dropout=0.0, target_modules=["k_proj", "o_proj", "up_proj", "down_proj"],
                            init_lora_weights=False, use_rslora=not rslora, task_type="CAUSAL_LM")
            gm = get_peft_model(golden_model(name), lc).eval()
            gm.save_pretrained(bdir)
            t = tool(args, "read", mdir, bdir)
            moved = float((logits(gm) - torch.tensor(t["base_logits"])).abs().max())
            print(f"  peft adapters move the logits by up to {moved:.3f}")
            ok_all &= moved > 1e-2
            for what, got, want in (("peft adapter read by temper vs peft", t["logits"], logits(gm)),
                                    ("peft adapter merged by temper vs peft merge_and_unload", t["merged_logits"],
                                     logits(gm.merge_and_unload()))):
                ok, rel = compare(what, got, want)
                ok_all &= ok
                worst = max(worst, rel)
            # A DoRA adapter is refused, naming the field.
            ddir = os.path.join(tmp, name + "_dora")
            dm = get_peft_model(golden_model(name), LoraConfig(r=2, target_modules=["q_proj"], use_dora=True))
            dm.save_pretrained(ddir)
            r = subprocess.run([args.tool, "read", mdir, ddir, "--ids", "1"], capture_output=True, text=True)
            refused = r.returncode != 0 and "use_dora" in r.stderr
            print(f"  DoRA adapter refused naming use_dora: {refused}")
            ok_all &= refused
    print(("ok" if ok_all else "FAILED") + f" (worst relative logit difference {worst:.3e})")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
