#!/usr/bin/python3
"""The prefix index (docs/prefix-index.md) over a real socket with Debian's python3-redis:
namespaces, blocks, checkpoints, the match and its lease, speculative windows, drops with their
cascade, a namespace budget's eviction and restarts (log replay and snapshot). The server is
$PREFIXD_SERVER. Run with /usr/bin/python3.
"""

import hashlib
import os
import socket
import struct
import sys
import tempfile
import time
import unittest

try:
    import redis
except ImportError:  # pragma: no cover - depends on the machine
    print("python3-redis is not installed for this interpreter; run with /usr/bin/python3",
          file=sys.stderr)
    sys.exit(1)

from prefixd_server import start_server, stop_server

ROOT = b"\0" * 16
BS, KVDIM = 4, 2


def h(data):
    return hashlib.blake2b(data, digest_size=16).digest()


def tok(tokens):
    return b"".join(struct.pack("<I", t) for t in tokens)


def chain(tokens):
    """The full blocks' hashes h_1 .. h_n of a token list."""
    out, prev = [], ROOT
    for i in range(len(tokens) // BS):
        prev = h(prev + tok(tokens[i * BS:(i + 1) * BS]))
        out.append(prev)
    return out


def pos_hash(tokens, length):
    hs = chain(tokens[:length])
    anchor = hs[-1] if hs else ROOT
    r = length % BS
    return anchor if r == 0 else h(anchor + tok(tokens[length - r:length]))


def kv_rows(tokens, start, end, layer=0):
    """Deterministic K rows then V rows for positions [start, end): value = f(token, pos)."""
    k = [float(tokens[p] * 10 + p + layer * 1000) for p in range(start, end) for _ in range(KVDIM)]
    v = [-x for x in k]
    return k, v


def pack(floats):
    return struct.pack("<%df" % len(floats), *floats)


def unpack(raw):
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


class PrefixIndexTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="prefixd-pidx-")
        self.proc, self.port = start_server(self.root)
        self.r = redis.Redis(port=self.port, socket_timeout=30)
        self.ns = "{demo}"
        self.assertEqual(self.cmd("KV.PREFIX.NAMESPACE", self.ns, "BLOCK", BS, "ATTN", 1, "KVDIM",
                                  KVDIM, "RECURRENT", 2, "VQUANT", "fp32"), b"OK")

    def tearDown(self):
        self.r.close()
        stop_server(self, self.proc, self.root)

    def cmd(self, *args):
        return self.r.execute_command(*args)

    def restart(self):
        self.r.close()
        self.proc.terminate()
        self.assertEqual(self.proc.wait(timeout=10), 0)
        self.proc, self.port = start_server(self.root)
        self.r = redis.Redis(port=self.port, socket_timeout=30)

    # --- helpers that speak the commands ---

    def store_blocks(self, tokens, first_block, last_block):
        """BSTORE blocks first_block+1 .. last_block (1-based) of `tokens`."""
        hs = chain(tokens)
        parent = hs[first_block - 1] if first_block > 0 else ROOT
        n = last_block - first_block
        k, v = kv_rows(tokens, first_block * BS, last_block * BS)
        return self.cmd("KV.PREFIX.BSTORE", self.ns, parent, n, b"".join(hs[first_block:last_block]),
                        0, pack(k + v))

    def state(self, tokens, length, layer):
        return h(tok(tokens[:length]) + bytes([layer])) * 8  # 128 bytes, a function of the prefix

    def store_ckpt(self, tokens, length):
        hs = chain(tokens[:length])
        anchor = hs[-1] if hs else ROOT
        args = ["SSM.PREFIX.CKPT.STORE", self.ns, anchor, length, pos_hash(tokens, length),
                0, self.state(tokens, length, 0), 1, self.state(tokens, length, 1)]
        r = length % BS
        if r:
            k, v = kv_rows(tokens, length - r, length)
            args += ["TAIL", 0, pack(k + v)]
        return self.cmd(*args)

    def match(self, tokens, candidates=(), *extra):
        hs = chain(tokens)
        args = ["KV.PREFIX.MATCH", self.ns, len(hs), b"".join(hs)]
        if candidates:
            args += ["AT", len(candidates), b"".join(struct.pack("<Q", c) for c in candidates),
                     b"".join(pos_hash(tokens, c) for c in candidates)]
        return self.cmd(*args, *extra)

    def check_answer(self, tokens, reply):
        """The lease's K/V is exactly the rows of [0, L) and its state the state at L."""
        length, lease = reply[0], reply[1]
        self.assertGreater(lease, 0)
        self.assertEqual(reply[3], pos_hash(tokens, length))
        got = unpack(self.cmd("KV.PREFIX.LFETCH", self.ns, lease, "ATTN", 0))
        k, v = kv_rows(tokens, 0, length)
        self.assertEqual(got, k + v)
        self.assertEqual(reply[4], len(k + v) * 4)
        states = self.cmd("KV.PREFIX.LFETCH", self.ns, lease, "STATE", "RELEASE")
        self.assertEqual(states, [self.state(tokens, length, 0), self.state(tokens, length, 1)])
        self.assertEqual(reply[5], 256)

    # --- tests ---

    def test_namespace_shape_type_and_errors(self):
        self.assertEqual(self.cmd("KV.PREFIX.NAMESPACE", self.ns, "BLOCK", BS, "ATTN", 1, "KVDIM",
                                  KVDIM, "RECURRENT", 2, "VQUANT", "fp32"), b"OK")
        with self.assertRaisesRegex(redis.ResponseError,
                                    "namespace {demo} exists with BLOCK 4 ATTN 1 KVDIM 2 "
                                    "RECURRENT 2 VQUANT fp32"):
            self.cmd("KV.PREFIX.NAMESPACE", self.ns, "BLOCK", 8, "ATTN", 1, "KVDIM", KVDIM,
                     "RECURRENT", 2)
        with self.assertRaisesRegex(redis.ResponseError, "BLOCK '4097'"):
            self.cmd("KV.PREFIX.NAMESPACE", "x", "BLOCK", 4097, "ATTN", 1, "KVDIM", 2,
                     "RECURRENT", 1)
        with self.assertRaisesRegex(redis.ResponseError,
                                    r"invalid VQUANT 'q9': expected "
                                    r"fp32\|fp16\|bf16\|int8\|fp8\|mlx4g32$"):
            self.cmd("KV.PREFIX.NAMESPACE", "x", "BLOCK", 4, "ATTN", 1, "KVDIM", 2,
                     "RECURRENT", 1, "VQUANT", "q9")
        with self.assertRaisesRegex(redis.ResponseError,
                                    "invalid FMT 'F64': expected F32, F16 or BF16$"):
            self.cmd("KV.PREFIX.BSTORE", self.ns, b"\0" * 16, 1, b"\7" * 16, 0, b"xx", "FMT",
                     "F64")
        self.assertEqual(self.cmd("KV.PREFIX.NAMESPACE", "x", "BLOCK", 4096, "ATTN", 1, "KVDIM",
                                  2, "RECURRENT", 1), b"OK")
        self.assertEqual(self.cmd("TYPE", self.ns), b"prefix-index")
        # COMMAND INFO over a raw socket (python3-redis refuses it): first key, last key and
        # step are 1, 1, 1 (the namespace), and no movablekeys flag.
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(b"*3\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n$15\r\nKV.PREFIX.MATCH\r\n")
            reply, deadline = b"", time.monotonic() + 5
            while b"@" not in reply and time.monotonic() < deadline:
                reply += s.recv(65536)
        self.assertNotIn(b"movablekeys", reply)
        self.assertIn(b":1\r\n:1\r\n:1\r\n", reply)
        tokens = list(range(1, 13))
        with self.assertRaisesRegex(redis.ResponseError, "parent block is not stored"):
            self.store_blocks(tokens, 1, 2)
        with self.assertRaisesRegex(redis.ResponseError, "anchor block is not stored"):
            self.store_ckpt(tokens, 6)
        self.assertEqual(self.store_blocks(tokens, 0, 2), 2)
        # BFETCH: the rows of one and of two blocks (K rows, then V rows), nil for a block not
        # stored, and its errors in their order: the namespace, the count, the hashes, the
        # layer, the format.
        hs = chain(tokens)
        k, v = kv_rows(tokens, 0, 4)
        self.assertEqual(self.cmd("KV.PREFIX.BFETCH", self.ns, 1, hs[0], 0), pack(k + v))
        k, v = kv_rows(tokens, 0, 8)
        self.assertEqual(self.cmd("KV.PREFIX.BFETCH", self.ns, 2, hs[0] + hs[1], 0, "FMT",
                                  "NATIVE"), pack(k + v))
        self.assertIsNone(self.cmd("KV.PREFIX.BFETCH", self.ns, 1, hs[2], 0))
        for args, error in [(("missing", 0, b"", 9), "no such prefix namespace"),
                            ((self.ns, 0, b"", 9), "count '0'"),
                            ((self.ns, 1, b"short", 9), "hashes must be 1 x 16 = 16 bytes"),
                            ((self.ns, 1, hs[0], 1), "layer '1'"),
                            ((self.ns, 1, hs[0], 0, "FMT"), "syntax error")]:
            with self.assertRaisesRegex(redis.ResponseError, error):
                self.cmd("KV.PREFIX.BFETCH", *args)
        with self.assertRaisesRegex(redis.ResponseError,
                                    "a checkpoint needs all 2 recurrent layers, got 1"):
            self.cmd("SSM.PREFIX.CKPT.STORE", self.ns, chain(tokens)[0], 4, chain(tokens)[0], 0,
                     b"s")
        at_max = self.cmd("KV.PREFIX.MATCH", self.ns, 0, b"", "AT", 1024,
                          struct.pack("<Q", 3) * 1024, b"\7" * 16 * 1024, "NOLEASE")
        self.assertEqual(at_max[0:2], [0, 0])
        with self.assertRaisesRegex(redis.ResponseError, "AT count '1025'"):
            self.cmd("KV.PREFIX.MATCH", self.ns, 0, b"", "AT", 1025,
                     struct.pack("<Q", 3) * 1025, b"\7" * 16 * 1025)
        with self.assertRaisesRegex(redis.ResponseError, "LEASE '600001'"):
            self.cmd("KV.PREFIX.MATCH", self.ns, 0, b"", "LEASE", 600001)
        with self.assertRaisesRegex(redis.ResponseError, "hashes must be 2 x 16 = 32 bytes"):
            self.cmd("KV.PREFIX.MATCH", self.ns, 2, b"short")
        with self.assertRaisesRegex(redis.ResponseError,
                                    "AT positions must be 2 x 8 = 16 bytes, got 5$"):
            self.cmd("KV.PREFIX.MATCH", self.ns, 0, b"", "AT", 2, b"short", b"\7" * 16 * 2)
        with self.assertRaisesRegex(redis.ResponseError, "WRONGTYPE"):
            self.cmd("SSM.PREFIX.FETCH", self.ns, 0)
        self.cmd("SSM.PREFIX.STORE", "plain", 0, b"x")
        with self.assertRaisesRegex(redis.ResponseError, "WRONGTYPE"):
            self.cmd("KV.PREFIX.MATCH", "plain", 0, b"")
        with self.assertRaisesRegex(redis.ResponseError, "no such prefix namespace"):
            self.cmd("KV.PREFIX.MATCH", "missing", 0, b"")
        self.assertEqual(self.cmd("DEL", self.ns), 1)
        self.assertEqual(self.cmd("EXISTS", self.ns), 0)

    def test_kv_prefix_drop_removes_a_namespace(self):
        # docs/prefix-index.md: KV.PREFIX.DROP removes a prefix-index namespace with its blocks and
        # checkpoints (it answered WRONGTYPE before), beside a Pion registration, in one call.
        tokens = list(range(1, 13))
        self.assertEqual(self.store_blocks(tokens, 0, 2), 2)
        self.store_ckpt(tokens, 6)
        self.assertEqual(self.cmd("KV.PREFIX.REGISTER", "pion", 2, "fp32"), b"OK")
        self.assertEqual(self.cmd("KV.PREFIX.DROP", self.ns, "pion", "never"), 2)
        self.assertEqual(self.cmd("EXISTS", self.ns), 0)
        self.assertEqual(self.cmd("KV.PREFIX.DROP", self.ns), 0)
        with self.assertRaisesRegex(redis.ResponseError, "no such prefix namespace"):
            self.cmd("KV.PREFIX.MATCH", self.ns, 0, b"")
        # Made again from nothing: nothing of the old one is matched.
        self.assertEqual(self.cmd("KV.PREFIX.NAMESPACE", self.ns, "BLOCK", BS, "ATTN", 1, "KVDIM",
                                  KVDIM, "RECURRENT", 2, "VQUANT", "fp32"), b"OK")
        self.assertEqual(self.store_blocks(tokens, 0, 1), 1)
        self.assertEqual(self.cmd("KV.PREFIX.MATCH", self.ns, 2, b"".join(chain(tokens)[:2]),
                                  "NOLEASE")[2], 1)

    def test_worked_example_and_never_kv_only(self):
        tokens = list(range(1, 13))  # blocks [0,4) [4,8) and part of [8,12)
        self.assertEqual(self.store_blocks(tokens, 0, 2), 2)
        self.assertEqual(self.store_blocks(tokens, 0, 2), 0)  # shared: nothing new
        # Blocks alone are K/V without state: a hybrid namespace never answers them.
        self.assertEqual(self.match(tokens, [10])[0:3], [0, 0, 2])
        self.assertEqual(self.store_ckpt(tokens, 10), b"OK")
        reply = self.match(tokens, [10])
        self.assertEqual(reply[0], 10)
        self.assertEqual(reply[2], 2)
        self.check_answer(tokens, reply)
        # Without listing 10 the only candidates are block boundaries: none has a checkpoint.
        self.assertEqual(self.match(tokens)[0], 0)
        # Shares only the first block: L = 0 until a checkpoint at 4 exists.
        other = tokens[:4] + [99] * 8
        self.assertEqual(self.match(other, [10])[0], 0)
        self.assertEqual(self.store_ckpt(other, 4), b"OK")
        reply = self.match(other, [10])
        self.assertEqual(reply[0], 4)
        self.check_answer(other, reply)
        # A candidate at 10 whose tokens differ inside the partial block finds nothing.
        edited = tokens[:9] + [77, 11, 12]
        self.assertEqual(self.match(edited, [10])[0], 4)

    def test_multiturn_fanout_and_branch_shapes(self):
        system = list(range(100, 137))  # 37 tokens: 9 blocks and a tail of 1
        self.store_blocks(system, 0, 9)
        self.store_ckpt(system, 37)
        ends = [37]
        convo = list(system)
        for turn in range(3):  # multiturn: each turn extends the last
            convo += [200 + turn * 10 + i for i in range(7)]
            reply = self.match(convo, ends)
            self.assertEqual(reply[0], ends[-1])
            self.check_answer(convo, reply)
            have = len(chain(convo[:ends[-1]]))
            self.store_blocks(convo, have, len(convo) // BS)
            self.store_ckpt(convo, len(convo))
            ends.append(len(convo))
        for q in range(4):  # fanout: different questions after the shared system prompt
            prompt = system + [500 + q * 3 + i for i in range(5)]
            reply = self.match(prompt, [37, len(prompt)])
            self.assertEqual(reply[0], 37)
            self.check_answer(prompt, reply)
        # branch: an edit at position 45 must stop the match at the checkpoint before it (44).
        edited = list(convo)
        edited[45] = 9999
        reply = self.match(edited, ends)
        self.assertEqual(reply[0], 44)
        self.assertLessEqual(reply[0], 45)
        self.check_answer(edited, reply)

    def test_speculative_window_store_drop_rollback(self):
        tokens = list(range(1, 30))
        self.store_blocks(tokens, 0, 5)  # [0, 20)
        anchor = chain(tokens)[4]
        positions = list(range(21, 24))  # 21, 22, 23: all anchored on block 5
        blobs = [b"".join(self.state(tokens, p, layer) for p in positions) for layer in (0, 1)]
        k, v = kv_rows(tokens, 20, 23)
        self.assertEqual(self.cmd("SSM.PREFIX.CKPT.MSTORE", self.ns, anchor, 21, 3,
                                  b"".join(pos_hash(tokens, p) for p in positions),
                                  0, blobs[0], 1, blobs[1], "TAIL", 0, pack(k + v)), 3)
        for p in positions:
            reply = self.match(tokens, [p])
            self.assertEqual(reply[0], p)
            self.check_answer(tokens, reply)
        # Verification accepted 22: drop the rejected 23, roll back by fetching 22.
        self.assertEqual(self.cmd("SSM.PREFIX.CKPT.DROP", self.ns, 1, pos_hash(tokens, 23)), 1)
        self.assertEqual(self.cmd("SSM.PREFIX.CKPT.FETCH", self.ns, pos_hash(tokens, 22)),
                         [self.state(tokens, 22, 0), self.state(tokens, 22, 1)])
        self.assertIsNone(self.cmd("SSM.PREFIX.CKPT.FETCH", self.ns, pos_hash(tokens, 23)))
        self.assertEqual(self.match(tokens, [21, 22, 23])[0], 22)
        with self.assertRaisesRegex(redis.ResponseError, "crosses a block boundary"):
            self.cmd("SSM.PREFIX.CKPT.MSTORE", self.ns, anchor, 23, 2, b"\1" * 32, 0, b"ab",
                     1, b"ab", "TAIL", 0, pack([0.0] * 4 * KVDIM))
        with self.assertRaisesRegex(redis.ResponseError, "do not split into 2 equal states"):
            self.cmd("SSM.PREFIX.CKPT.MSTORE", self.ns, anchor, 21, 2, b"\1" * 32, 0, b"abc",
                     1, b"ab", "TAIL", 0, pack([0.0] * 4 * KVDIM))

    def test_drop_cascades_and_leases_pin(self):
        tokens = list(range(1, 30))
        self.store_blocks(tokens, 0, 6)
        for length in (8, 13, 24):
            self.store_ckpt(tokens, length)
        info = self.cmd("KV.PREFIX.NSINFO", self.ns).decode()
        self.assertIn("blocks:6", info)
        self.assertIn("checkpoints:3", info)
        reply = self.match(tokens, [13])
        self.assertEqual(reply[0], 24)  # the block-boundary checkpoint at 24 beats 13
        lease = reply[1]
        # Dropping block 3 takes blocks 3..6 and the checkpoints at 13 and 24 along.
        self.assertEqual(self.cmd("KV.PREFIX.BDROP", self.ns, 1, chain(tokens)[2]), 1)
        info = self.cmd("KV.PREFIX.NSINFO", self.ns).decode()
        self.assertIn("blocks:2", info)
        self.assertIn("checkpoints:1", info)
        self.assertEqual(self.match(tokens, [13], "NOLEASE")[0:2], [8, 0])
        # ... but the lease taken before still fetches the whole answer.
        got = unpack(self.cmd("KV.PREFIX.LFETCH", self.ns, lease, "ATTN", 0, "RANGE", 20, 24))
        k, v = kv_rows(tokens, 20, 24)
        self.assertEqual(got, k + v)
        self.assertEqual(self.cmd("KV.PREFIX.RELEASE", self.ns, lease), 1)
        self.assertEqual(self.cmd("KV.PREFIX.RELEASE", self.ns, lease), 0)
        with self.assertRaisesRegex(redis.ResponseError, "unknown or expired prefix lease"):
            self.cmd("KV.PREFIX.LFETCH", self.ns, lease, "STATE")
        # Leases expire.
        lease = self.match(tokens, [8], "LEASE", 1)[1]
        time.sleep(0.05)
        with self.assertRaisesRegex(redis.ResponseError, "unknown or expired prefix lease"):
            self.cmd("KV.PREFIX.LFETCH", self.ns, lease, "STATE")
        with self.assertRaisesRegex(redis.ResponseError, "RANGE"):
            lease = self.match(tokens, [8])[1]
            self.cmd("KV.PREFIX.LFETCH", self.ns, lease, "ATTN", 0, "RANGE", 0, 9)

    def test_lease_settings_and_resp3_map(self):
        tokens = list(range(1, 13))
        self.assertEqual(self.store_blocks(tokens, 0, 3), 3)
        self.assertEqual(self.store_ckpt(tokens, 12), b"OK")
        # prefix-max-leases: at the limit MATCH still leases, one past it answers -BUSY; NOLEASE
        # and a release make room again.
        self.assertEqual(self.cmd("CONFIG", "GET", "prefix-max-leases"),
                         [b"prefix-max-leases", b"65536"])
        self.assertEqual(self.cmd("CONFIG", "SET", "prefix-max-leases", 2), b"OK")
        first = self.match(tokens)[1]
        self.assertGreater(self.match(tokens)[1], 0)
        with self.assertRaisesRegex(redis.ResponseError,
                                    "BUSY too many prefix leases, release some or retry$"):
            self.match(tokens)
        self.assertEqual(self.match(tokens, (), "NOLEASE")[0:2], [12, 0])
        self.assertEqual(self.cmd("KV.PREFIX.RELEASE", self.ns, first), 1)
        self.assertGreater(self.match(tokens)[1], 0)
        for bad in (0, -1, 16777217):
            with self.assertRaises(redis.ResponseError):
                self.cmd("CONFIG", "SET", "prefix-max-leases", bad)
        self.assertEqual(self.cmd("CONFIG", "SET", "prefix-max-leases", 16777216), b"OK")
        # prefix-lease-ms: the lease time of a MATCH that names no LEASE.
        self.assertEqual(self.cmd("CONFIG", "GET", "prefix-lease-ms"),
                         [b"prefix-lease-ms", b"30000"])
        for bad in (0, 600001):
            with self.assertRaises(redis.ResponseError):
                self.cmd("CONFIG", "SET", "prefix-lease-ms", bad)
        self.assertEqual(self.cmd("CONFIG", "SET", "prefix-lease-ms", 600000), b"OK")
        self.assertEqual(self.cmd("CONFIG", "SET", "prefix-lease-ms", 1), b"OK")
        lease = self.match(tokens)[1]
        time.sleep(0.05)
        with self.assertRaisesRegex(redis.ResponseError, "unknown or expired prefix lease"):
            self.cmd("KV.PREFIX.LFETCH", self.ns, lease, "STATE")
        lease = self.match(tokens, (), "LEASE", 60000)[1]  # LEASE still wins over the setting
        time.sleep(0.05)
        self.assertEqual(len(self.cmd("KV.PREFIX.LFETCH", self.ns, lease, "STATE")), 2)
        # RESP3: the same six values as a map naming them, in the same order, byte for byte.
        r2 = self.match(tokens, (), "NOLEASE")
        hs = chain(tokens)
        names = [b"length", b"lease", b"matched_blocks", b"checkpoint_pos", b"kv_bytes",
                 b"state_bytes"]
        expected = b"%6\r\n"
        for name, value in zip(names, r2):
            expected += b"$%d\r\n%s\r\n" % (len(name), name)
            if isinstance(value, bytes):
                expected += b"$%d\r\n%s\r\n" % (len(value), value)
            else:
                expected += b":%d\r\n" % value
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            def send(*args):
                out = b"*%d\r\n" % len(args)
                for a in args:
                    a = a if isinstance(a, bytes) else str(a).encode()
                    out += b"$%d\r\n%s\r\n" % (len(a), a)
                s.sendall(out)
            send("HELLO", 3)
            send("PING")
            got = b""
            while not got.endswith(b"+PONG\r\n"):
                got += s.recv(65536)
            send("KV.PREFIX.MATCH", self.ns, len(hs), b"".join(hs), "NOLEASE")
            got = b""
            while len(got) < len(expected):
                chunk = s.recv(65536)
                self.assertTrue(chunk, "the server closed the connection")
                got += chunk
        self.assertEqual(got, expected)

    def test_namespace_budget_evicts_leaves_and_keeps_the_invariant(self):
        ns = "{budget}"
        page = 2 * BS * KVDIM * 4  # one block: 64 bytes
        self.cmd("KV.PREFIX.NAMESPACE", ns, "BLOCK", BS, "ATTN", 1, "KVDIM", KVDIM, "RECURRENT",
                 2, "VQUANT", "fp32", "MAXMEMORY", 40 * page)
        self.ns = ns
        branches = [[b] * 4 + [1000 * b + i for i in range(20)] for b in range(1, 9)]
        for tokens in branches:
            self.store_blocks(tokens, 0, 6)
            self.store_ckpt(tokens, 24)
            self.store_ckpt(tokens, 22)
        info = dict(line.split(":", 1) for line in
                    self.cmd("KV.PREFIX.NSINFO", ns).decode().split("\r\n") if line)
        self.assertLessEqual(int(info["kv_bytes"]) + int(info["state_bytes"]), 40 * page)
        self.assertGreater(int(info["evicted_blocks"]) + int(info["evicted_checkpoints"]), 0)
        # Whatever survived, every answer is complete and exact; the newest branch survived.
        answered = 0
        for tokens in branches:
            reply = self.match(tokens, [22, 24])
            if reply[0]:
                answered += 1
                self.check_answer(tokens, reply)
        self.assertGreater(answered, 0)
        self.assertEqual(self.match(branches[-1], [22, 24])[0], 24)

    def test_restart_keeps_the_index(self):
        tokens = list(range(1, 40))
        self.store_blocks(tokens, 0, 8)
        self.store_ckpt(tokens, 30)
        self.store_ckpt(tokens, 16)
        self.cmd("KV.PREFIX.BDROP", self.ns, 1, chain(tokens)[6])  # takes 7, 8 and the one at 30
        self.restart()  # the log replays
        self.assertEqual(self.cmd("TYPE", self.ns), b"prefix-index")
        reply = self.match(tokens, [30, 16])
        self.assertEqual(reply[0], 16)
        self.check_answer(tokens, reply)
        self.store_blocks(tokens, 6, 8)
        self.store_ckpt(tokens, 30)
        self.assertTrue(self.cmd("SAVE"))
        self.restart()  # the snapshot loads
        reply = self.match(tokens, [30, 16])
        self.assertEqual(reply[0], 30)
        self.check_answer(tokens, reply)
        info = self.cmd("KV.PREFIX.NSINFO", self.ns).decode()
        self.assertIn("blocks:8", info)
        self.assertIn("checkpoints:2", info)

    def test_namespaces_live_in_their_database(self):
        db0 = redis.Redis(port=self.port, socket_timeout=30)
        self.r = redis.Redis(port=self.port, db=3, socket_timeout=30)
        self.ns = "{db3}"
        self.assertEqual(self.cmd("KV.PREFIX.NAMESPACE", self.ns, "BLOCK", BS, "ATTN", 1, "KVDIM",
                                  KVDIM, "RECURRENT", 2, "VQUANT", "fp32"), b"OK")
        tokens = list(range(100, 120))
        self.store_blocks(tokens, 0, 4)
        self.store_ckpt(tokens, 14)
        self.assertEqual(db0.exists(self.ns), 0)
        self.assertEqual(db0.exists("{demo}"), 1)
        self.assertEqual(self.cmd("EXISTS", "{demo}"), 0)
        for step in ("log", "snapshot"):
            if step == "snapshot":
                self.assertTrue(self.cmd("SAVE"))
            self.restart()
            db0.close()
            db0 = self.r
            self.r = redis.Redis(port=self.port, db=3, socket_timeout=30)
            self.assertEqual(self.cmd("TYPE", self.ns), b"prefix-index", step)
            self.assertEqual(db0.exists(self.ns), 0, step)
            reply = self.match(tokens, [14])
            self.assertEqual(reply[0], 14, step)
            self.check_answer(tokens, reply)
        self.assertTrue(self.cmd("FLUSHDB"))
        self.assertEqual(self.cmd("EXISTS", self.ns), 0)
        self.assertEqual(db0.type("{demo}"), b"prefix-index")
        db0.close()

    def test_used_memory_counts_the_index_and_maxmemory_evicts_whole_namespaces(self):
        def used():
            return self.r.info("memory")["used_memory"]
        before = used()
        tokens = list(range(1, 4 * 2048 + 1))
        self.store_blocks(tokens, 0, 2048)  # 2048 blocks x 64 bytes of K/V
        grown = used() - before
        self.assertGreater(grown, 2048 * 64)
        self.assertLess(grown, 2048 * 2000)
        with self.assertRaisesRegex(redis.ResponseError, "16 zero bytes"):
            self.cmd("KV.PREFIX.BSTORE", self.ns, ROOT, 1, ROOT, 0, pack([0.0] * 16))
        self.assertEqual(self.cmd("DEL", self.ns), 1)
        self.assertLess(used() - before, grown // 4)
        # Under maxmemory, whole namespaces are evicted (logged deletes), never parts of one.
        self.cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        # Room for about four of the twelve namespaces (400 blocks each, at the cost per block
        # measured above).
        self.cmd("CONFIG", "SET", "maxmemory", used() + 4 * 400 * grown // 2048)
        names = ["{ev%d}" % i for i in range(12)]
        for name in names:
            self.ns = name
            self.cmd("KV.PREFIX.NAMESPACE", name, "BLOCK", BS, "ATTN", 1, "KVDIM", KVDIM,
                     "RECURRENT", 2, "VQUANT", "fp32")
            self.store_blocks(tokens[:4 * 400], 0, 400)
            self.store_ckpt(tokens, 4 * 400)
        self.cmd("CONFIG", "SET", "maxmemory", 0)
        alive = [n for n in names if self.cmd("EXISTS", n)]
        self.assertLess(len(alive), len(names))
        self.assertIn(names[-1], alive)
        for name in alive:  # each survivor is whole: its checkpoint still answers
            self.ns = name
            self.assertEqual(self.match(tokens[:4 * 401], [4 * 400])[0], 4 * 400)

    def test_attention_only_and_recurrent_only_namespaces(self):
        tokens = list(range(1, 14))
        self.ns = "{attn-only}"
        self.cmd("KV.PREFIX.NAMESPACE", self.ns, "BLOCK", BS, "ATTN", 1, "KVDIM", KVDIM,
                 "RECURRENT", 0, "VQUANT", "fp32")
        self.store_blocks(tokens, 0, 3)
        reply = self.match(tokens)  # every block boundary is complete: no checkpoint needed
        self.assertEqual(reply[0], 12)
        got = unpack(self.cmd("KV.PREFIX.LFETCH", self.ns, reply[1], "ATTN", 0, "RELEASE"))
        self.assertEqual(got, sum(kv_rows(tokens, 0, 12), []))
        with self.assertRaisesRegex(redis.ResponseError, "no such layers"):
            self.cmd("SSM.PREFIX.CKPT.FETCH", self.ns, ROOT, "LAYERS", 0)
        self.ns = "{rec-only}"
        self.cmd("KV.PREFIX.NAMESPACE", self.ns, "BLOCK", BS, "ATTN", 0, "KVDIM", KVDIM,
                 "RECURRENT", 2)
        hs = chain(tokens)
        self.assertEqual(self.cmd("KV.PREFIX.BSTORE", self.ns, ROOT, 2, hs[0] + hs[1]), 2)
        with self.assertRaisesRegex(redis.ResponseError, "no such layers"):
            self.cmd("KV.PREFIX.BFETCH", self.ns, 1, hs[0], 0)
        self.assertEqual(self.cmd("SSM.PREFIX.CKPT.STORE", self.ns, hs[1], 8, hs[1], 0, b"a", 1,
                                  b"b"), b"OK")
        reply = self.match(tokens)
        self.assertEqual(reply[0], 8)
        with self.assertRaisesRegex(redis.ResponseError, "no such layers"):
            self.cmd("KV.PREFIX.LFETCH", self.ns, reply[1], "ATTN", 0)
        self.assertEqual(self.cmd("KV.PREFIX.LFETCH", self.ns, reply[1], "STATE", "RELEASE"),
                         [b"a", b"b"])

if __name__ == "__main__":
    unittest.main(verbosity=2)
