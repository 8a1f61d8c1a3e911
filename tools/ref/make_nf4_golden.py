#!/usr/bin/env python3
"""NF4 codes and dequantised values of a few rows: tests/data/nf4/rows.txt (kernels/nf4.h's golden).

An independent statement of bitsandbytes' NF4 quantisation (quantize_4bit(quant_type="nf4"); its CUDA
kQuantizeBlockwise and dQuantizeNF4 / dDequantizeNF4, QLoRA, Dettmers et al. 2023), in numpy float32:
  absmax  = max |x| over a block of consecutive values (the last block of a row may be partial)
  normed  = x * (1 / absmax), the reciprocal and the product rounded to f32
  code    = the leaf of dQuantizeNF4's decision tree: strict comparisons (normed > t) against its
            f32 thresholds (written out below as bitsandbytes has them), so a value on a midpoint
            takes the lower level
  value   = NF4[code] * absmax in f32
Each row is quantised on its own, as bitsandbytes quantises a tensor of that one row: blocks of 64,
except row C, whose 96 inputs temper blocks by 32 (64 does not divide them; bitsandbytes' blocksize=32).
A block of zeros: temper stores absmax 0 and code 7 (0.0); bitsandbytes' kernel computes 0 * (1 / 0) =
NaN and takes code 0 (-1.0 * 0 = -0.0). Both read back as zero; this script follows temper there.

Run from the repository root (numpy 2.2.5 from tools/ref/requirements.txt; no torch needed):
  .venv/bin/python tools/ref/make_nf4_golden.py      # writes tests/data/nf4/rows.txt
Deterministic: the same bytes on every run.
"""
import os

import numpy as np

f32 = np.float32

# bitsandbytes' NF4 table (csrc/kernels.cu, nf4_data / dDequantizeNF4).
NF4 = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236328, 1.0
], dtype=f32)

# dQuantizeNF4's thresholds, ascending (its f32 literals: 0b0000 | -0.8480964004993439f | 0b0001 ...).
THRESHOLDS = np.array([
    -0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
    -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
    0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
    0.5016634166240692, 0.6427869200706482, 0.8614784181118011
], dtype=f32)

# They are the midpoints between neighbouring levels (taken in double, rounded to f32).
assert np.array_equal(THRESHOLDS, ((NF4[:-1].astype(np.float64) + NF4[1:]) / 2).astype(f32))


def dquantize_nf4(x):
    """dQuantizeNF4: the decision tree, written as the tree (not as a search over the thresholds)."""
    t = THRESHOLDS
    if x > t[7]:
        if x > t[11]:
            if x > t[13]:
                return 15 if x > t[14] else 14
            return 13 if x > t[12] else 12
        if x > t[9]:
            return 11 if x > t[10] else 10
        return 9 if x > t[8] else 8
    if x > t[3]:
        if x > t[5]:
            return 7 if x > t[6] else 6
        return 5 if x > t[4] else 4
    if x > t[1]:
        return 3 if x > t[2] else 2
    return 1 if x > t[0] else 0


def quantize_row(x, block):
    codes, absmax, values = [], [], []
    for b0 in range(0, len(x), block):
        blk = x[b0:b0 + block]
        a = f32(np.max(np.abs(blk)))
        absmax.append(a)
        if a == 0:
            codes += [7] * len(blk)
            values += [f32(0)] * len(blk)
            continue
        inv = f32(f32(1) / a)
        for v in blk:
            c = dquantize_nf4(f32(v * inv))
            codes.append(c)
            values.append(f32(NF4[c] * a))
    return codes, absmax, values


def row_a():
    """Every level exactly (absmax 2: normed = x / 2 exactly), every midpoint exactly (ties go down) and the
    next f32 above it (goes up), signed zeros, -absmax (code 0)."""
    x = [f32(2 * v) for v in NF4]
    x += [f32(2 * t) for t in THRESHOLDS]
    x += [np.nextafter(f32(2 * t), f32(np.inf)) for t in THRESHOLDS]
    x += [f32(0.0), f32(-0.0), f32(-2.0), f32(1e-30), f32(-1e-30), f32(0.3), f32(-0.3), f32(1.5)]
    x += [f32(0.1 * i - 0.9) for i in range(64 - len(x))]
    assert len(x) == 64
    return np.array(x, dtype=f32)


def row_b(rng):
    """absmax 3 (1 / 3 rounds): values whose code under x * (1 / absmax), bitsandbytes' rule, differs from their
    code under x / absmax; then Gaussian values."""
    a = f32(3)
    inv = f32(f32(1) / a)
    found = []
    for t in THRESHOLDS:
        v = f32(t * a)
        for _ in range(64):  # walk f32 steps around t * 3 for one the two rules code apart
            for w in (v, -v):
                if dquantize_nf4(f32(w * inv)) != dquantize_nf4(f32(w / a)) and w not in found:
                    found.append(w)
            v = np.nextafter(v, f32(np.inf))
        if len(found) >= 6:
            break
    assert len(found) >= 2, "no value tells the two rules apart"
    x = [a] + found[:6]
    x += list((rng.standard_normal(64 - len(x)) * 0.9).astype(f32))
    return np.array(x, dtype=f32), len(found[:6])


def main():
    rng = np.random.Generator(np.random.PCG64(2023))
    a = row_a()
    b, sensitive = row_b(rng)
    c = np.concatenate([np.zeros(32, dtype=f32), (rng.standard_normal(64) * 0.02).astype(f32)])
    d = (rng.standard_normal(40) * 0.05).astype(f32)
    rows = [("A", a, 64), ("B", b, 64), ("C", c, 32), ("D", d, 64)]
    out = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "nf4", "rows.txt")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    g = lambda v: "%.9g" % float(v)
    with open(out, "w") as f:
        f.write("# NF4 goldens: tools/ref/make_nf4_golden.py (bitsandbytes' algorithm in numpy float32).\n")
        f.write("# Per row: 'row NAME K BLOCK', then x, absmax, codes, values (%.9g: each f32 exactly).\n")
        for name, x, block in rows:
            codes, absmax, values = quantize_row(x, block)
            f.write(f"row {name} {len(x)} {block}\n")
            f.write("x " + " ".join(g(v) for v in x) + "\n")
            f.write("absmax " + " ".join(g(v) for v in absmax) + "\n")
            f.write("codes " + " ".join(str(c) for c in codes) + "\n")
            f.write("values " + " ".join(g(v) for v in values) + "\n")
    print(f"wrote {os.path.normpath(out)} ({sensitive} values of row B code apart under x / absmax)")


if __name__ == "__main__":
    main()
