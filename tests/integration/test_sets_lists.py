#!/usr/bin/python3
"""Sets and lists through Debian's python3-redis against the real server: every command's
replies and errors (Redis 7.0.15's), WRONGTYPE both ways, OBJECT ENCODING, the generic key
commands (COPY, RENAME, MOVE, DUMP/RESTORE, SCAN TYPE, EXPIRE), values that survive a restart from
the log and from a snapshot, RESP3 set replies, and eviction that deletes a key whole.

Run with Debian's interpreter: /usr/bin/python3 tests/integration/test_sets_lists.py
"""

import os
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefixd_server import ServerTestCase  # noqa: E402

import redis  # noqa: E402

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


class SetsListsTest(ServerTestCase):
    prefix = "prefixd-py-types-"

    def test_set_commands(self):
        r = self.r
        self.assertEqual(r.sadd("s", "3", "1", "2", "2"), 3)
        self.assertEqual(r.sadd("s", "1"), 0)
        self.assertEqual(r.srandmember("s", 10), [b"1", b"2", b"3"])  # the whole set, intset order
        self.assertEqual(r.object("encoding", "s"), b"intset")
        self.assertEqual(r.type("s"), b"set")
        self.assertEqual(r.scard("s"), 3)
        self.assertEqual(r.scard("missing"), 0)
        self.assertTrue(r.sismember("s", "2"))
        self.assertFalse(r.sismember("s", "9"))
        self.assertEqual(r.smismember("s", "1", "9", "3"), [1, 0, 1])
        self.assertEqual(r.sadd("s", "a"), 1)
        self.assertEqual(r.object("encoding", "s"), b"hashtable")
        self.assertEqual(r.srem("s", "a", "zz"), 1)
        self.assertEqual(r.object("encoding", "s"), b"hashtable")  # never back to intset
        self.assertEqual(r.srem("missing", "a"), 0)
        self.assertEqual(r.srem("s", "1", "2", "3"), 3)
        self.assertEqual(r.exists("s"), 0)  # emptied: deleted
        self.assertEqual(r.smembers("missing"), set())
        self.assertEqual(self.error("SADD", "s"),
                         "wrong number of arguments for 'sadd' command")

    def test_intset_limit(self):
        r = self.r
        r.config_set("set-max-intset-entries", 3)
        r.sadd("small", "1", "2", "3")
        self.assertEqual(r.object("encoding", "small"), b"intset")
        r.sadd("small", "4")
        self.assertEqual(r.object("encoding", "small"), b"hashtable")
        r.config_set("set-max-intset-entries", 512)
        r.sadd("big", *[str(i) for i in range(512)])
        self.assertEqual(r.object("encoding", "big"), b"intset")
        r.sadd("big", "512")
        self.assertEqual(r.object("encoding", "big"), b"hashtable")
        self.assertEqual(r.scard("big"), 513)
        r.sadd("first", "x", "1")
        self.assertEqual(r.object("encoding", "first"), b"hashtable")
        r.sadd("neg", "-5", "01")  # "01" is not a canonical integer
        self.assertEqual(r.object("encoding", "neg"), b"hashtable")

    def test_srandmember_and_spop(self):
        r = self.r
        members = {b"a", b"b", b"c", b"d", b"e"}
        r.sadd("s", *members)
        self.assertIn(r.srandmember("s"), members)
        self.assertIsNone(r.srandmember("missing"))
        picked = r.srandmember("s", 3)
        self.assertEqual(len(picked), 3)
        self.assertEqual(len(set(picked)), 3)
        self.assertTrue(set(picked) <= members)
        self.assertEqual(set(r.srandmember("s", 100)), members)
        repeated = r.srandmember("s", -20)
        self.assertEqual(len(repeated), 20)
        self.assertTrue(set(repeated) <= members)
        self.assertEqual(r.srandmember("s", 0), [])
        self.assertEqual(r.srandmember("missing", 5), [])
        self.assertEqual(self.error("SRANDMEMBER", "s", "x"),
                         "value is not an integer or out of range")
        self.assertEqual(self.error("SRANDMEMBER", "s", "-9223372036854775808"),
                         "value is out of range, value must between -9223372036854775807 and "
                         "9223372036854775807")
        self.assertEqual(self.error("SRANDMEMBER", "s", "1", "2"), "syntax error")
        # A reply too large for client-output-buffer-limit is refused, not built.
        self.assertEqual(self.error("SRANDMEMBER", "s", "-9223372036854775807"),
                         "value is out of range")
        popped = r.spop("s")
        self.assertIn(popped, members)
        self.assertEqual(r.scard("s"), 4)
        two = r.spop("s", 2)
        self.assertEqual(len(set(two)), 2)
        self.assertNotIn(popped, two)
        self.assertEqual(r.scard("s"), 2)
        self.assertEqual(self.error("SPOP", "s", "-1"), "value is out of range, must be positive")
        self.assertEqual(r.spop("s", 0), [])
        self.assertEqual(len(r.spop("s", 10)), 2)
        self.assertEqual(r.exists("s"), 0)
        self.assertIsNone(r.spop("s"))
        self.assertEqual(r.spop("s", 3), [])

    def test_list_commands(self):
        r = self.r
        self.assertEqual(r.rpush("l", "a", "b", "c"), 3)
        self.assertEqual(r.lpush("l", "x", "y"), 5)
        self.assertEqual(r.lrange("l", 0, -1), [b"y", b"x", b"a", b"b", b"c"])
        self.assertEqual(r.object("encoding", "l"), b"quicklist")
        self.assertEqual(r.type("l"), b"list")
        self.assertEqual(r.lrange("l", -2, 100), [b"b", b"c"])
        self.assertEqual(r.lrange("l", 3, 1), [])
        self.assertEqual(r.lrange("l", -100, 0), [b"y"])
        self.assertEqual(r.lrange("missing", 0, -1), [])
        self.assertEqual(r.llen("l"), 5)
        self.assertEqual(r.lindex("l", -1), b"c")
        self.assertIsNone(r.lindex("l", 5))
        self.assertEqual(r.lpushx("missing", "a"), 0)
        self.assertEqual(r.rpushx("l", "d"), 6)
        self.assertEqual(r.lpop("l"), b"y")
        self.assertEqual(r.rpop("l", 2), [b"d", b"c"])
        self.assertEqual(r.lpop("l", 0), [])
        self.assertIsNone(r.lpop("missing"))
        self.assertIsNone(r.lpop("missing", 2))
        self.assertEqual(self.error("LPOP", "l", "-1"), "value is out of range, must be positive")
        self.assertEqual(self.error("LPOP", "l", "1", "2"),
                         "wrong number of arguments for 'lpop' command")
        self.assertTrue(r.lset("l", -1, "B"))
        self.assertEqual(self.error("LSET", "l", "9", "v"), "index out of range")
        self.assertEqual(self.error("LSET", "missing", "0", "v"), "no such key")
        self.assertEqual(self.error("LSET", "missing", "x", "v"), "no such key")
        self.assertEqual(self.error("LSET", "l", "x", "v"),
                         "value is not an integer or out of range")
        self.assertIsNone(r.lindex("missing", "x"))  # Redis looks the key up first
        self.assertEqual(self.error("LINDEX", "l", "x"),
                         "value is not an integer or out of range")
        self.assertEqual(self.error("LRANGE", "l", "a", "1"),
                         "value is not an integer or out of range")
        r.delete("l")
        r.rpush("l", "a", "b", "a", "c", "a")
        self.assertEqual(r.lrem("l", -2, "a"), 2)
        self.assertEqual(r.lrange("l", 0, -1), [b"a", b"b", b"c"])
        self.assertEqual(r.lrem("l", 0, "zz"), 0)
        self.assertTrue(r.ltrim("l", 1, -1))
        self.assertEqual(r.lrange("l", 0, -1), [b"b", b"c"])
        self.assertTrue(r.ltrim("l", 5, 10))
        self.assertEqual(r.exists("l"), 0)  # trimmed empty: deleted
        r.rpush("l", "only")
        self.assertEqual(r.rpop("l"), b"only")
        self.assertEqual(r.exists("l"), 0)

    def test_wrongtype_both_ways(self):
        r = self.r
        r.set("str", "v")
        r.sadd("set", "a")
        r.rpush("list", "a")
        for args in (("SADD", "str", "a"), ("SMEMBERS", "list"), ("SCARD", "str"),
                     ("LPUSH", "set", "a"), ("LRANGE", "str", "0", "1"), ("LPOP", "set"),
                     ("GET", "set"), ("APPEND", "list", "x"), ("SETRANGE", "list", "0", "x"),
                     ("SET", "set", "x", "GET")):
            self.assertEqual(self.error(*args), WRONGTYPE, args)
        self.assertEqual(r.mget("set", "str"), [None, b"v"])
        self.assertTrue(r.set("list", "now a string"))  # SET replaces any type
        self.assertEqual(r.type("list"), b"string")

    def test_generic_key_commands(self):
        r = self.r
        r.sadd("s{t}", "1", "2", "x")
        r.rpush("l{t}", "a", "b")
        r.expire("l{t}", 100)
        self.assertEqual(r.copy("l{t}", "l2{t}"), 1)
        self.assertEqual(r.lrange("l2{t}", 0, -1), [b"a", b"b"])
        self.assertGreater(r.ttl("l2{t}"), 90)
        digest = r.execute_command("DEBUG", "DIGEST-VALUE", "s{t}")
        r.copy("s{t}", "s2{t}")
        self.assertEqual(r.execute_command("DEBUG", "DIGEST-VALUE", "s2{t}"), digest)
        self.assertEqual(r.object("refcount", "s2{t}"), 1)
        r.rename("s2{t}", "s3{t}")
        self.assertEqual(r.smembers("s3{t}"), {b"1", b"2", b"x"})
        self.assertEqual(r.move("s3{t}", 1), 1)
        self.assertEqual(r.exists("s3{t}"), 0)
        r.execute_command("SELECT", 1)
        self.assertEqual(r.smembers("s3{t}"), {b"1", b"2", b"x"})
        r.execute_command("SELECT", 0)
        self.assertEqual(sorted(r.scan_iter(_type="set")), [b"s{t}"])
        self.assertEqual(sorted(r.scan_iter(_type="list")), [b"l2{t}", b"l{t}"])
        dump = r.dump("l{t}")
        r.restore("l3{t}", 0, dump)
        self.assertEqual(r.lrange("l3{t}", 0, -1), [b"a", b"b"])
        self.assertEqual(r.object("encoding", "l3{t}"), b"quicklist")
        sdump = r.dump("s{t}")
        r.restore("s4{t}", 0, sdump)
        self.assertEqual(r.execute_command("DEBUG", "DIGEST-VALUE", "s4{t}"), digest)
        self.assertGreater(r.memory_usage("s{t}"), 0)
        self.assertEqual(r.delete("s{t}", "l{t}"), 2)
        r.rpush("gone", "a")
        r.pexpire("gone", 1)
        r.execute_command("DEBUG", "SLEEP", "0.01")
        self.assertEqual(r.llen("gone"), 0)
        r.flushdb()
        self.assertEqual(r.dbsize(), 0)

    def test_resp3_set_replies(self):
        self.r.sadd("s", "a")
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(b"HELLO 3\r\nSMEMBERS s\r\nSRANDMEMBER s -1\r\nSRANDMEMBER nokey\r\n"
                         b"SPOP nokey 2\r\nPING\r\n")
            data = b""
            while not data.endswith(b"+PONG\r\n"):
                data += sock.recv(65536)
        self.assertIn(b"~1\r\n$1\r\na\r\n*1\r\n$1\r\na\r\n_\r\n~0\r\n+PONG\r\n", data)
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(b"SRANDMEMBER nokey\r\nSPOP nokey\r\nPING\r\n")
            data = b""
            while not data.endswith(b"+PONG\r\n"):
                data += sock.recv(65536)
        self.assertEqual(data, b"$-1\r\n$-1\r\n+PONG\r\n")

    def test_restart_and_snapshot_keep_values(self):
        r = self.r
        r.sadd("ints", *[str(i) for i in range(10)])
        r.sadd("mixed", "1", "b", "2")
        r.srem("mixed", "b")  # a hashtable of integers only
        r.rpush("l", *["e%d" % i for i in range(100)])
        r.ltrim("l", 10, 59)
        r.lset("l", 0, b"\x00bin\r\n")
        r.expire("l", 1000)
        r.sadd("emptied", "x")
        r.spop("emptied")
        expected = {k: r.execute_command("DEBUG", "DIGEST-VALUE", k) for k in ("ints", "mixed", "l")}

        def check():
            for k, d in expected.items():
                self.assertEqual(self.r.execute_command("DEBUG", "DIGEST-VALUE", k), d, k)
            self.assertEqual(self.r.object("encoding", "ints"), b"intset")
            self.assertEqual(self.r.object("encoding", "mixed"), b"hashtable")
            self.assertEqual(self.r.lindex("l", 0), b"\x00bin\r\n")
            self.assertEqual(self.r.llen("l"), 50)
            self.assertGreater(self.r.ttl("l"), 900)
            self.assertEqual(self.r.exists("emptied"), 0)

        self.restart()  # from the log
        check()
        self.assertTrue(self.r.save())
        self.r.rpush("after", "x")
        self.restart()  # from the snapshot plus the log after it
        check()
        self.assertEqual(self.r.lrange("after", 0, -1), [b"x"])

    def test_eviction_deletes_whole_keys(self):
        r = self.r
        r.config_set("maxmemory-policy", "allkeys-lru")
        r.config_set("maxmemory", "2mb")
        element = "v" * 100
        for i in range(400):  # about 4 MB of lists and sets
            r.rpush("list%d" % i, *[element] * 50)
            r.sadd("set%d" % i, *["%s%d" % (element, j) for j in range(50)])
        left = r.dbsize()
        self.assertLess(left, 800)
        self.assertGreater(left, 0)
        for key in r.scan_iter(count=1000):
            if key.startswith(b"list"):
                self.assertEqual(r.llen(key), 50)
            else:
                self.assertEqual(r.scard(key), 50)
        self.assertGreater(int(r.info("stats")["evicted_keys"]), 0)


if __name__ == "__main__":
    unittest.main()
