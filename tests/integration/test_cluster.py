"""Three prefixd nodes as a Redis Cluster, driven by stock cluster clients: redis-py's RedisCluster
(strings, SSM.PREFIX, KV.PREFIX + V-store through execute_command), an LMCache-shaped sequence
over redis-py asyncio's RedisCluster, and redis-cli -c. Every key must land on the node that
serves its slot. Run with Debian's python3; PREFIXD_SERVER names the server binary."""

import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefixd_server import start_cluster  # noqa: E402

import redis  # noqa: E402
from redis.cluster import RedisCluster  # noqa: E402
import redis.asyncio.cluster as aiocluster  # noqa: E402


class ClusterClientsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="prefixd-cluster-py-")
        cls.nodes = start_cluster(cls.root, 3)
        cls.direct = [redis.Redis(port=port, socket_timeout=30) for _, port, _ in cls.nodes]

    @classmethod
    def tearDownClass(cls):
        for conn in cls.direct:
            conn.close()
        for proc, _, _ in cls.nodes:
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(cls.root, ignore_errors=True)

    def owner(self, key):
        """The direct connection to the node that serves `key`'s slot, by its CLUSTER SLOTS."""
        slot = self.direct[0].execute_command("CLUSTER", "KEYSLOT", key)
        for start, end, (_, port, _, *_rest), *_ in self.direct[0].execute_command(
                "CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return next(c for c, (_, p, _) in zip(self.direct, self.nodes) if p == port)
        self.fail("slot %d is served by no node" % slot)

    def cluster(self):
        return RedisCluster(host="127.0.0.1", port=self.nodes[0][1], socket_timeout=30)

    def test_strings_and_state_land_on_their_slots_node(self):
        rc = self.cluster()
        rng = random.Random(5)
        blobs = {}
        for i in range(60):
            key = "str-%d" % i
            rc.set(key, "v%d" % i)
            sid = "sess-%d" % i
            blobs[sid] = rng.randbytes(1000 + i)
            self.assertEqual(rc.execute_command("SSM.PREFIX.STORE", sid, 0, blobs[sid]), b"OK")
        used = set()
        for i in range(60):
            key, sid = "str-%d" % i, "sess-%d" % i
            self.assertEqual(rc.get(key), b"v%d" % i)
            self.assertEqual(self.owner(key).get(key), b"v%d" % i)
            self.assertEqual(rc.execute_command("SSM.PREFIX.FETCH", sid, 0), blobs[sid])
            node = self.owner(sid)
            self.assertEqual(node.execute_command("SSM.PREFIX.FETCH", sid, 0), blobs[sid])
            used.add(id(node))
            others = [c for c in self.direct if c is not node]
            for other in others:
                with self.assertRaises(redis.ResponseError) as e:
                    other.execute_command("SSM.PREFIX.FETCH", sid, 0)
                self.assertTrue(str(e.exception).startswith("MOVED "), str(e.exception))
        self.assertEqual(len(used), 3, "60 sessions should spread over all three nodes")
        self.assertEqual(sum(len(c.keys("str-*")) + len(c.keys("sess-*")) for c in self.direct),
                         120)
        rc.close()

    def test_kv_prefix_halves_share_their_namespaces_node(self):
        rc = self.cluster()
        ns, dim, n = "{prompt-7}", 64, 16
        self.assertEqual(rc.execute_command("KV.PREFIX.REGISTER", ns, dim, "fp32"), b"OK")
        rows = bytes(range(256)) * (n * dim * 4 // 256)
        for side in ("_pk", "_pv"):
            self.assertEqual(rc.execute_command("V.STOREBATCH", ns + side, 0, 0, n, rows), b"OK")
        rc.execute_command("SSM.PREFIX.STORE", ns, 1, b"recurrent")
        self.assertEqual(rc.execute_command("KV.PREFIX.LOOKUP", ns, "TOKENS", n), b"HIT")
        self.assertEqual(rc.execute_command("V.FETCH", ns + "_pv", 0, "RANGE", 0, n), rows)
        self.assertEqual(self.owner(ns).execute_command("KV.PREFIX.LOOKUP", ns), b"HIT")
        # Without a hash tag the halves could land on other nodes: refused, with the fix named.
        with self.assertRaises(redis.ResponseError) as e:
            rc.execute_command("KV.PREFIX.REGISTER", "prompt-8", dim, "fp32")
        self.assertIn("'{prompt-8}'", str(e.exception))
        rc.close()

    def test_lmcache_shaped_sequence_over_asyncio_cluster(self):
        async def run():
            rc = aiocluster.RedisCluster(host="127.0.0.1", port=self.nodes[1][1])
            chunk = os.urandom(256 * 1024)
            keys = ["qwen@1@0@%064x@bfloat16" % random.Random(i).getrandbits(256)
                    for i in range(24)]
            for k in keys:
                await asyncio.gather(rc.set(k + "kv_bytes", chunk), rc.set(k + "metadata", b"m" * 28))
            hits = 0
            for k in keys:  # lookup chunk by chunk until the first miss
                if not await rc.exists(k + "metadata"):
                    break
                hits += 1
            self.assertEqual(hits, len(keys))
            for k in keys:
                self.assertEqual(await rc.get(k + "metadata"), b"m" * 28)
                self.assertEqual(await rc.get(k + "kv_bytes"), chunk)
            self.assertEqual(await rc.delete(keys[0] + "metadata"), 1)
            self.assertEqual(await rc.exists(keys[0] + "metadata"), 0)
            await rc.close()
        asyncio.run(run())

    def test_redis_cli_follows_redirects(self):
        port = str(self.nodes[0][1])
        key = "cli-key-%d" % random.randrange(1 << 30)
        out = subprocess.run(["redis-cli", "-c", "-p", port, "SET", key, "through-cli"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.stdout.strip(), "OK", out.stderr)
        out = subprocess.run(["redis-cli", "-c", "-p", port, "GET", key],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.stdout.strip(), "through-cli")
        self.assertEqual(self.owner(key).get(key), b"through-cli")


if __name__ == "__main__":
    unittest.main()
