#!/usr/bin/env python3
"""Write the hand-made seeds of the fuzz corpora (fuzz/corpus/TARGET/seed-*).

Seeds are valid inputs of each parser (so the fuzzer starts inside the
format) plus a few edge cases; the files copied from the repository
(presets, corpus files, job files, traces) are added by `scripts/fuzz.sh
--seed`. Run from the repository root: python3 fuzz/make-seeds.py
"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# --- NBD -----------------------------------------------------------------
IHAVEOPT = 0x49484156454F5054
OPT = dict(EXPORT_NAME=1, ABORT=2, LIST=3, STARTTLS=5, INFO=6, GO=7,
           STRUCTURED_REPLY=8, LIST_META_CONTEXT=9, SET_META_CONTEXT=10)


def opt(o, payload=b""):
    return struct.pack(">QII", IHAVEOPT, OPT[o], len(payload)) + payload


def info_payload(name=b"", infos=(0, 1, 2, 3)):
    return struct.pack(">I", len(name)) + name + struct.pack(">H", len(infos)) + b"".join(
        struct.pack(">H", i) for i in infos)


def meta_payload(name=b"", queries=(b"base:allocation",)):
    p = struct.pack(">I", len(name)) + name + struct.pack(">I", len(queries))
    for q in queries:
        p += struct.pack(">I", len(q)) + q
    return p


FLAGS = struct.pack(">I", 3)  # fixed newstyle, no zeroes
put("nbd_handshake", "go", FLAGS + opt("STRUCTURED_REPLY") + opt("SET_META_CONTEXT", meta_payload())
    + opt("GO", info_payload()))
put("nbd_handshake", "list-info-abort", FLAGS + opt("LIST") + opt("INFO", info_payload(b"x"))
    + opt("LIST_META_CONTEXT", meta_payload(queries=(b"base:",))) + opt("ABORT"))
put("nbd_handshake", "export-name", FLAGS + opt("EXPORT_NAME", b""))
put("nbd_handshake", "starttls-unknown", FLAGS + opt("STARTTLS") + struct.pack(">QII", IHAVEOPT, 99, 4)
    + b"abcd" + opt("GO", info_payload()))
put("nbd_handshake", "old-client", struct.pack(">I", 0))

REQ = 0x25609513
CMD = dict(READ=0, WRITE=1, DISC=2, FLUSH=3, TRIM=4, CACHE=5, WRITE_ZEROES=6, BLOCK_STATUS=7)


def req(cmd, flags=0, off=0, length=4096, cookie=1):
    return struct.pack(">IHHQQI", REQ, flags, CMD[cmd], cookie, off, length)


for c in CMD:
    put("nbd_request", c.lower(), req(c))
put("nbd_request", "write-fua", req("WRITE", flags=1, off=1 << 20, length=512))
put("nbd_request", "zeroes-nohole-fua", req("WRITE_ZEROES", flags=3, off=0, length=1 << 20))
put("nbd_request", "option-header", struct.pack(">QII", IHAVEOPT, 7, 6) + info_payload())
put("nbd_request", "meta", meta_payload(b"", (b"base:allocation", b"qemu:dirty-bitmap:x")))

# --- virtio-blk ring ----------------------------------------------------------
NEXT, WRITE, INDIRECT = 1, 2, 4
T = dict(IN=0, OUT=1, FLUSH=4, GET_ID=8, DISCARD=11, WRITE_ZEROES=13)


def ring(chains, size_log=4, indirect_table=None):
    """Memory: descriptor table at 0, avail at 0x4000, used at 0x6000,
    buffers from 0x8000; the first byte picks the queue size."""
    mem = bytearray(0x10000)
    descs = []
    heads = []
    buf = 0x8000
    for chain in chains:
        heads.append(len(descs))
        for i, (kind, payload, length, flags) in enumerate(chain):
            addr = buf
            if payload:
                mem[addr:addr + len(payload)] = payload
            buf += max(length, 16)
            f = flags | (NEXT if i + 1 < len(chain) else 0)
            nxt = len(descs) + 1 if i + 1 < len(chain) else 0
            descs.append((addr, length, f, nxt))
    for i, (a, l, f, n) in enumerate(descs):
        mem[i * 16:(i + 1) * 16] = struct.pack("<QIHH", a, l, f, n)
    mem[0x4000:0x4004] = struct.pack("<HH", 0, len(heads))
    for i, h in enumerate(heads):
        mem[0x4004 + 2 * i:0x4006 + 2 * i] = struct.pack("<H", h)
    return bytes([size_log]) + bytes(mem)


def hdr(t, sector=0):
    return struct.pack("<IIQ", T[t], 0, sector)


put("vhost_queue", "write-read-flush", ring([
    [("h", hdr("OUT", 8), 16, 0), ("d", b"\x5a" * 4096, 4096, 0), ("s", b"", 1, WRITE)],
    [("h", hdr("IN", 8), 16, 0), ("d", b"", 4096, WRITE), ("s", b"", 1, WRITE)],
    [("h", hdr("FLUSH"), 16, 0), ("s", b"", 1, WRITE)],
]))
put("vhost_queue", "discard-zeroes-getid", ring([
    [("h", hdr("DISCARD"), 16, 0), ("d", struct.pack("<QII", 0, 2048, 0), 16, 0), ("s", b"", 1, WRITE)],
    [("h", hdr("WRITE_ZEROES"), 16, 0), ("d", struct.pack("<QII", 4096, 8, 1), 16, 0),
     ("s", b"", 1, WRITE)],
    [("h", hdr("GET_ID"), 16, 0), ("d", b"", 20, WRITE), ("s", b"", 1, WRITE)],
]))
put("vhost_queue", "beyond-the-end", ring([
    [("h", hdr("IN", (1 << 21) - 1), 16, 0), ("d", b"", 4096, WRITE), ("s", b"", 1, WRITE)],
]))
# An indirect chain: the head points at a table of three descriptors.
m = bytearray(ring([[("h", hdr("OUT"), 16, 0)]])[1:])
table = 0x9000
m[0:16] = struct.pack("<QIHH", table, 48, INDIRECT, 0)
m[table:table + 48] = (struct.pack("<QIHH", 0xA000, 16, NEXT, 1) + struct.pack("<QIHH", 0xB000, 512, NEXT, 2)
                      + struct.pack("<QIHH", 0xC000, 1, WRITE, 0))
m[0xA000:0xA010] = hdr("OUT", 0)
put("vhost_queue", "indirect", bytes([4]) + bytes(m))

# --- traces ---------------------------------------------------------------------
put("iolog", "v2", "fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x write 0 4096\n"
    "/dev/x wait 20 0\n/dev/x read 4096 8192\n/dev/x trim 0 1048576\n/dev/x sync 0 0\n/dev/x close\n")
put("iolog", "v3", "fio version 3 iolog\n0 /dev/x add\n1 /dev/x open\n10 /dev/x write 0 4096\n"
    "250 /dev/x read 4096 8192\n300 /dev/x trim 0 1048576\n400 /dev/x close\n")
put("blkparse", "qdc", "  8,0    1        1     0.000000000  1234  Q  WS 2048 + 8 [fio]\n"
    "  8,0    1        2     0.000001000  1234  D  WS 2048 + 8 [fio]\n"
    "  8,0    1        3     0.000101000     0  C  WS 2048 + 8 [0]\n"
    "  8,0    1        4     0.000200000  1234  Q   R 4096 + 16 [fio]\n"
    "  8,0    1        5     0.000300000  1234  Q   D 0 + 2048 [fio]\n"
    "  8,0    1        6     0.000400000  1234  Q FWFS 0 + 0 [fio]\n")


def blk_event(seq, time, sector, nbytes, tc, action=1, pdu=b""):
    magic = 0x65617407
    act = (tc << 16) | action
    return struct.pack("<IIQQIIIIIHH", magic, seq, time, sector, nbytes, act, 1234, (8 << 20), 0, 0,
                       len(pdu)) + pdu


put("blktrace", "q-events", blk_event(1, 1000, 2048, 4096, 1 << 1) + blk_event(2, 2000, 0, 8192, 1 << 0)
    + blk_event(3, 3000, 0, 1 << 20, (1 << 13) | (1 << 1)) + blk_event(4, 4000, 0, 0, 1 << 2)
    + blk_event(5, 5000, 8, 512, 1 << 1, action=2, pdu=b"xx"))

# --- the control socket ----------------------------------------------------------------
for i, line in enumerate([
    '{"cmd":"stats"}', '{"cmd":"smart"}', '{"cmd":"idle","ns":5000000000}',
    '{"cmd":"precondition","steps":[{"fill-seq":{"bs":65536}},{"random":{"bs":4096,"amount":"1.5x"}},"trim-all"],"seed":3}',
    '{"cmd":"precondition","steps":[{"wear":{"percent":50}}]}',
    '{"cmd":"fault-add","fault":{"kind":"read-error","offset":4096,"length":512}}',
    '{"cmd":"fault-add","fault":{"kind":"stall","ms":100,"every_ms":1000}}',
    '{"cmd":"fault-add","fault":{"kind":"throttle","mb_s":50}}',
    '{"cmd":"fault-add","fault":{"kind":"media-wear","acceleration":1000}}',
    '{"cmd":"power-cut","trigger":{"when":"after-writes","writes":3},"restart_after_ms":500}',
    '{"cmd":"power-on"}', '{"cmd":"trim-log","after":0,"max":10}',
]):
    put("ctl_json", "line-%02d" % i, line)
print("seeds written under", ROOT)
