#!/usr/bin/env python3
"""Reference check of temper's tokenizer export (Tokenizer::to_hf_json / to_hf_config_json).

The real Hugging Face libraries load what temper wrote and must give the golden ids of
tests/data/tokenizer: tokenizers.Tokenizer.from_file(<dir>/tokenizer.json) and
transformers.AutoTokenizer.from_pretrained(<dir>), for every corpus string (ids without special
tokens, decode, decode skipping special tokens), the with_special strings (special tokens added) and
the no_parse_special strings (special tokens in the text not parsed); transformers' bos/eos/unk/pad
tokens and chat template must equal the golden tokenizer_config.json's.

Write the files first (a gtest that only writes when the variable is set), then check them:
    TEMPER_TOKENIZER_EXPORT_DIR=/tmp/tok_export build/tests/test_text \
        --gtest_filter=TokenizerExport.WriteFilesForTheReferenceCheck
    .venv/bin/python tools/ref/check_tokenizer_export.py /tmp/tok_export
Each subdirectory <golden>[_suffix] is checked against tests/data/tokenizer/<golden>/golden.json.
Pinned: tokenizers 0.21.4, transformers 4.51.3 (.venv). Exits 1 on any difference.
"""
import argparse
import json
import os
import sys

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


def check_dir(d, corpus):
    name = os.path.basename(d.rstrip("/"))
    golden_name = name.split("_")[0]
    g = load(os.path.join(DATA, golden_name, "golden.json"))
    cfg_golden = load(os.path.join(DATA, golden_name, "tokenizer_config.json"))
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
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        want = cfg_golden.get(key)
        if key == "unk_token" and want is None:
            continue  # temper keeps the model's unk token; the golden config may not name it
        ok += compare(f"{name} transformers {key}", getattr(at, key), want, failures)
        total += 1
    ok += compare(f"{name} transformers chat_template", at.chat_template, cfg_golden.get("chat_template"), failures)
    total += 1
    n_transformers = (ok, total)
    return n_tokenizers, n_transformers, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export_dir", nargs="?", default=os.environ.get("TEMPER_TOKENIZER_EXPORT_DIR"))
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
    for f in all_failures[:40]:
        print("  " + f)
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main())
