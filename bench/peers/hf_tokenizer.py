#!/usr/bin/env python3
"""Peer of bench/tokenizer_bench.cpp: Hugging Face tokenizers encode/decode throughput on the same
text (the corpus.json `long_text` repeated), one thread (RAYON_NUM_THREADS=1), best of 3. One JSON line.
   hf_tokenizer.py TOKENIZER_JSON CORPUS_JSON --repeat N
"""
import argparse
import json
import os
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
from tokenizers import Tokenizer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer")
    ap.add_argument("corpus")
    ap.add_argument("--repeat", type=int, default=100)
    a = ap.parse_args()
    t0 = time.perf_counter()
    tok = Tokenizer.from_file(a.tokenizer)
    load = time.perf_counter() - t0
    text = json.load(open(a.corpus))["long_text"] * a.repeat
    mb = len(text.encode()) / 1e6
    best_enc = best_dec = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        ids = tok.encode(text, add_special_tokens=False).ids
        best_enc = min(best_enc, time.perf_counter() - t0)
        t0 = time.perf_counter()
        tok.decode(ids, skip_special_tokens=False)
        best_dec = min(best_dec, time.perf_counter() - t0)
    print(json.dumps({"engine": "hf-tokenizers", "mb": round(mb, 3), "tokens": len(ids),
                      "encode_mb_per_s": round(mb / best_enc, 2), "encode_tokens_per_s": round(len(ids) / best_enc),
                      "decode_mb_per_s": round(mb / best_dec, 2), "load_s": round(load, 3)}))


if __name__ == "__main__":
    main()
