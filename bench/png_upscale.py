#!/usr/bin/env python3
"""Nearest-neighbour upscaling of 8-bit PNGs (grey, RGB or RGBA; every filter type), standard library only:
bench/png_upscale.py OUT.png FACTOR [--width PX] IN.png [IN2.png ...] draws the inputs (of one height; only their left
PX columns with --width) FACTOR times larger, side by side with a white gap. temper's sample grids are 16 pixels an image; docs show them larger."""
import struct
import sys
import zlib


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def read(path):
    d = open(path, "rb").read()
    i, idat = 8, b""
    while i < len(d):
        (n,) = struct.unpack(">I", d[i : i + 4])
        kind, body = d[i + 4 : i + 8], d[i + 8 : i + 8 + n]
        i += 12 + n
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8, "8-bit PNGs only"
        elif kind == b"IDAT":
            idat += body
    ch = {0: 1, 2: 3, 6: 4}[colour]
    raw, stride = zlib.decompress(idat), w * ch
    rows, prev, o = [], bytearray(stride), 0
    for _ in range(h):
        f, line = raw[o], bytearray(raw[o + 1 : o + 1 + stride])
        o += 1 + stride
        for x in range(stride):
            a = line[x - ch] if x >= ch else 0
            b = prev[x]
            c = prev[x - ch] if x >= ch else 0
            line[x] = (line[x] + (0, a, b, (a + b) // 2, paeth(a, b, c))[f]) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


def write(path, w, h, ch, rows):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, {1: 0, 3: 2, 4: 6}[ch], 0, 0, 0)
    data = zlib.compress(b"".join(b"\0" + r for r in rows), 9)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b""))


def upscale(rows, w, ch, k):
    out = []
    for r in rows:
        out += [b"".join(r[x * ch : (x + 1) * ch] * k for x in range(w))] * k
    return out


def side_by_side(dst, k, srcs, width=0, gap=4):
    images = [read(s) for s in srcs]
    if width:
        images = [(min(w, width), h, ch, [r[: min(w, width) * ch] for r in rows]) for w, h, ch, rows in images]
    h, ch = images[0][1], images[0][2]
    assert all(im[1] == h and im[2] == ch for im in images), "inputs of one height and colour type expected"
    scaled = [upscale(rows, w, ch, k) for w, _, _, rows in images]
    white = bytes([255] * ch * gap * k)
    rows = [white.join(parts) for parts in zip(*scaled)]
    width = sum(w for w, _, _, _ in images) * k + gap * k * (len(images) - 1)
    write(dst, width, h * k, ch, rows)


if __name__ == "__main__":
    args = sys.argv[3:]
    width = 0
    if args and args[0] == "--width":
        width, args = int(args[1]), args[2:]
    side_by_side(sys.argv[1], int(sys.argv[2]), args, width)
