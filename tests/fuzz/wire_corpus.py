#!/usr/bin/env python3
"""Writes the seed corpus of the wire_decoder fuzz target (tests/fuzz/corpus/wire_decoder/).

Each seed is a sequence of records, each prefixed by a one-byte length (the target's input format).
Seeds come from the hex column of tests/wire_golden.txt when it exists (real plugin output, one seed
per line plus one seed holding the whole file in order), and from a hand-built transaction covering
every record type and value kind.
    python3 tests/fuzz/wire_corpus.py
"""
import os

top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(top, "tests", "fuzz", "corpus", "wire_decoder")


def uv(v):
    b = bytearray()
    while v >= 0x80:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)
    return bytes(b)


def s(text):
    data = text.encode()
    return uv(len(data)) + data


def framed(records):
    return b"".join(bytes([len(r)]) + r for r in records if len(r) < 256)


hand = [
    b"B" + uv((1 << 32) | 770) + uv(0x16B3F28) + uv(2 * 812345678),
    b"R" + uv(16384) + s("public") + s("orders") + b"d" + uv(2)
    + uv(1) + s("id") + uv(23) + b"\x01" + uv(3) + s("status") + uv(25) + b"\x00",
    b"I" + uv(16384) + uv(2) + b"t" + s("42") + b"n",
    b"U" + uv(16384) + uv(2) + b"t" + s("42") + b"u" + uv(2) + b"s" + b"?",
    b"D" + uv(16384) + uv(2) + b"t" + s("42") + b"?",
    b"T" + b"\x03" + uv(1) + uv(16384),
    b"M" + b"\x01" + s("docsync") + s("hello"),
    b"C" + uv(0x16B3F28) + uv(0x16B3F58),
]

os.makedirs(out, exist_ok=True)
seeds = {"hand_all_records": framed(hand)}
for i, r in enumerate(hand):
    seeds["hand_%d" % i] = framed([r])

golden = os.path.join(top, "tests", "wire_golden.txt")
if os.path.exists(golden):
    records = []
    with open(golden) as f:
        for n, line in enumerate(f):
            hexpart = line.split("\t", 1)[0].strip()
            if hexpart:
                records.append(bytes.fromhex(hexpart))
                seeds["golden_%03d" % n] = framed([records[-1]])
    seeds["golden_all"] = framed(records)

for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(seeds), out))
