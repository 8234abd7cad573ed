#!/usr/bin/env python3
"""Writes the seed corpora of the record, snapshot, dump, state_blob and config fuzz targets from the
layouts in docs/storage-format.md and include/prefixd/state_blob.h. Checksums are left zero:
the targets fix them up when their flag asks. Run from the repository root."""
import os
import struct

def u32(v): return struct.pack('<I', v)
def u64(v): return struct.pack('<Q', v)
def s(b): return u32(len(b)) + b
def varint(v):
    out = b''
    while v >= 0x80:
        out += bytes([(v & 0x7f) | 0x80])
        v >>= 7
    return out + bytes([v])
def compact_entry(key, flags, at_ms, value):
    return varint(len(key)) + key + varint(flags) + varint(at_ms) + varint(len(value)) + value

def file_header(magic, sequence, base):
    return magic + u32(2) + u32(0x1234) + u64(sequence) + u64(base)

def record(rtype, lsn, payload, flags=0):
    return u64(0) + u32(0x52584650) + bytes([rtype, flags]) + b'\0\0' + u64(lsn) + u64(len(payload)) + payload

PAYLOADS = {
    1: s(b'sid') + u32(2) + u32(0) + u64(3) + b'abc' + u32(7) + u64(0),
    2: s(b'sid') + u32(4),
    3: s(b'sid'),
    4: b'',
    5: s(b'sid') + u64(4102444800000),
    6: s(b'k') + u32(4) + u64(0) + u64(5) + b'hello',
    7: s(b'k'),
    10: u32(2) + s(b'a') + u32(2) + u64(0) + u64(1) + b'1' + s(b'b') + u32(1) + u64(4102444800000) + u64(3) + b'xyz',
    12: s(b's') + u32(0) + u32(1) + u64(11) + s(b'12') + s(b'3'),
    13: s(b'l') + u32(1) + u64(0) + u64(11) + s(b'a') + s(b'bc'),
    14: s(b'h') + u32(0) + u32(1) + u64(10) + s(b'f') + s(b'v'),
    15: u64(3),
    18: s(b'z') + u32(0) + u32(1) + u64(17) + s(struct.pack('<d', 1.5)) + s(b'a'),
    20: compact_entry(b'k', 4, 0, b'hello'),
    21: varint(2) + compact_entry(b'a', 2, 0, b'1') + compact_entry(b'b', 1, 4102444800000, b'xyz'),
    19: s(b'x') + u32(1) + u64(0) + u64(16 + 10) + u64(5) + u64(1) + s(b'f') + s(b'v'),
    32: s(b'v') + u64(1) + u32(8) + u32(8),
    33: s(b'v') + u32(0) + u64(2) + u64(1) + u32(8) + u32(8) + u64(32) + b'\x01' * 32,
    34: s(b'v'),
    35: s(b'ns') + u64(2) + u64(3) + u32(32) + u32(2) + u32(16) + u64(1000) + u64(8) + b'\x05' * 8,
    36: s(b'ns'),
    37: s(b'ns') + u64(0) + u64(0) + u32(32) + u32(2) + u32(0) + u64(2**64 - 1) + u64(0),
}

def write(target, name, data):
    d = os.path.join('tests/fuzz/corpus', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)

for t, p in PAYLOADS.items():
    write('record', 'payload-%d' % t, bytes([0, t]) + p)
log = file_header(b'PFXDLOG\0', 1, 1)
for i, t in enumerate([32, 33, 1, 5, 2, 35, 36, 3, 4, 34, 6, 10, 20, 21, 7]):
    log += record(t, i + 1, PAYLOADS[t])
snap = file_header(b'PFXDSNP\0', 0, 5)
for t in [1, 32, 33, 37, 5]:
    snap += record(t, 0, PAYLOADS[t])
snap += record(15, 0, u64(4))
write('record', 'log-sealed', bytes([7]) + log)
write('record', 'snapshot-sealed', bytes([5]) + snap)
write('record', 'log-torn', bytes([7]) + log[:-5])
# An EXEC's records as one group (type 11: the count and bytes of the records that follow),
# between plain records; and the same log cut inside the group.
members = [(6, PAYLOADS[6]), (1, PAYLOADS[1]), (7, PAYLOADS[7])]
group_bytes = sum(32 + len(p) for _, p in members)
tx_log = file_header(b'PFXDLOG\0', 1, 1) + record(6, 1, PAYLOADS[6])
tx_log += record(11, 2, u64(len(members)) + u64(group_bytes))
for i, (t, p) in enumerate(members):
    tx_log += record(t, 3 + i, p)
tx_log += record(5, 3 + len(members), PAYLOADS[5])
write('record', 'log-exec-group', bytes([7]) + tx_log)
write('record', 'log-exec-group-torn', bytes([7]) + tx_log[:-(32 + len(PAYLOADS[5]) + 9)])
write('record', 'payload-11', bytes([0, 11]) + u64(2) + u64(64))
write('snapshot', 'snapshot-and-log', bytes([7, len(snap) & 255, len(snap) >> 8]) + snap + log)
write('snapshot', 'log-only', bytes([4, 0, 0]) + log)
write('snapshot', 'log-torn-skip', bytes([12, 0, 0]) + log[:-7])

# A snapshot with cold sessions: the hot put, then the cold directory (16) listing the cold puts
# (flag 1) that follow it, then the end record (the directory not counted).
cold_puts = [(b'c1', [(0, b'cold'), (3, b'')]), (b'c2', [(1, b'x' * 40)])]
cold_snap = file_header(b'PFXDSNP\0', 0, 5) + record(1, 0, PAYLOADS[1])
directory_size = 32 + 12 + sum(16 + len(sid) + 12 * len(layers) for sid, layers in cold_puts)
at = len(cold_snap) + directory_size
entries, cold_records = b'', b''
for sid, layers in cold_puts:
    payload = s(sid) + u32(len(layers)) + b''.join(u32(l) + u64(len(v)) + v for l, v in layers)
    entries += u64(at) + s(sid) + u32(len(layers)) + b''.join(u32(l) + u64(len(v)) for l, v in layers)
    cold_records += record(1, 0, payload, flags=1)
    at += 32 + len(payload)
cold_snap += record(16, 0, u64(at) + u32(len(cold_puts)) + entries) + cold_records
cold_snap += record(15, 0, u64(1 + len(cold_puts)))
write('record', 'snapshot-cold-directory', bytes([5]) + cold_snap)
write('snapshot', 'snapshot-cold-directory', bytes([3, len(cold_snap) & 255, len(cold_snap) >> 8]) + cold_snap)

# A snapshot with cold V-store sessions: a hot session, then the V-store cold directory (17)
# listing each cold session's create record and its rows records (flag 1), fp32 rows of dim 8.
cold_vectors = [(b'c1', 4, [(0, 0, 2), (1, 5, 1)]), (b'c2', 5, [(0, 3, 1)])]
vec_snap = file_header(b'PFXDSNP\0', 0, 5) + record(32, 0, PAYLOADS[32]) + record(33, 0, PAYLOADS[33])
directory_size = 32 + 12 + sum(32 + len(sid) + 20 * len(rows) for sid, _, rows in cold_vectors)
at = len(vec_snap) + directory_size
entries, cold_records, count = b'', b'', 2
for sid, index, rows in cold_vectors:
    entries += u64(at) + s(sid) + u64(index) + u32(8) + u32(8) + u32(len(rows))
    create = s(sid) + u64(index) + u32(8) + u32(8)
    cold_records += record(32, 0, create)
    at += 32 + len(create)
    for layer, start, n in rows:
        entries += u32(layer) + u64(start) + u64(n)
        payload = s(sid) + u32(layer) + u64(start) + u64(n) + u32(8) + u32(8) + u64(32 * n) + b'\x02' * (32 * n)
        cold_records += record(33, 0, payload, flags=1)
        at += 32 + len(payload)
    count += 1 + len(rows)
vec_snap += record(17, 0, u64(at) + u32(len(cold_vectors)) + entries) + cold_records
vec_snap += record(15, 0, u64(count))
write('record', 'snapshot-vector-cold-directory', bytes([5]) + vec_snap)
write('snapshot', 'snapshot-vector-cold-directory',
      bytes([3, len(vec_snap) & 255, len(vec_snap) >> 8]) + vec_snap)

# DUMP payloads (records then a footer): mode 1 has dump_fuzz append the footer itself.
string_set = s(b'k') + u32(4) + u64(0) + u64(5) + b'hello'
namespace = s(b'ns') + u32(2) + u32(1) + u32(2) + u32(1) + u32(8) + u64(0)
kv_session = s(b'ns_pk') + u64(1) + u32(8) + u32(8)
kv_rows = s(b'ns_pk') + u32(0) + u64(2) + u64(1) + u32(8) + u32(8) + u64(32) + b'\x01' * 32
write('dump', 'string', bytes([1]) + record(6, 0, string_set))
write('dump', 'ssm', bytes([1]) + record(1, 0, PAYLOADS[1]))
write('dump', 'vstore', bytes([1]) + record(32, 0, PAYLOADS[32]) + record(33, 0, PAYLOADS[33]))
write('dump', 'kvprefix', bytes([1]) + record(37, 0, PAYLOADS[37]) +
      record(1, 0, s(b'ns') + u32(1) + u32(0) + u64(3) + b'abc') + record(32, 0, kv_session) +
      record(33, 0, kv_rows))
write('dump', 'namespace', bytes([1]) + record(40, 0, namespace))
write('dump', 'unsealed', bytes([0]) + record(6, 0, string_set) + u32(1))

def blob(arrays):
    out = u32(1) + u32(len(arrays))
    for dtype, shape, data in arrays:
        out += u32(len(shape)) + b''.join(u32(d) for d in shape) + u32(dtype) + data
    return out
write('state_blob', 'empty', blob([]))
write('state_blob', 'three', blob([(0, [2, 3], struct.pack('<6f', 1, 2, 3, 4, 5, 6)),
                                   (1, [4], b'\x00\x3c' * 4), (2, [], struct.pack('<f', 1.5)),
                                   (0, [0], b'')]))
write('config', 'basic', b'# comment\nport 0\nappendfsync always\nmaxmemory 1gb\nvstore-default-vquant "int8"\n')
write('config', 'bad', b'timeout 9223372036854776\nunknown-thing yes\n')
