#!/usr/bin/python3
"""The calls Pion's Python prompt cache makes, through Debian's python3-redis, against prefixd.

PionPromptCache stores a hybrid model's prefix as: KV.PREFIX.REGISTER <ns> <kv_dim> <vquant>;
per softmax-attention layer (numbered by rank among them) V.STOREBATCH <ns>_pk|<ns>_pv <rank> 0
<N> <fp32 [N, kv_dim]>; per linear layer SSM.PREFIX.STORE <ns> <slot> <blob>. To reuse it:
KV.PREFIX.LOOKUP, then V.FETCH ... RANGE 0 N (fp32) per rank and side, and SSM.PREFIX.FETCH.
This checks that flow end to end, the value receipt (PION.STATS, INFO pion) and a drop, with the
server named by $PREFIXD_SERVER. Run with /usr/bin/python3.
"""

import array
import os
import random
import shutil
import struct
import sys
import tempfile
import unittest

try:
    import redis
except ImportError:  # pragma: no cover - depends on the machine
    print("python3-redis is not installed for this interpreter; run with /usr/bin/python3",
          file=sys.stderr)
    sys.exit(1)

from prefixd_server import start_server


def fp16_round(values):
    """Each value rounded to fp16 (round half to even, as struct's 'e' does) and widened back."""
    return [struct.unpack("<e", struct.pack("<e", v))[0] for v in values]


class PionClientFlowTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="prefixd-pion-")
        self.proc, self.port = start_server(self.root)
        self.r = redis.Redis(port=self.port, socket_timeout=30)

    def tearDown(self):
        self.r.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def test_store_lookup_fetch_like_pion_prompt_cache(self):
        rng = random.Random(7)
        ns = "%032x" % rng.getrandbits(128)  # make_namespace: 32 hex characters
        kv_dim, n, softmax_ranks, linear_slots = 512, 200, 3, [0, 1, 2, 4, 5, 6]
        self.assertEqual(self.r.execute_command("KV.PREFIX.LOOKUP", ns), b"MISS")
        self.assertEqual(self.r.execute_command("KV.PREFIX.REGISTER", ns, kv_dim, "fp16"), b"OK")
        stored = {}
        for rank in range(softmax_ranks):
            for side in ("_pk", "_pv"):
                values = [rng.gauss(0.0, 1.0) for _ in range(n * kv_dim)]
                blob = array.array("f", values).tobytes()
                self.assertEqual(
                    self.r.execute_command("V.STOREBATCH", ns + side, rank, 0, n, blob), b"OK")
                stored[(side, rank)] = array.array("f", values).tolist()
        for slot in linear_slots:
            self.r.execute_command("SSM.PREFIX.STORE", ns, slot, b"state-%d" % slot)

        # Another process reuses the prefix.
        reader = redis.Redis(port=self.port, socket_timeout=30)
        self.assertEqual(reader.execute_command("KV.PREFIX.LOOKUP", ns, "TOKENS", n), b"HIT")
        for (side, rank), values in stored.items():
            raw = reader.execute_command("V.FETCH", ns + side, rank, "RANGE", 0, n)
            self.assertEqual(len(raw), n * kv_dim * 4)
            self.assertEqual(array.array("f", raw).tolist(), fp16_round(values))
            native = reader.execute_command("V.FETCH", ns + side, rank, "RANGE", 0, n, "FMT",
                                            "NATIVE")
            self.assertEqual(len(native), n * kv_dim * 2)  # fp16: the client decides by length
        for slot in linear_slots:
            self.assertEqual(reader.execute_command("SSM.PREFIX.FETCH", ns, slot),
                             b"state-%d" % slot)
        self.assertIsNone(reader.execute_command("V.FETCH", ns + "_pk", softmax_ranks, "RANGE",
                                                 0, n))
        with self.assertRaises(redis.ResponseError) as e:
            reader.execute_command("V.FETCH", ns + "_pk", 0, "RANGE", 5, 5)
        self.assertEqual(str(e.exception), "invalid RANGE: end must exceed start (>=0)")

        stats = reader.execute_command("PION.STATS")
        fields = dict(zip(stats[0::2], stats[1::2]))
        self.assertEqual(fields[b"kvprefix_hits"], 1)
        self.assertEqual(fields[b"kvprefix_misses"], 1)
        self.assertEqual(fields[b"kvprefix_tokens_served"], n)
        self.assertEqual(fields[b"prefill_seconds_avoided"], b"0.111")  # 200 x 555 us, estimated
        self.assertEqual(reader.info("pion")["kvprefix_hits"], 1)
        reader.close()

        self.assertEqual(self.r.execute_command("KV.PREFIX.DROP", ns), 1)
        self.assertEqual(self.r.execute_command("KV.PREFIX.LOOKUP", ns), b"MISS")


if __name__ == "__main__":
    unittest.main()
