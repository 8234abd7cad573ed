#!/usr/bin/python3
"""Hashes through Debian's python3-redis against the real server: the commands' replies and
errors (Redis 7.0.15's; test_redis_parity.py compares them byte for byte with redis-server),
OBJECT ENCODING at hash-max-listpack-entries/-value and one past them (and their
hash-max-ziplist-* names), WRONGTYPE both ways, the generic key commands (COPY, RENAME, MOVE,
SWAPDB, DUMP/RESTORE, SCAN TYPE, EXPIRE, FLUSHDB), INFO keyspace counts, fields and values that
survive a restart byte for byte from the log and from a snapshot, the keyspace budget, and
eviction that deletes a hash whole.

Run with Debian's interpreter: /usr/bin/python3 tests/integration/test_hashes.py
"""

import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefixd_server import ServerTestCase  # noqa: E402

import redis  # noqa: E402

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


class HashesTest(ServerTestCase):
    def digest(self, key):
        return self.r.execute_command("DEBUG", "DIGEST-VALUE", key)[0]

    def test_commands(self):
        r = self.r
        self.assertEqual(r.hset("h", mapping={"a": "1", "b": "2"}), 2)
        self.assertEqual(r.execute_command("HSET", "h", "a", "3", "c", "4", "c", "5"), 1)
        self.assertEqual(r.hgetall("h"), {b"a": b"3", b"b": b"2", b"c": b"5"})
        self.assertEqual(r.hkeys("h"), [b"a", b"b", b"c"])  # insertion order, updates in place
        self.assertEqual(r.hvals("h"), [b"3", b"2", b"5"])
        self.assertEqual(r.type("h"), b"hash")
        self.assertEqual(r.object("encoding", "h"), b"listpack")
        self.assertEqual(r.hsetnx("h", "a", "9"), 0)
        self.assertEqual(r.hsetnx("h", "d", "9"), 1)
        self.assertTrue(r.execute_command("HMSET", "h", "e", "x"))  # +OK
        self.assertEqual(r.hget("h", "e"), b"x")
        self.assertIsNone(r.hget("h", "zz"))
        self.assertIsNone(r.hget("missing", "a"))
        self.assertEqual(r.hmget("h", "a", "zz", "d"), [b"3", None, b"9"])
        self.assertEqual(r.hmget("missing", "a"), [None])
        self.assertEqual(r.hlen("h"), 5)
        self.assertEqual(r.hlen("missing"), 0)
        self.assertTrue(r.hexists("h", "a"))
        self.assertFalse(r.hexists("h", "zz"))
        self.assertEqual(r.hstrlen("h", "e"), 1)
        self.assertEqual(r.hstrlen("h", "zz"), 0)
        self.assertEqual(r.hdel("h", "a", "a", "zz"), 1)
        self.assertEqual(r.hdel("missing", "a"), 0)
        self.assertEqual(r.hincrby("h", "n", 5), 5)
        self.assertEqual(r.hincrby("h", "n", -7), -2)
        self.assertEqual(r.hincrbyfloat("h", "f", "1.5"), 1.5)
        self.assertEqual(r.hincrbyfloat("h", "f", "0.1"), 1.6)
        self.assertEqual(r.hget("h", "f"), b"1.6")
        self.assertEqual(self.error("HINCRBY", "h", "e", "1"), "hash value is not an integer")
        self.assertEqual(self.error("HINCRBYFLOAT", "h", "e", "1"), "hash value is not a float")
        self.assertEqual(self.error("HINCRBY", "h", "n", "x"),
                         "value is not an integer or out of range")
        r.hset("h", "max", "9223372036854775807")
        self.assertEqual(self.error("HINCRBY", "h", "max", "1"),
                         "increment or decrement would overflow")
        self.assertEqual(r.hget("h", "max"), b"9223372036854775807")  # unchanged
        self.assertEqual(self.error("HINCRBYFLOAT", "h", "f", "inf"), "value is NaN or Infinity")
        r.hset("h", "nul", b"1\x002")
        self.assertEqual(self.error("HINCRBYFLOAT", "h", "nul", "1"), "hash value is not a float")
        self.assertEqual(self.error("HSET", "h", "a"),
                         "wrong number of arguments for 'hset' command")
        self.assertEqual(self.error("HSET", "h", "a", "1", "b"),
                         "wrong number of arguments for 'hset' command")
        self.assertEqual(self.error("HMSET", "h", "a", "1", "b"),
                         "wrong number of arguments for 'hmset' command")
        self.assertEqual(r.hdel("h", *r.hkeys("h")), 8)
        self.assertEqual(r.exists("h"), 0)  # emptied: deleted

    def test_binary_fields_and_values(self):
        r = self.r
        field, value = b"\x00f\r\n\xff", b"\x00\x01" * 100 + b"\r\n"
        r.hset("b", field, value)
        r.hset("b", b"", b"")  # an empty field and an empty value are kept
        self.assertEqual(r.hgetall("b"), {field: value, b"": b""})
        self.assertEqual(r.hstrlen("b", field), len(value))
        self.assertEqual(r.object("encoding", "b"), b"hashtable")  # value over 64 bytes

    def test_hrandfield_and_hscan(self):
        r = self.r
        fields = {("f%d" % i).encode(): ("v%d" % i).encode() for i in range(5)}
        r.hset("h", mapping=fields)
        self.assertIn(r.hrandfield("h"), fields)
        self.assertIsNone(r.hrandfield("missing"))
        picked = r.hrandfield("h", 3)
        self.assertEqual(len(set(picked)), 3)
        self.assertTrue(set(picked) <= set(fields))
        self.assertEqual(set(r.hrandfield("h", 100)), set(fields))
        repeated = r.hrandfield("h", -20)
        self.assertEqual(len(repeated), 20)
        self.assertTrue(set(repeated) <= set(fields))
        pairs = r.hrandfield("h", -7, withvalues=True)
        self.assertEqual(len(pairs), 14)
        for k, v in zip(pairs[::2], pairs[1::2]):
            self.assertEqual(fields[k], v)
        self.assertEqual(r.hrandfield("h", 0), [])
        self.assertEqual(self.error("HRANDFIELD", "h", "1", "x"), "syntax error")
        self.assertEqual(self.error("HRANDFIELD", "h", "-9223372036854775807"),
                         "value is out of range")  # past client-output-buffer-limit
        cursor, found = r.hscan("h", 0, match="f[12]")
        self.assertEqual((cursor, found), (0, {b"f1": b"v1", b"f2": b"v2"}))
        self.assertEqual(r.hscan("h", 0, count=1), (0, fields))  # the whole hash at once
        self.assertEqual(r.hscan("missing", 0), (0, {}))
        self.assertEqual(self.error("HSCAN", "h", "0", "COUNT", "0"), "syntax error")
        self.assertEqual(self.error("HSCAN", "h", "x"), "invalid cursor")
        self.assertEqual(self.error("HSCAN", "h", "0", "TYPE", "hash"), "syntax error")

    def test_encoding_at_the_limits(self):
        r = self.r
        # Redis 7.0.15's defaults, under both names.
        self.assertEqual(r.config_get("hash-max-listpack-entries"),
                         {"hash-max-listpack-entries": "512"})
        self.assertEqual(r.config_get("hash-max-ziplist-value"), {"hash-max-ziplist-value": "64"})
        self.assertEqual(r.config_get("hash-max-*"),
                         {"hash-max-listpack-entries": "512", "hash-max-ziplist-entries": "512",
                          "hash-max-listpack-value": "64", "hash-max-ziplist-value": "64"})
        r.hset("at", mapping={"f%d" % i: i for i in range(512)})
        self.assertEqual(r.object("encoding", "at"), b"listpack")
        r.hset("at", "f512", "x")
        self.assertEqual(r.object("encoding", "at"), b"hashtable")
        r.hdel("at", "f512", "f511")
        self.assertEqual(r.object("encoding", "at"), b"hashtable")  # never back
        r.hset("long", "f", "v" * 64)
        self.assertEqual(r.object("encoding", "long"), b"listpack")
        r.hset("long", "g" * 65, "v")
        self.assertEqual(r.object("encoding", "long"), b"hashtable")
        self.assertTrue(r.config_set("hash-max-ziplist-entries", 2))
        self.assertEqual(r.config_get("hash-max-listpack-entries"),
                         {"hash-max-listpack-entries": "2"})
        r.hset("two", mapping={"a": 1, "b": 2})
        self.assertEqual(r.object("encoding", "two"), b"listpack")
        r.hincrby("two", "c", 1)
        self.assertEqual(r.object("encoding", "two"), b"hashtable")
        self.assertTrue(r.config_set("hash-max-ziplist-value", 3))
        r.hset("v", "a", "123")
        self.assertEqual(r.object("encoding", "v"), b"listpack")
        r.hincrby("v", "a", 1000)  # "1123": one past the limit
        self.assertEqual(r.object("encoding", "v"), b"hashtable")
        with self.assertRaises(redis.ResponseError):
            r.config_set("hash-max-listpack-entries", -1)

    def test_wrongtype_both_ways(self):
        r = self.r
        r.set("str", "v")
        r.hset("hash", "a", "1")
        for args in (("HSET", "str", "a", "1"), ("HGET", "str", "a"), ("HGETALL", "str"),
                     ("HLEN", "str"), ("HINCRBY", "str", "a", "1"), ("HSCAN", "str", "0"),
                     ("HRANDFIELD", "str", "0"), ("GET", "hash"), ("SADD", "hash", "a"),
                     ("LPUSH", "hash", "a"), ("APPEND", "hash", "x")):
            self.assertEqual(self.error(*args), WRONGTYPE, args)
        self.assertTrue(r.set("hash", "now a string"))  # SET replaces any type
        self.assertEqual(r.type("hash"), b"string")

    def test_generic_key_commands(self):
        r = self.r
        r.hset("h{t}", mapping={"a": "1", "b": "2"})
        r.expire("h{t}", 100)
        digest = self.digest("h{t}")
        self.assertEqual(r.copy("h{t}", "h2{t}"), 1)
        self.assertEqual(self.digest("h2{t}"), digest)
        self.assertGreater(r.ttl("h2{t}"), 90)
        r.hset("h2{t}", "c", "3")
        self.assertEqual(r.hlen("h{t}"), 2)  # a copy, not a share
        r.rename("h2{t}", "h3{t}")
        self.assertEqual(r.hget("h3{t}", "c"), b"3")
        self.assertEqual(r.move("h3{t}", 1), 1)
        r.execute_command("SELECT", 1)
        self.assertEqual(r.hlen("h3{t}"), 3)
        r.execute_command("SELECT", 0)
        r.swapdb(0, 1)
        self.assertEqual(r.hlen("h3{t}"), 3)
        r.swapdb(0, 1)
        self.assertEqual(sorted(r.scan_iter(_type="hash")), [b"h{t}"])
        self.assertEqual(r.info("keyspace")["db0"]["keys"], 1)
        r.hset("big{t}", mapping={"f%d" % i: i for i in range(600)})
        r.restore("h4{t}", 0, r.dump("h{t}"))
        self.assertEqual(self.digest("h4{t}"), digest)
        r.restore("big2{t}", 0, r.dump("big{t}"))
        self.assertEqual(r.object("encoding", "big2{t}"), b"hashtable")
        self.assertEqual(r.hgetall("big2{t}"), r.hgetall("big{t}"))
        self.assertGreater(r.memory_usage("big{t}"), 600 * 8)
        r.hset("gone", "a", "1")
        r.pexpire("gone", 1)
        r.execute_command("DEBUG", "SLEEP", "0.01")
        self.assertEqual(r.hlen("gone"), 0)
        # A digest ignores field order, as Redis's.
        r.hset("o1", mapping={"a": "1", "b": "2"})
        r.hset("o2", mapping={"b": "2", "a": "1"})
        self.assertEqual(self.digest("o1"), self.digest("o2"))
        r.hset("o3", mapping={"a": "2", "b": "1"})
        self.assertNotEqual(self.digest("o1"), self.digest("o3"))
        r.flushdb()
        self.assertEqual(r.dbsize(), 0)

    def test_restart_and_snapshot_keep_fields(self):
        r = self.r
        r.hset("small", mapping={b"\x00a": b"\r\n", b"b": b"", b"n": b"10"})
        r.hincrby("small", "n", 5)
        r.hdel("small", "b")
        r.hset("big", mapping={"f%d" % i: "v" * (i % 70) for i in range(1000)})
        r.hdel("big", *["f%d" % i for i in range(0, 1000, 3)])
        r.expire("big", 1000)
        r.hset("emptied", "x", "1")
        r.hdel("emptied", "x")
        expected = {k: r.hgetall(k) for k in ("small", "big")}
        digests = {k: self.digest(k) for k in expected}

        def check():
            for k, fields in expected.items():
                self.assertEqual(self.r.hgetall(k), fields, k)
                self.assertEqual(self.digest(k), digests[k], k)
            self.assertEqual(self.r.hkeys("small"), [b"\x00a", b"n"])
            self.assertEqual(self.r.object("encoding", "small"), b"listpack")
            self.assertEqual(self.r.object("encoding", "big"), b"hashtable")
            self.assertGreater(self.r.ttl("big"), 900)
            self.assertEqual(self.r.exists("emptied"), 0)

        self.restart()  # from the log
        check()
        self.assertTrue(self.r.save())
        self.r.hset("after", "x", "y")
        self.restart()  # from the snapshot plus the log after it
        check()
        self.assertEqual(self.r.hgetall("after"), {b"x": b"y"})

    def test_budget_and_eviction(self):
        r = self.r
        r.config_set("maxmemory-policy", "allkeys-lru")
        r.config_set("maxmemory", "2mb")
        value = "v" * 100
        for i in range(400):  # about 2 MB of hashes
            r.hset("hash%d" % i, mapping={"f%d" % j: value for j in range(50)})
        left = r.dbsize()
        self.assertLess(left, 400)
        self.assertGreater(left, 0)
        for key in r.scan_iter(count=1000):
            self.assertEqual(r.hlen(key), 50)  # a hash goes whole or not at all
        self.assertGreater(int(r.info("stats")["evicted_keys"]), 0)
        r.config_set("maxmemory-policy", "noeviction")
        with self.assertRaises(redis.ResponseError) as caught:
            for i in range(400):
                r.hset("more%d" % i, mapping={"f%d" % j: value for j in range(50)})
        self.assertTrue(str(caught.exception).startswith("OOM command not allowed when used memory"),
                        str(caught.exception))


class ListpackSettingsByOldNamesTest(ServerTestCase):
    """Redis 7.0's hash-max-ziplist-* and zset-max-ziplist-* names work as flags and config-file
    directives too, and CONFIG GET patterns answer them beside the new names."""

    def setUp(self):
        self.conf_dir = tempfile.mkdtemp(prefix="prefixd-py-hash-conf-")
        conf = os.path.join(self.conf_dir, "prefixd.conf")
        with open(conf, "w") as f:
            f.write("hash-max-ziplist-value 9\nzset-max-ziplist-value 5\n")
        self.flags = ServerTestCase.flags + [conf, "--hash-max-ziplist-entries", "2",
                                             "--zset-max-ziplist-entries", "3"]
        super().setUp()

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.conf_dir, ignore_errors=True)

    def test_old_names_set_the_settings(self):
        r = self.r
        self.assertEqual(r.config_get("hash-max-listpack-*"),
                         {"hash-max-listpack-entries": "2", "hash-max-listpack-value": "9"})
        r.hset("h", mapping={"a": "123456789", "b": "2"})
        self.assertEqual(r.object("encoding", "h"), b"listpack")
        r.hset("h", "c", "3")
        self.assertEqual(r.object("encoding", "h"), b"hashtable")
        r.hset("v", "a", "1234567890")
        self.assertEqual(r.object("encoding", "v"), b"hashtable")
        r.zadd("z", {"a": 1, "b": 2, "12345": 3})
        self.assertEqual(r.object("encoding", "z"), b"listpack")
        r.zadd("z", {"c": 4})
        self.assertEqual(r.object("encoding", "z"), b"skiplist")
        r.zadd("w", {"123456": 1})
        self.assertEqual(r.object("encoding", "w"), b"skiplist")

    def test_a_pattern_answers_both_types_old_names(self):
        # And the list's, as Redis 7.0.15 answers it (list-max-listpack-size's older name).
        self.assertEqual(self.r.config_get("*-max-ziplist-*"),
                         {"hash-max-ziplist-entries": "2", "hash-max-ziplist-value": "9",
                          "zset-max-ziplist-entries": "3", "zset-max-ziplist-value": "5",
                          "list-max-ziplist-size": "-2"})


if __name__ == "__main__":
    unittest.main()
