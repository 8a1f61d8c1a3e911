#!/usr/bin/env python3
"""Data for experiments/zppo-warm: the student is SmolLM2-135M-Instruct after warmup.toml (40 SFT steps on gold
one-operation solutions, trained here into OUT_DIR/warmup), and the hard questions are those it still fails in 8
samples at T = 0.7, mined by experiments/zppo-hard/make_data.py from that student on operands to 99 (to 20, the task's eval split has
only ~130 distinct questions, and the student fails 11 of them).
Usage: make_data.py OUT_DIR   (env TEMPER, default build/bin/temper)"""
import glob, os, shutil, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1]
temper = os.environ.get("TEMPER", "build/bin/temper")
warm = os.path.join(out, "warmup")
ckpt = os.path.join(warm, "checkpoints", "step-40")  # the recipes' model.path
if not os.path.exists(os.path.join(warm, "report.html")):  # written last: present means the warm-up finished
    shutil.rmtree(warm, ignore_errors=True)
    subprocess.run([temper, "train", os.path.join(here, "warmup.toml"), "--out", warm, "--threads", "2"], check=True)
assert glob.glob(ckpt), f"make_data.py: the warm-up wrote no {ckpt}"
subprocess.run([sys.executable, os.path.join(here, "..", "zppo-hard", "make_data.py"), out, "--model", ckpt,
                "--problems", "320", "--max-operand", "99", "--hash-line"], check=True)
