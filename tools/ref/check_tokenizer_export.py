#!/usr/bin/env python3
"""Reference check of temper's tokenizer export (Tokenizer::to_hf_json / to_hf_config_json).

The real Hugging Face libraries load what temper wrote and must give the golden ids of
tests/data/tokenizer: tokenizers.Tokenizer.from_file(<dir>/tokenizer.json) and
transformers.AutoTokenizer.from_pretrained(<dir>), for every corpus string (ids without special
tokens, decode, decode skipping special tokens), the with_special strings (special tokens added) and
the no_parse_special strings (special tokens in the text not parsed); transformers' bos/eos/unk/pad
tokens and chat template must equal the golden tokenizer_config.json's.

Write the files first (gtests that only write when the variable is set), then check them:
    TEMPER_TOKENIZER_EXPORT_DIR=/tmp/tok_export build/tests/test_text \
        --gtest_filter='*.WriteFilesForTheReferenceCheck'
    .venv/bin/python tools/ref/check_tokenizer_export.py /tmp/tok_export [--temper build/bin/temper]
Each subdirectory <golden>[_suffix] is checked against tests/data/tokenizer/<golden>/golden.json
(the longest <golden> prefix that has one).

GGUF (--temper): every SentencePiece-style export (llama2*, gemma*, ..., not mistral: its Metaspace
prefix has no GGUF form) also goes through `temper convert` into a GGUF (the tokenizer beside the
tiny Qwen3 weights of tests/data/golden/qwen3): gguf-py (gguf 0.17.1) reads llama.cpp's keys back
(tokenizer.ggml.model "llama", tokens equal to tokenizer.json's vocabulary by id, one score and one
token type per token, byte tokens of type 6, add_space_prefix, bos/eos/unk), and transformers' GGUF
converter (GGUFLlamaConverter, which rebuilds merges from the scores) must give the golden ids where it
builds the same pipeline (add_space_prefix true: it always prepends).
Pinned: tokenizers 0.21.4, transformers 4.51.3 (.venv). Exits 1 on any difference.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import tokenizers
import transformers
from tokenizers import Tokenizer
from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def compare(what, got, want, failures):
    if got != want:
        failures.append(f"{what}: got {str(got)[:200]} want {str(want)[:200]}")
        return 0
    return 1


def golden_of(name):
    """The longest prefix of name (cut at '_') with a golden.json."""
    parts = name.split("_")
    for k in range(len(parts), 0, -1):
        g = "_".join(parts[:k])
        if os.path.exists(os.path.join(DATA, g, "golden.json")):
            return g
    raise SystemExit(f"{name}: no tests/data/tokenizer/<prefix>/golden.json")


def check_dir(d, corpus):
    name = os.path.basename(d.rstrip("/"))
    golden_name = golden_of(name)
    g = load(os.path.join(DATA, golden_name, "golden.json"))
    cfg_path = os.path.join(DATA, golden_name, "tokenizer_config.json")
    cfg_golden = load(cfg_path) if os.path.exists(cfg_path) else None  # the GGUF goldens have none
    texts = corpus["cases"] + [corpus["long_text"]]
    assert len(texts) == len(g["cases"])
    failures = []
    ok = 0
    total = 0

    # tokenizers
    tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    for i, (s, c) in enumerate(zip(texts, g["cases"])):
        ids = tk.encode(s, add_special_tokens=False).ids
        ok += compare(f"{name} tokenizers case {i} ids", ids, c["ids"], failures)
        ok += compare(f"{name} tokenizers case {i} decode", tk.decode(c["ids"], skip_special_tokens=False),
                      c["decoded"], failures)
        ok += compare(f"{name} tokenizers case {i} decode skip", tk.decode(c["ids"], skip_special_tokens=True),
                      c["decoded_skip_special"], failures)
        total += 3
    for w in g["with_special"]:
        ok += compare(f"{name} tokenizers with_special {w['text']!r}", tk.encode(w["text"], add_special_tokens=True).ids,
                      w["ids"], failures)
        total += 1
    tk.encode_special_tokens = True
    for w in g["no_parse_special"]:
        ok += compare(f"{name} tokenizers no_parse_special {w['text']!r}",
                      tk.encode(w["text"], add_special_tokens=False).ids, w["ids"], failures)
        total += 1
    n_tokenizers = (ok, total)

    # transformers
    ok = total = 0
    at = AutoTokenizer.from_pretrained(d)
    if not at.is_fast:
        failures.append(f"{name} transformers: not a fast tokenizer ({type(at).__name__})")
    for i, (s, c) in enumerate(zip(texts, g["cases"])):
        ok += compare(f"{name} transformers case {i} ids", at.encode(s, add_special_tokens=False), c["ids"], failures)
        ok += compare(f"{name} transformers case {i} decode", at.decode(c["ids"], skip_special_tokens=False),
                      c["decoded"], failures)
        ok += compare(f"{name} transformers case {i} decode skip", at.decode(c["ids"], skip_special_tokens=True),
                      c["decoded_skip_special"], failures)
        total += 3
    for w in g["with_special"]:
        ok += compare(f"{name} transformers with_special {w['text']!r}", at.encode(w["text"], add_special_tokens=True),
                      w["ids"], failures)
        total += 1
    at_split = AutoTokenizer.from_pretrained(d, split_special_tokens=True)
    for w in g["no_parse_special"]:
        ok += compare(f"{name} transformers no_parse_special {w['text']!r}",
                      at_split.encode(w["text"], add_special_tokens=False), w["ids"], failures)
        total += 1
    for key in ("bos_token", "eos_token", "unk_token", "pad_token") if cfg_golden is not None else ():
        want = cfg_golden.get(key)
        if key == "unk_token" and want is None:
            continue  # temper keeps the model's unk token; the golden config may not name it
        ok += compare(f"{name} transformers {key}", getattr(at, key), want, failures)
        total += 1
    if cfg_golden is not None:
        ok += compare(f"{name} transformers chat_template", at.chat_template, cfg_golden.get("chat_template"),
                      failures)
        total += 1
    n_transformers = (ok, total)
    return n_tokenizers, n_transformers, failures


SPM_SPACE = "\u2581"


def is_spm_export(d):
    j = load(os.path.join(d, "tokenizer.json"))
    return j["pre_tokenizer"] is None or j["pre_tokenizer"].get("type") == "Split"


def tiny_model_dir(tok_dir, work):
    """tests/data/golden/qwen3's weights (the adamw_final.* tensors) with the exported tokenizer files."""
    from safetensors.numpy import load_file, save_file
    d = os.path.join(work, os.path.basename(tok_dir))
    os.makedirs(d, exist_ok=True)
    src = os.path.join(ROOT, "tests", "data", "golden", "qwen3")
    with open(os.path.join(src, "config.json"), "rb") as f, open(os.path.join(d, "config.json"), "wb") as o:
        o.write(f.read())
    t = load_file(os.path.join(src, "golden.safetensors"))
    p = "adamw_final."
    save_file({k[len(p):]: v for k, v in t.items() if k.startswith(p)}, os.path.join(d, "model.safetensors"))
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(tok_dir, fn), "rb") as f, open(os.path.join(d, fn), "wb") as o:
            o.write(f.read())
    return d


def check_gguf(d, temper, corpus, work):
    """temper convert -> GGUF; the keys by gguf-py; the ids of transformers' GGUF converter."""
    import gguf
    from transformers.integrations.ggml import GGUFLlamaConverter
    name = os.path.basename(d.rstrip("/"))
    out = os.path.join(work, name + ".gguf")
    subprocess.run([temper, "convert", tiny_model_dir(d, work), out, "--overwrite"], check=True,
                   stdout=subprocess.DEVNULL)
    r = gguf.GGUFReader(out)
    f = {k: v.contents() for k, v in r.fields.items() if k.startswith("tokenizer.")}
    j = load(os.path.join(d, "tokenizer.json"))
    failures = []
    ok = total = 0

    def expect(what, got, want):
        nonlocal ok, total
        ok += compare(f"{name} gguf {what}", got, want, failures)
        total += 1

    vocab = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    tokens = f["tokenizer.ggml.tokens"]
    expect("tokenizer.ggml.model", f["tokenizer.ggml.model"], "llama")
    expect("tokens (vocab by id)", tokens[:len(vocab)], [t for t, _ in vocab])
    expect("one score per token", len(f["tokenizer.ggml.scores"]), len(tokens))
    expect("one type per token", len(f["tokenizer.ggml.token_type"]), len(tokens))
    expect("byte tokens are type 6", [f["tokenizer.ggml.token_type"][tokens.index("<0x%02X>" % b)] for b in range(256)],
           [6] * 256)
    expect("no merges", "tokenizer.ggml.merges" in f, False)
    prepend = bool(j["normalizer"] and j["normalizer"]["type"] == "Sequence")
    expect("add_space_prefix", f["tokenizer.ggml.add_space_prefix"], prepend)
    for key, tok in (("bos_token_id", "<s>"), ("unk_token_id", "<unk>")):
        if tok in tokens and "tokenizer.ggml." + key.replace("unk_", "unknown_") in f:
            expect(key, f["tokenizer.ggml." + key.replace("unk_", "unknown_")], tokens.index(tok))
    if prepend:  # transformers' GGUF converter always prepends "▁"
        skeleton = {"tokens": tokens, "scores": f["tokenizer.ggml.scores"], "token_type": f["tokenizer.ggml.token_type"],
                    "bos_token_id": f.get("tokenizer.ggml.bos_token_id"),
                    "eos_token_id": f.get("tokenizer.ggml.eos_token_id"),
                    "unk_token_id": f.get("tokenizer.ggml.unknown_token_id")}
        tk = GGUFLlamaConverter(skeleton).converted()
        g = load(os.path.join(DATA, golden_of(name), "golden.json"))
        texts = corpus["cases"] + [corpus["long_text"]]
        for i, (s, c) in enumerate(zip(texts, g["cases"])):
            expect(f"transformers' GGUF converter case {i} ids", tk.encode(s, add_special_tokens=False).ids, c["ids"])
    return ok, total, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export_dir", nargs="?", default=os.environ.get("TEMPER_TOKENIZER_EXPORT_DIR"))
    ap.add_argument("--temper", help="the temper binary: also check the GGUF of each SentencePiece-style export")
    args = ap.parse_args()
    if not args.export_dir:
        ap.error("give the export directory (or set TEMPER_TOKENIZER_EXPORT_DIR)")
    print(f"tokenizers {tokenizers.__version__}, transformers {transformers.__version__}")
    corpus = load(os.path.join(DATA, "corpus.json"))
    dirs = sorted(e.path for e in os.scandir(args.export_dir) if e.is_dir())
    if not dirs:
        print(f"{args.export_dir}: no exported tokenizers", file=sys.stderr)
        return 1
    all_failures = []
    for d in dirs:
        (tok_ok, tok_n), (tr_ok, tr_n), failures = check_dir(d, corpus)
        status = "OK" if not failures else f"{len(failures)} DIFFERENCES"
        print(f"{os.path.basename(d):22s} tokenizers {tok_ok}/{tok_n}  transformers {tr_ok}/{tr_n}  {status}")
        all_failures += failures
        if args.temper and is_spm_export(d):
            with tempfile.TemporaryDirectory() as work:
                g_ok, g_n, failures = check_gguf(d, args.temper, corpus, work)
            status = "OK" if not failures else f"{len(failures)} DIFFERENCES"
            print(f"{os.path.basename(d) + ' (gguf)':22s} gguf-py + transformers' GGUF converter {g_ok}/{g_n}  {status}")
            all_failures += failures
    for f in all_failures[:40]:
        print("  " + f)
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main())
