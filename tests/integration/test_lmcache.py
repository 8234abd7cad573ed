#!/usr/bin/python3
"""LMCache's two Python-side remote connectors replayed against prefixd (issue 11, Acceptance).

(a) redis:// — redis-py asyncio (Debian's python3-redis), RESP2, a connection pool: each pooled
    connection sends AUTH, CLIENT SETNAME, CLIENT SETINFO (errors ignored) and SELECT; chunks are
    stored as `SET <key>kv_bytes <chunk>` then `SET <key>metadata <28-byte struct>`, looked up
    with `EXISTS <key>metadata` chunk by chunk until the first miss, loaded with GET metadata then
    GET kv_bytes, and `DEL <key>metadata` when the data is gone. Batches run concurrently.
(b) valkey:// — valkey-glide's sequence over RESP3 (`HELLO 3`): `{key}:metadata`/`{key}:kv_bytes`,
    EXISTS, MGET [meta, kv], a non-atomic batch of two SETs with `EX ttl`, DEL, and `INFO memory`
    parsed for used_memory and maxmemory. Spoken with a small RESP3 reader, since Debian's
    redis-py 4.3 has no RESP3.
Keys are LMCache-shaped (`<model>@<world_size>@<worker_id>@<chunk_hash_hex>@<dtype>`), chunks 1-4
MiB, and a hybrid model's recurrent state pages (state-blob format v1, Gated DeltaNet shapes) are
stored beside the KV chunks of the same chunk hash, as LMCache stores each state page under its
own object-group id. Run with Debian's interpreter: /usr/bin/python3 tests/integration/test_lmcache.py
"""

import asyncio
import os
import random
import socket
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_python_client import ServerProcess  # noqa: E402

try:
    import redis
    import redis.asyncio as aioredis
except ImportError:  # pragma: no cover - depends on the machine
    print("python3-redis is not installed for this interpreter; run with /usr/bin/python3",
          file=sys.stderr)
    sys.exit(1)

PASSWORD = "lmcache-secret"
MODEL = "Qwen/Qwen3.5-9B"
WORLD_SIZE, WORKER = 1, 0
DB = 3
MIB = 1 << 20


def chunk_key(chunk_hash, group=None):
    """LMCache's CacheEngineKey text; a state page carries its object-group id after the dtype."""
    key = "%s@%d@%d@%016x@bfloat16" % (MODEL, WORLD_SIZE, WORKER, chunk_hash)
    return key if group is None else key + "@g%d" % group


def metadata(length, fmt=1):
    """LMCache's RemoteMetadata: length, a 4-dim shape, dtype, format as seven int32 (28 bytes)."""
    return struct.pack("<7i", length, 2, 16, 256, 1024, 5, fmt)


def state_page(rng, conv_dim=96, kernel=4, heads=4, head_v=32, head_k=32):
    """One Gated DeltaNet layer's state in the reference state-blob format (version 1): conv_state
    [1, K-1, conv_dim] and the recurrent state [1, Hv, Dv, Dk], both fp32."""
    out = struct.pack("<II", 1, 2)
    for shape in ([1, kernel - 1, conv_dim], [1, heads, head_v, head_k]):
        count = 1
        for d in shape:
            count *= d
        out += struct.pack("<I", len(shape)) + struct.pack("<%dI" % len(shape), *shape)
        out += struct.pack("<I", 0) + rng.getrandbits(32 * count).to_bytes(4 * count, "little")
    return out


def make_chunks(seed, count):
    rng = random.Random(seed)
    chunks = []
    for i in range(count):
        size = rng.choice([1 * MIB, 2 * MIB, 3 * MIB, 4 * MIB])
        chunks.append((rng.getrandbits(64), rng.getrandbits(8 * size).to_bytes(size, "little"),
                       state_page(rng)))
    return chunks


class LMCacheTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = os.environ.get("PREFIXD_SERVER")
        if not binary:
            raise RuntimeError("set PREFIXD_SERVER to the prefixd-server binary")
        cls.server = ServerProcess(binary, ["--requirepass", PASSWORD, "--appendonly", "yes"])
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()

    def setUp(self):
        admin = redis.Redis(host="127.0.0.1", port=self.server.port, password=PASSWORD)
        admin.flushall()
        admin.close()

    # ---- (a) redis:// with redis-py asyncio, RESP2, pooled -----------------------------------

    def test_redis_connector_sequence_over_a_pool(self):
        chunks = make_chunks(11, 12)
        asyncio.run(self.redis_connector(chunks))

    async def redis_connector(self, chunks):
        # Tasks wait for a free connection, as LMCache's pool of up to 150 does.
        pool = aioredis.BlockingConnectionPool(host="127.0.0.1", port=self.server.port,
                                               password=PASSWORD, db=DB,
                                               client_name="lmcache_redis_connector",
                                               max_connections=8, timeout=30)
        client = aioredis.Redis(connection_pool=pool)
        try:
            # What LMCache sends once per connection beyond redis-py's own handshake.
            for _ in range(8):
                try:
                    await client.execute_command("CLIENT", "SETINFO", "LIB-NAME", "redis-py")
                    await client.execute_command("CLIENT", "SETINFO", "LIB-VER", "4.3.4")
                except redis.ResponseError:
                    pass
            names = await client.execute_command("CLIENT", "LIST")
            self.assertIn(b"name=lmcache_redis_connector", names)
            self.assertIn(b"db=%d" % DB, names)

            async def put(chunk_hash, data, page):
                key = chunk_key(chunk_hash)
                self.assertTrue(await client.set(key + "kv_bytes", data))
                self.assertTrue(await client.set(key + "metadata", metadata(len(data))))
                # The hybrid model's state page at the same chunk hash, its own object group.
                self.assertTrue(await client.set(chunk_key(chunk_hash, 1) + "kv_bytes", page))
                self.assertTrue(await client.set(chunk_key(chunk_hash, 1) + "metadata",
                                                 metadata(len(page), fmt=2)))

            await asyncio.gather(*(put(h, d, p) for h, d, p in chunks))

            # Lookup: EXISTS chunk by chunk until the first miss. Chunk 7 goes missing.
            missing = chunks[7][0]
            self.assertEqual(await client.delete(chunk_key(missing) + "metadata"), 1)

            async def prefix_hits():
                hits = 0
                for chunk_hash, _, _ in chunks:
                    if await client.exists(chunk_key(chunk_hash) + "metadata") != 1:
                        break
                    hits += 1
                return hits

            self.assertEqual(await asyncio.gather(*(prefix_hits() for _ in range(4))), [7] * 4)

            # Load: GET metadata then GET kv_bytes, concurrently, bit-exact.
            async def load(chunk_hash, data, page):
                for group, want in ((None, data), (1, page)):
                    key = chunk_key(chunk_hash, group)
                    meta = await client.get(key + "metadata")
                    self.assertEqual(len(meta), 28)
                    self.assertEqual(struct.unpack("<7i", meta)[0], len(want))
                    got = await client.get(key + "kv_bytes")
                    self.assertTrue(got == want, "chunk %x group %s differs" % (chunk_hash, group))

            await asyncio.gather(*(load(h, d, p) for h, d, p in chunks[:7]))

            # The data of chunk 3 is gone (evicted) while its metadata remains: LMCache deletes the
            # metadata so the next lookup stops there.
            gone = chunk_key(chunks[3][0])
            self.assertEqual(await client.delete(gone + "kv_bytes"), 1)
            self.assertIsNotNone(await client.get(gone + "metadata"))
            self.assertIsNone(await client.get(gone + "kv_bytes"))
            self.assertEqual(await client.delete(gone + "metadata"), 1)
            self.assertEqual(await prefix_hits(), 3)
            # Everything lives in the selected database only.
            self.assertEqual(await client.dbsize(), 4 * len(chunks) - 3)
        finally:
            await client.close()
            await pool.disconnect()
        other = redis.Redis(host="127.0.0.1", port=self.server.port, password=PASSWORD, db=0)
        self.assertEqual(other.dbsize(), 0)
        other.close()

    def test_wrong_password_is_refused(self):
        bad = redis.Redis(host="127.0.0.1", port=self.server.port, password="nope")
        with self.assertRaisesRegex(redis.ResponseError, "^WRONGPASS invalid username-password"):
            bad.ping()
        bad.close()

    # ---- (b) valkey:// over RESP3 -------------------------------------------------------------

    def test_valkey_connector_sequence_over_resp3(self):
        conn = Resp3(self.server.port)
        try:
            hello = conn.call("HELLO", "3", "AUTH", "default", PASSWORD)
            self.assertIsInstance(hello, dict)
            self.assertEqual(hello[b"proto"], 3)
            self.assertEqual(conn.call("SELECT", str(DB)), "OK")
            info = conn.call("INFO", "memory")
            self.assertIsInstance(info, bytes)  # a verbatim string over RESP3
            fields = dict(line.split(b":", 1) for line in info.split(b"\r\n") if b":" in line)
            used, maxmemory = int(fields[b"used_memory"]), int(fields[b"maxmemory"])
            self.assertGreater(used, 0)
            self.assertEqual(maxmemory, 0)

            chunks = make_chunks(12, 6)
            ttl = 600
            # Store: a non-atomic batch of two SETs per chunk, pipelined, with EX ttl.
            batch = []
            for chunk_hash, data, page in chunks:
                key = "{%s}" % chunk_key(chunk_hash)
                batch += [("SET", key + ":kv_bytes", data, "EX", str(ttl)),
                          ("SET", key + ":metadata", metadata(len(data)), "EX", str(ttl))]
                page_key = "{%s}" % chunk_key(chunk_hash, 1)
                batch += [("SET", page_key + ":kv_bytes", page, "EX", str(ttl)),
                          ("SET", page_key + ":metadata", metadata(len(page), 2), "EX", str(ttl))]
            self.assertEqual(conn.pipeline(batch), ["OK"] * len(batch))
            key0 = "{%s}" % chunk_key(chunks[0][0])
            self.assertTrue(0 < conn.call("TTL", key0 + ":kv_bytes") <= ttl)
            # Lookup and load: EXISTS, then MGET [meta, kv].
            for chunk_hash, data, page in chunks:
                for group, want, fmt in ((None, data, 1), (1, page, 2)):
                    key = "{%s}" % chunk_key(chunk_hash, group)
                    self.assertEqual(conn.call("EXISTS", key + ":metadata"), 1)
                    meta, kv = conn.call("MGET", key + ":metadata", key + ":kv_bytes")
                    self.assertEqual(meta, metadata(len(want), fmt))
                    self.assertTrue(kv == want)
            # Both halves of a pair share a hash slot ({key} is the hash tag), as a cluster needs.
            slot_meta = conn.call("CLUSTER", "KEYSLOT", key0 + ":metadata")
            if not isinstance(slot_meta, Resp3.Error):
                self.assertEqual(slot_meta, conn.call("CLUSTER", "KEYSLOT", key0 + ":kv_bytes"))
            # A missing half reads as nil in MGET; DEL removes the pair.
            self.assertEqual(conn.call("DEL", key0 + ":kv_bytes"), 1)
            self.assertEqual(conn.call("MGET", key0 + ":metadata", key0 + ":kv_bytes"),
                             [metadata(len(chunks[0][1])), None])
            self.assertEqual(conn.call("DEL", key0 + ":metadata", key0 + ":kv_bytes"), 1)
            info = conn.call("INFO", "memory")
            fields = dict(line.split(b":", 1) for line in info.split(b"\r\n") if b":" in line)
            self.assertGreater(int(fields[b"used_memory"]), sum(len(d) for _, d, _ in chunks[1:]))
        finally:
            conn.close()


class Resp3:
    """A minimal RESP3 client: sends commands, reads every reply type prefixd sends."""

    class Error(str):
        pass

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def close(self):
        self.sock.close()

    @staticmethod
    def encode(args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        return out

    def call(self, *args):
        self.sock.sendall(self.encode(args))
        return self.read()

    def pipeline(self, commands):
        self.sock.sendall(b"".join(self.encode(c) for c in commands))
        return [self.read() for _ in commands]

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def exact(self, n):
        while len(self.buf) < n + 2:
            self.fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return Resp3.Error(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"_":
            return None
        if kind == b"$":
            return None if rest == b"-1" else self.exact(int(rest))
        if kind == b"=":
            return self.exact(int(rest))[4:]  # "txt:" then the text
        if kind in (b"*", b"~"):
            return None if rest == b"-1" else [self.read() for _ in range(int(rest))]
        if kind == b"%":
            return {self.read(): self.read() for _ in range(int(rest))}
        if kind == b",":
            return float(rest)
        if kind == b"#":
            return rest == b"t"
        raise AssertionError("unexpected reply %r" % line)


if __name__ == "__main__":
    unittest.main(verbosity=2)
