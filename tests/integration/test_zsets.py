#!/usr/bin/python3
"""Sorted sets through Debian's python3-redis against the real server: encodings at their limits
and one past them (zset-max-listpack-entries and -value, and their zset-max-ziplist-* names), the
generic key commands (COPY, RENAME, MOVE, DUMP/RESTORE, SWAPDB, FLUSHDB, SCAN TYPE, EXPIRE, INFO
keyspace), scores that survive a restart bit for bit from the log and from a snapshot, ZSCAN over
a skiplist that changes between calls, and eviction that deletes a key whole. Replies byte for
byte against redis-server are in test_redis_parity.py (ZsetRepliesTest).

Run with Debian's interpreter: /usr/bin/python3 tests/integration/test_zsets.py
"""

import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefixd_server import ServerTestCase  # noqa: E402

import redis  # noqa: E402

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


class ZsetsTest(ServerTestCase):
    prefix = "prefixd-py-zsets-"

    def digest(self, key):
        return self.r.execute_command("DEBUG", "DIGEST-VALUE", key)[0]

    def encoding(self, key):
        return self.r.object("encoding", key)

    def test_entries_limit_at_and_past_it(self):
        r = self.r
        self.assertEqual(r.config_get("zset-max-listpack-entries"),
                         {"zset-max-listpack-entries": "128"})
        r.zadd("at", {"m%d" % i: i for i in range(128)})
        self.assertEqual(self.encoding("at"), b"listpack")  # exactly at the limit
        r.zadd("at", {"m0": 1000})  # an update adds nothing
        self.assertEqual(self.encoding("at"), b"listpack")
        r.zadd("at", {"m128": 128})  # one past it
        self.assertEqual(self.encoding("at"), b"skiplist")
        r.zrem("at", "m128", "m127")
        self.assertEqual(self.encoding("at"), b"skiplist")  # never back
        self.assertEqual(r.zcard("at"), 127)
        r.zadd("past", {"m%d" % i: i for i in range(129)})  # one command past the limit
        self.assertEqual(self.encoding("past"), b"skiplist")
        # The old name reads and writes the same setting; a pattern answers both names.
        self.assertTrue(r.config_set("zset-max-ziplist-entries", 3))
        self.assertEqual(r.config_get("zset-max-listpack-entries"),
                         {"zset-max-listpack-entries": "3"})
        self.assertEqual(r.config_get("zset-max-*-entries"),
                         {"zset-max-listpack-entries": "3", "zset-max-ziplist-entries": "3"})
        r.zadd("three", {"a": 1, "b": 2, "c": 3})
        self.assertEqual(self.encoding("three"), b"listpack")
        r.zincrby("three", 1, "d")
        self.assertEqual(self.encoding("three"), b"skiplist")
        r.config_set("zset-max-listpack-entries", 0)
        r.zadd("zero", {"a": 1})
        self.assertEqual(self.encoding("zero"), b"skiplist")
        self.assertIn("zset-max-listpack-entries",
                      self.error("CONFIG", "SET", "zset-max-listpack-entries", "-1"))
        r.config_set("zset-max-listpack-entries", 128)

    def test_value_limit_at_and_past_it(self):
        r = self.r
        self.assertEqual(r.config_get("zset-max-ziplist-value"), {"zset-max-ziplist-value": "64"})
        r.zadd("at", {"x" * 64: 1})
        self.assertEqual(self.encoding("at"), b"listpack")
        r.zadd("at", {"y" * 65: 2})  # a longer member converts the key
        self.assertEqual(self.encoding("at"), b"skiplist")
        r.zadd("first", {"y" * 65: 2})  # and creates one as a skiplist
        self.assertEqual(self.encoding("first"), b"skiplist")
        r.config_set("zset-max-listpack-value", "1kb")
        self.assertEqual(r.config_get("zset-max-listpack-value"),
                         {"zset-max-listpack-value": "1024"})
        r.zadd("kb", {"z" * 1024: 1})
        self.assertEqual(self.encoding("kb"), b"listpack")
        r.zadd("kb", {"z" * 1025: 1})
        self.assertEqual(self.encoding("kb"), b"skiplist")

    def test_wrongtype_both_ways(self):
        r = self.r
        r.set("str", "v")
        r.zadd("z", {"a": 1})
        for args in (("ZADD", "str", "1", "a"), ("ZRANGE", "str", "0", "-1"),
                     ("ZSCORE", "str", "a"), ("ZPOPMIN", "str"), ("ZSCAN", "str", "0"),
                     ("GET", "z"), ("SADD", "z", "a"), ("LPUSH", "z", "a"),
                     ("APPEND", "z", "x")):
            self.assertEqual(self.error(*args), WRONGTYPE, args)
        self.assertEqual(r.type("z"), b"zset")
        self.assertTrue(r.set("z", "now a string"))  # SET replaces any type
        self.assertEqual(r.type("z"), b"string")

    def test_generic_key_commands(self):
        r = self.r
        r.zadd("lp{t}", {"a": 1.5, "b": -2, "c": float("inf")})
        r.config_set("zset-max-listpack-entries", 0)
        r.zadd("sk{t}", {"m%d" % i: i / 7 for i in range(50)})
        r.config_set("zset-max-listpack-entries", 128)
        r.expire("lp{t}", 100)
        for key, enc in (("lp{t}", b"listpack"), ("sk{t}", b"skiplist")):
            digest = self.digest(key)
            self.assertEqual(r.copy(key, "copy" + key), 1)
            self.assertEqual(self.digest("copy" + key), digest)
            self.assertEqual(self.encoding("copy" + key), enc)
            self.assertEqual(r.object("refcount", "copy" + key), 1)
            r.delete(key)  # the copy is its own
            self.assertEqual(self.digest("copy" + key), digest)
        self.assertGreater(r.ttl("copylp{t}"), 90)
        self.assertEqual(r.zrange("copylp{t}", 0, -1, withscores=True),
                         [(b"b", -2.0), (b"a", 1.5), (b"c", float("inf"))])
        r.rename("copylp{t}", "renamed{t}")
        self.assertEqual(r.zscore("renamed{t}", "a"), 1.5)
        self.assertEqual(r.move("renamed{t}", 1), 1)
        self.assertEqual(r.exists("renamed{t}"), 0)
        self.assertEqual(sorted(r.scan_iter(_type="zset")), [b"copysk{t}"])
        dump = r.dump("copysk{t}")
        r.restore("restored{t}", 0, dump)
        self.assertEqual(self.digest("restored{t}"), self.digest("copysk{t}"))
        self.assertEqual(self.encoding("restored{t}"), b"skiplist")
        self.assertGreater(r.memory_usage("restored{t}"), 50 * 8)
        self.assertEqual(r.info("keyspace")["db0"]["keys"], 2)
        self.assertEqual(r.info("keyspace")["db1"]["keys"], 1)
        r.swapdb(0, 1)
        self.assertEqual(r.zscore("renamed{t}", "a"), 1.5)
        self.assertEqual(r.exists("restored{t}"), 0)
        r.flushdb()
        self.assertEqual(r.dbsize(), 0)
        r.execute_command("SELECT", 1)
        self.assertEqual(r.zcard("restored{t}"), 50)
        r.execute_command("SELECT", 0)
        r.zadd("gone", {"a": 1})
        r.pexpire("gone", 1)
        r.execute_command("DEBUG", "SLEEP", "0.01")
        self.assertEqual(r.zcard("gone"), 0)
        self.assertEqual(r.exists("gone"), 0)

    def test_restart_and_snapshot_keep_scores_bit_exact(self):
        r = self.r
        scores = {"third": 1 / 3, "tenth": 0.1, "denormal": 5e-324, "huge": 1.7976931348623157e308,
                  "neginf": float("-inf"), "inf": float("inf"), "big": 4503599627370497.0,
                  "neg": -123.456e-7}
        r.zadd("lp", scores)
        r.config_set("zset-max-listpack-entries", 0)
        r.zadd("sk", dict(scores, negzero=-0.0))
        r.config_set("zset-max-listpack-entries", 128)
        r.zincrby("sk", 0.2, "tenth")  # 0.30000000000000004
        r.zrem("lp", "neg")
        r.zpopmax("lp")  # inf
        r.expire("sk", 1000)
        r.zadd("emptied", {"x": 1})
        r.zpopmin("emptied")
        raw = {k: r.zrange(k, 0, -1, withscores=True, score_cast_func=bytes) for k in ("lp", "sk")}
        digests = {k: self.digest(k) for k in ("lp", "sk")}

        def check():
            for k in ("lp", "sk"):
                self.assertEqual(self.r.zrange(k, 0, -1, withscores=True, score_cast_func=bytes),
                                 raw[k], k)
                self.assertEqual(self.digest(k), digests[k], k)
            self.assertEqual(self.encoding("lp"), b"listpack")
            self.assertEqual(self.encoding("sk"), b"skiplist")
            got = struct.pack("<d", float(self.r.zscore("sk", "tenth")))
            self.assertEqual(got, struct.pack("<d", 0.1 + 0.2))
            self.assertEqual(self.r.zscore("sk", "denormal"), 5e-324)
            self.assertEqual(self.r.zscore("sk", "negzero"), 0.0)
            self.assertIn((b"negzero", b"-0"), raw["sk"])  # a skiplist keeps the sign
            self.assertGreater(self.r.ttl("sk"), 900)
            self.assertEqual(self.r.exists("emptied"), 0)

        check()
        self.restart()  # from the log
        check()
        self.assertTrue(self.r.save())
        self.r.zadd("after", {"x": 2.5})
        self.restart()  # from the snapshot plus the log after it
        check()
        self.assertEqual(self.r.zscore("after", "x"), 2.5)

    def test_zscan_of_a_changing_skiplist_returns_every_member_present_throughout(self):
        r = self.r
        r.config_set("zset-max-listpack-entries", 0)
        members = {"m%d" % i: i for i in range(500)}
        r.zadd("z", members)
        seen, cursor, calls = {}, 0, 0
        while True:
            cursor, page = r.zscan("z", cursor, count=20)
            calls += 1
            seen.update({m: s for m, s in page})
            if calls == 3:  # change the set mid-walk: these come and go
                r.zadd("z", {"new%d" % i: -i for i in range(100)})
                r.zrem("z", *["new%d" % i for i in range(50)])
            if cursor == 0:
                break
        self.assertGreater(calls, 10)
        for m, s in members.items():
            self.assertEqual(seen.get(m.encode()), s, m)
        cursor, page = r.zscan("z", 0, match="m1?", count=1000)
        self.assertEqual(cursor, 0)
        self.assertEqual(sorted(m for m, _ in page), sorted(b"m1%d" % i for i in range(10)))

    def test_eviction_deletes_whole_keys(self):
        r = self.r
        r.config_set("maxmemory-policy", "allkeys-lru")
        r.config_set("maxmemory", "2mb")
        for i in range(800):  # about 4 MB of sorted sets, both encodings
            r.zadd("z%d" % i, {"%s%d" % ("v" * (40 if i % 2 else 100), j): j for j in range(50)})
        left = r.dbsize()
        self.assertLess(left, 800)
        self.assertGreater(left, 0)
        for key in r.scan_iter(count=1000):
            self.assertEqual(r.zcard(key), 50)
        self.assertGreater(int(r.info("stats")["evicted_keys"]), 0)


if __name__ == "__main__":
    unittest.main()
