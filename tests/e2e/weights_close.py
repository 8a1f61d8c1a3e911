#!/usr/bin/env python3
"""Two safetensors files hold the same tensors within a relative tolerance (max |a-b| / max |a| per
tensor). Standard library only (F32 tensors). Usage: weights_close.py A B TOL"""
import json, struct, sys
from array import array


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", f"{path}: {name} is {t['dtype']}, expected F32"
        a = array("f")
        a.frombytes(data[t["data_offsets"][0]:t["data_offsets"][1]])
        out[name] = a
    return out


a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys(), f"tensor names differ: {sorted(a.keys() ^ b.keys())}"
worst, worst_name = 0.0, ""
for name in a:
    scale = max(max(abs(x) for x in a[name]), 1e-30)
    d = max(abs(x - y) for x, y in zip(a[name], b[name])) / scale
    if d > worst:
        worst, worst_name = d, name
print(f"max relative difference {worst:.3g} ({worst_name or 'all equal'})")
sys.exit(0 if worst <= tol else 1)
