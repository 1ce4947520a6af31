#!/usr/bin/env python3
"""Writes the seed corpus of the pgoutput_decoder fuzz target (tests/fuzz/corpus/pgoutput_decoder/).

Each seed is a sequence of pgoutput protocol version 2 messages (version 1's, and streamed transactions), each prefixed by a one-byte length
(the target's input format), for the relations the target watches: one seed per message, one per
transaction and one holding them all in order.
    python3 tests/fuzz/pgoutput_corpus.py
"""
import os
import struct

top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(top, "tests", "fuzz", "corpus", "pgoutput_decoder")


def i8(v):
    return struct.pack(">B", v)


def i16(v):
    return struct.pack(">H", v)


def i32(v):
    return struct.pack(">I", v)


def i64(v):
    return struct.pack(">Q", v)


def cstr(text):
    return text.encode() + b"\0"


def text(value):
    data = value.encode()
    return b"t" + i32(len(data)) + data


def framed(messages):
    return b"".join(bytes([len(m)]) + m for m in messages if len(m) < 256)


def begin(xid, lsn):
    return b"B" + i64(lsn) + i64(812345678) + i32(xid)


def commit(lsn):
    return b"C" + i8(0) + i64(lsn) + i64(lsn + 0x30) + i64(812345678)


orders = (b"R" + i32(16384) + cstr("public") + cstr("orders") + b"d" + i16(3)
          + i8(1) + cstr("id") + i32(23) + i32(0xFFFFFFFF)
          + i8(0) + cstr("note") + i32(25) + i32(0xFFFFFFFF)
          + i8(0) + cstr("status") + i32(25) + i32(0xFFFFFFFF))
items = (b"R" + i32(16385) + cstr("public") + cstr("items") + b"f" + i16(3)
         + i8(1) + cstr("id") + i32(23) + i32(0xFFFFFFFF)
         + i8(1) + cstr("v") + i32(1043) + i32(14)
         + i8(1) + cstr("added") + i32(23) + i32(0xFFFFFFFF))

transactions = [
    [begin(700, 0x1000), orders,
     b"I" + i32(16384) + b"N" + i16(3) + text("1") + b"n" + text("new"),
     b"U" + i32(16384) + b"N" + i16(3) + text("1") + text("x") + b"u",
     b"U" + i32(16384) + b"K" + i16(3) + text("1") + b"n" + b"n" + b"N" + i16(3) + text("2") + b"n" + text("paid"),
     b"D" + i32(16384) + b"K" + i16(3) + text("2") + b"n" + b"n",
     commit(0x1000)],
    [begin(701, 0x2000), b"Y" + i32(17000) + cstr("public") + cstr("mood"), items,
     b"U" + i32(16385) + b"O" + i16(3) + text("1") + text("a") + b"n" + b"N" + i16(3) + text("1") + text("b") + b"u",
     b"T" + i32(2) + i8(3) + i32(16385) + i32(16384),
     b"M" + i8(1) + i64(0x2010) + cstr("docsync.reload") + i32(3) + b"now",
     commit(0x2000)],
    [begin(702, 0x3000), b"O" + i64(0x2500) + cstr("node_a"),
     b"M" + i8(1) + i64(0x3010) + cstr("other") + i32(1) + b"x", commit(0x3000)],
    [b"M" + i8(0) + i64(0x3100) + cstr("docsync") + i32(2) + b"\0\1"],
    # Streamed: 800 and 810 interleaved; 800's subtransaction 801 aborts, 800 commits, 810 aborts.
    [b"S" + i32(800) + i8(1), b"R" + i32(800) + orders[1:],
     b"M" + i32(800) + i8(1) + i64(0x4010) + cstr("docsync.rt") + i32(2) + b"hi",
     b"I" + i32(801) + i32(16384) + b"N" + i16(3) + text("5") + b"n" + text("gone"), b"E",
     b"S" + i32(810) + i8(1), b"R" + i32(810) + items[1:],
     b"I" + i32(810) + i32(16385) + b"N" + i16(3) + text("1") + text("a") + b"n", b"E",
     b"A" + i32(800) + i32(801),
     b"S" + i32(800) + i8(0), b"I" + i32(800) + i32(16384) + b"N" + i16(3) + text("6") + b"n" + text("kept"), b"E",
     b"c" + i32(800) + i8(0) + i64(0x5000) + i64(0x5030) + i64(812345678),
     b"A" + i32(810) + i32(810)],
]

os.makedirs(out, exist_ok=True)
seeds = {"all": framed([m for t in transactions for m in t])}
for n, t in enumerate(transactions):
    seeds["txn_%d" % n] = framed(t)
    for k, m in enumerate(t):
        seeds["txn_%d_msg_%d" % (n, k)] = framed([m])

for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(seeds), out))
