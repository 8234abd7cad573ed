#!/usr/bin/python3
"""Compares prefixd's introspection replies byte for byte with a real redis-server 7.0.15.

Starts prefixd ($PREFIXD_SERVER) and, when /usr/bin/redis-server is installed, a redis-server on
free loopback ports; sends the same raw RESP requests to both and compares the reply bytes. The
checks that need no reference (key positions of prefixd's own commands) run either way.
Run with Debian's interpreter: /usr/bin/python3 tests/integration/test_redis_parity.py
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_python_client import ServerProcess, free_port  # noqa: E402

REDIS_SERVER = shutil.which("redis-server", path="/usr/bin:/usr/local/bin")

# Commands prefixd shares with Redis 7.0.15 (subcommands by their full name: a container's
# subcommand order is a hash order in Redis, so containers are compared one subcommand at a time).
SHARED = ("ping echo auth hello select quit reset client|id client|setname client|getname "
          "client|list client|info client|kill client|help config|get config|set "
          "config|resetstat config|help command|count command|info command|docs command|list "
          "command|help command|getkeys command|getkeysandflags info dbsize flushall time "
          "shutdown save bgsave lastsave monitor client|reply debug del unlink exists touch type "
          "expire pexpire expireat pexpireat ttl pttl expiretime pexpiretime persist scan keys "
          "randomkey object|encoding object|freq object|idletime object|refcount object|help "
          "memory|usage memory|help flushdb get set setnx setex psetex getset getex getdel mget "
          "mset msetnx strlen getrange substr setrange append incr decr incrby decrby "
          "incrbyfloat setbit getbit rename renamenx copy move lcs swapdb "
          "sadd srem scard sismember smismember smembers srandmember spop lpush rpush lpushx "
          "rpushx lpop rpop llen lrange lindex lset lrem ltrim hset hsetnx hget hmget hmset hdel "
          "hlen hexists hgetall hkeys hvals hstrlen hincrby hincrbyfloat hrandfield hscan zadd "
          "zincrby zscore zmscore zcard zcount zlexcount zrank zrevrank zrem zrange zrevrange "
          "zrangebyscore zrevrangebyscore zrangebylex zrevrangebylex zpopmin zpopmax "
          "zremrangebyrank zremrangebyscore zremrangebylex zscan zmpop").split()


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_reply(sock):
    """Reads exactly one RESP2/RESP3 reply and returns its raw bytes."""
    buf = bytearray()

    def line():
        while b"\r\n" not in buf[pos[0]:]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed mid-reply")
            buf.extend(chunk)
        end = buf.index(b"\r\n", pos[0])
        text = bytes(buf[pos[0]:end])
        pos[0] = end + 2
        return text

    def need(n):
        while len(buf) < pos[0] + n:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed mid-reply")
            buf.extend(chunk)

    def one():
        head = line()
        kind, rest = head[:1], head[1:]
        if kind in (b"$", b"=", b"!") and rest != b"-1":
            need(int(rest) + 2)
            pos[0] += int(rest) + 2
        elif kind in (b"*", b"~", b">") and rest != b"-1":
            for _ in range(int(rest)):
                one()
        elif kind in (b"%", b"|"):
            for _ in range(2 * int(rest)):
                one()

    pos = [0]
    one()
    return bytes(buf[:pos[0]])


class Raw:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)

    def call(self, *args):
        self.sock.sendall(encode(args))
        return read_reply(self.sock)

    def close(self):
        self.sock.close()


class RedisProcess:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="prefixd-redis-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.root],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                Raw(self.port).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


class ParityBase(unittest.TestCase):
    """prefixd and redis-server side by side, one raw connection to each per test."""

    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(os.environ["PREFIXD_SERVER"])
        cls.server.start()
        cls.redis = RedisProcess() if REDIS_SERVER else None

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.server.cleanup()
        if cls.redis:
            cls.redis.stop()

    def setUp(self):
        self.px = Raw(self.server.port)
        self.rd = Raw(self.redis.port) if self.redis else None

    def tearDown(self):
        self.px.close()
        if self.rd:
            self.rd.close()

    def same(self, *args, resp3=False):
        if self.rd is None:
            self.skipTest("redis-server is not installed")
        if resp3:
            self.px.call("HELLO", "3")
            self.rd.call("HELLO", "3")
        want, got = self.rd.call(*args), self.px.call(*args)
        self.assertEqual(got, want, "reply to %r differs from redis-server's" % (args,))
        return got

    def run_script(self, script, resp3=False):
        """Sends each line of `script` (arguments split on spaces) to both servers."""
        for line in script.strip().split("\n"):
            with self.subTest(line=line):
                self.same(*line.split(), resp3=resp3)


class CommandTableTest(ParityBase):
    def test_command_info_matches_redis(self):
        for name in SHARED:
            with self.subTest(name=name):
                self.same("COMMAND", "INFO", name)

    def test_command_info_matches_redis_over_resp3(self):
        for name in ("ping", "client|list", "config|set", "dbsize", "info", "command|docs"):
            with self.subTest(name=name):
                self.same("COMMAND", "INFO", name, resp3=True)

    def test_command_info_unknown_is_null(self):
        self.assertEqual(self.px.call("COMMAND", "INFO", "nosuch"), b"*1\r\n$-1\r\n")
        self.assertEqual(self.px.call("COMMAND", "INFO", "get|x", "ping")[:9], b"*2\r\n$-1\r\n")
        self.same("COMMAND", "INFO", "nosuch", "ping", "client|nosuch")

    def test_getkeys_errors_match_redis(self):
        self.same("COMMAND", "GETKEYS", "nosuch", "a")
        self.same("COMMAND", "GETKEYS", "ping", "a")
        self.same("COMMAND", "GETKEYS", "client", "nosuch")
        self.same("COMMAND", "GETKEYSANDFLAGS", "echo", "a")
        self.same("COMMAND", "GETKEYS", "flushall", "sync")

    def test_getkeys_of_key_commands_match_redis(self):
        self.same("COMMAND", "GETKEYSANDFLAGS", "del", "a", "b", "c")
        self.same("COMMAND", "GETKEYSANDFLAGS", "exists", "a", "b")
        self.same("COMMAND", "GETKEYSANDFLAGS", "expire", "a", "10", "NX")
        self.same("COMMAND", "GETKEYSANDFLAGS", "ttl", "a")
        self.same("COMMAND", "GETKEYSANDFLAGS", "object", "freq", "a")
        self.same("COMMAND", "GETKEYSANDFLAGS", "memory", "usage", "a", "SAMPLES", "5")
        self.same("COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1")
        self.same("COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1", "get")
        self.same("COMMAND", "GETKEYSANDFLAGS", "set", "k1", "v1", "EX", "10", "GET")
        self.same("COMMAND", "GETKEYSANDFLAGS", "getex", "k1", "PERSIST")
        self.same("COMMAND", "GETKEYS", "keys", "*")
        self.same("COMMAND", "GETKEYS", "del")
        self.same("COMMAND", "GETKEYSANDFLAGS", "zmpop", "2", "a", "b", "min")
        self.same("COMMAND", "GETKEYSANDFLAGS", "zadd", "z", "1", "a")

    def test_command_docs_arguments_match_redis(self):
        # Summaries are prefixd's own words; the argument specs follow Redis's JSON.
        for name in ("ping", "echo", "select", "client|setname", "info", "flushall", "del",
                     "type", "expire", "pexpireat", "ttl", "persist", "scan", "keys", "flushdb",
                     "object|freq", "memory|usage", "get", "set", "setnx", "setex", "psetex",
                     "getset", "getex", "getdel", "mget", "mset", "msetnx", "strlen", "getrange",
                     "substr",
                     "setrange", "append", "incr", "decr", "incrby", "decrby", "incrbyfloat",
                     "setbit", "getbit", "rename", "renamenx", "copy", "move", "lcs", "sadd",
                     "srem", "scard", "sismember", "smismember", "smembers", "srandmember",
                     "spop", "lpush", "rpush", "lpushx", "rpushx", "lpop", "rpop", "llen",
                     "lrange", "lindex", "lset", "lrem", "ltrim", "hset", "hsetnx", "hget",
                     "hmget", "hmset", "hdel", "hlen", "hexists", "hgetall", "hkeys", "hvals",
                     "hstrlen", "hincrby", "hincrbyfloat", "hrandfield", "hscan", "zadd",
                     "zincrby", "zscore", "zmscore", "zcard", "zcount", "zlexcount", "zrank",
                     "zrevrank", "zrem", "zrange", "zrevrange", "zrangebyscore",
                     "zrevrangebyscore", "zrangebylex", "zrevrangebylex", "zpopmin", "zpopmax",
                     "zremrangebyrank", "zremrangebyscore", "zremrangebylex", "zscan", "zmpop"):
            with self.subTest(name=name):
                if self.rd is None:
                    self.skipTest("redis-server is not installed")
                want = self.rd.call("COMMAND", "DOCS", name)
                got = self.px.call("COMMAND", "DOCS", name)
                self.assertIn(b"$9\r\narguments\r\n", got)
                tail = lambda r: r[r.index(b"$9\r\narguments\r\n"):]
                self.assertEqual(tail(got), tail(want))

    def test_own_keyed_commands_declare_their_first_key(self):
        reply = self.px.call("COMMAND", "LIST", "FILTERBY", "PATTERN", "*.*")
        names = [n for n in reply.split(b"\r\n")[2::2] if n]
        # SHM.CALL's keys are those of the command it carries, routed when that is dispatched.
        keyless = {b"kv.prefix.info", b"kv.prefix.save", b"kv.prefix.commit", b"kv.prefix.warm",
                   b"pion.stats", b"v.info", b"shm.hello", b"shm.release", b"shm.call"}
        keyed = [n for n in names if n not in keyless and not n.startswith(b"attend.")]
        self.assertIn(b"ssm.prefix.store", keyed)
        self.assertIn(b"v.storebatch", keyed)
        for name in keyed:
            with self.subTest(name=name):
                info = self.px.call("COMMAND", "INFO", name)
                self.assertNotIn(b"movablekeys", info)
                self.assertIn(b":1\r\n:1\r\n:1\r\n", info + b"") if name != b"kv.prefix.drop" \
                    else self.assertIn(b":1\r\n:-1\r\n:1\r\n", info)
                self.assertIn(b"$12\r\nbegin_search\r\n", info)

    def test_docs_of_own_commands_list_their_arguments(self):
        docs = self.px.call("COMMAND", "DOCS", "ssm.prefix.fetch")
        self.assertIn(b"$4\r\nname\r\n$3\r\nsid\r\n$4\r\ntype\r\n$3\r\nkey\r\n"
                      b"$14\r\nkey_spec_index\r\n:0\r\n", docs)
        self.assertIn(b"$5\r\ntoken\r\n$5\r\nRANGE\r\n$5\r\nflags\r\n*1\r\n+optional\r\n",
                      docs)

    def test_getkeys_of_own_commands(self):
        self.assertEqual(self.px.call("COMMAND", "GETKEYS", "ssm.prefix.store", "sid", "0", "x"),
                         b"*1\r\n$3\r\nsid\r\n")
        self.assertEqual(
            self.px.call("COMMAND", "GETKEYSANDFLAGS", "ssm.prefix.fetch", "s", "1"),
            b"*1\r\n*2\r\n$1\r\ns\r\n*2\r\n+RO\r\n+access\r\n")
        self.assertEqual(self.px.call("COMMAND", "GETKEYS", "kv.prefix.drop", "a", "b", "c"),
                         b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n")
        self.assertEqual(self.px.call("COMMAND", "GETKEYS", "ssm.prefix.store", "sid"),
                         b"-ERR Invalid number of arguments specified for command\r\n")
        self.assertEqual(self.px.call("COMMAND", "GETKEYS", "ping", "x"),
                         b"-ERR The command has no key arguments\r\n")

    def test_command_list_filters(self):
        conn = self.px.call("COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection")
        self.assertIn(b"$4\r\nping\r\n", conn)
        self.assertNotIn(b"$6\r\ndbsize\r\n", conn)
        self.assertEqual(self.px.call("COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch"),
                         b"*0\r\n")
        self.assertEqual(self.px.call("COMMAND", "LIST", "FILTERBY", "PATTERN", "echo"),
                         b"*1\r\n$4\r\necho\r\n")
        self.assertEqual(self.px.call("COMMAND", "LIST", "FILTERBY", "MODULE", "x"), b"*0\r\n")
        self.same("COMMAND", "LIST", "FILTERBY", "NOSUCH", "x")
        self.same("COMMAND", "LIST", "FILTERBY", "PATTERN", "E[BCD]HO")
        self.same("COMMAND", "LIST", "FILTERBY", "PATTERN", "client|s?tname")


# Set and list commands whose replies do not depend on chance (an intset's order is its numbers'
# order; a count at least the set's size takes the whole set), sent in order to both servers.
SET_LIST_SCRIPT = """
sadd s 3 1 2 2
sadd s 1
smembers s
object encoding s
scard s
scard nokey
sismember s 2
sismember s x
smismember s 1 x 3
smismember nokey a
sadd s
srem s 1 9
srem nokey a
srandmember nokey
srandmember nokey 3
srandmember s 0
srandmember s 10
srandmember s x
srandmember s -9223372036854775808
srandmember s 1 2
spop s x
spop s -1
spop s 1 2
spop nokey
spop nokey 2
spop s 0
spop s 10
exists s
sadd h 1 a
object encoding h
sadd h2 a 1
object encoding h2
sadd i 5 -3 10
smembers i
rpush l a b c
lpush l x y
lrange l 0 -1
lrange l -2 100
lrange l 3 1
lrange l -100 0
lrange l x 1
lrange l 1 x
lrange nokey 0 -1
llen l
llen nokey
lindex l -1
lindex l 5
lindex l x
lindex nokey x
lpushx nokey a
rpushx l d
lpop l
rpop l 2
lpop l 0
lpop nokey
lpop nokey 2
lpop nokey 0
lpop l -1
lpop l x
lpop l 1 2
lset l -1 B
lset l 9 v
lset l x v
lset nokey 0 v
lset nokey x v
lrange l 0 -1
rpush r a b a c a
lrem r -2 a
lrange r 0 -1
lrem r 0 zz
lrem r x a
lrem r 1 a
ltrim r 1 -1
lrange r 0 -1
ltrim r 5 10
exists r
ltrim nokey 0 1
ltrim r x 1
set str v
sadd str a
lpush str a
smembers l
lrange i 0 1
get l
append i x
setrange l 0 x
set l x get
mget i str
type i
type l
object encoding l
rpush big 1 2 3 4 5 6 7 8 9 10
lrange big -3 -1
lrem big -1 5
ltrim big 2 -3
lrange big 0 -1
"""
SET_LIST_SCRIPT_RESP3 = """
smembers i
srandmember i 10
srandmember i -0
srandmember nokey
spop nokey
spop nokey 1
lpop nokey 1
lpop nokey
lrange big 0 1
smismember i 5 9
sadd p 1
spop p 5
sadd p 1 2 3
spop p 0
spop p 3
spop nokey 2
srandmember nokey 2
lpop nokey 0
"""

# Hashes: every reply and error of the hash commands, encodings at hash-max-listpack-entries and
# -value and one past them (each field's order is insertion order on both servers while a hash
# is a listpack; a hashtable's order is Redis's own, so only order-free replies are compared).
HASH_SCRIPT = """
hset h f1 v1 f2 v2 f1 v3
hset h f3
hset h
hmset h f1
hmset h a 1 b 2
hsetnx h a 9
hsetnx h c 3
hget h a
hget h nofield
hget nokey a
hmget h a nofield b
hmget nokey a b
hgetall h
hkeys h
hvals h
hgetall nokey
hkeys nokey
hlen h
hlen nokey
hexists h a
hexists h zz
hexists nokey a
hstrlen h f1
hstrlen h zz
hstrlen nokey a
hdel h a a zz
hdel h
hdel nokey a
hgetall h
hincrby h n 5
hincrby h n -7
hincrby h n x
hincrby h f1 1
hincrby h big 9223372036854775807
hincrby h big 1
hincrby nokey2 f 1
hincrbyfloat h fl 1.5
hincrbyfloat h fl 1e3
hincrbyfloat h fl x
hincrbyfloat h fl inf
hincrbyfloat h fl nan
hincrbyfloat h f1 1
hincrbyfloat h n 0.25
hincrbyfloat h fl -1001.5
hget h fl
hgetall h
hrandfield nokey
hrandfield nokey 5
hrandfield nokey 5 withvalues
hrandfield h 0
hrandfield h 100
hrandfield h 100 withvalues
hrandfield h -0
hrandfield h x
hrandfield h 1 x
hrandfield h 1 withvalues x
hrandfield h -9223372036854775808
hrandfield h 9223372036854775807 withvalues
hrandfield h -4611686018427387904 withvalues
hscan h 0
hscan h 0 match f*
hscan h 0 count 1
hscan h 0 count 0
hscan h 0 count x
hscan h 0 type hash
hscan h 0 match
hscan h x
hscan nokey 0
hscan nokey 0 count 0
set str v
hset str a 1
hget str a
hgetall str
hrandfield str
hrandfield str 0
hrandfield str 1 x
hscan str 0
hscan str x
hincrby str a x
hincrby str a 1
hincrbyfloat str a inf
hdel str a
lpush str2 a
hlen str2
get h
sadd h x
type h
object encoding h
config set hash-max-listpack-entries 3
hset e a 1 b 2 c 3
object encoding e
hset e d 4
object encoding e
hdel e d c b
object encoding e
config set hash-max-listpack-value 4
hset v a 1234
object encoding v
hset v b 12345
object encoding v
hset w 12345 a
object encoding w
hsetnx x a 12345
object encoding x
hincrby y a 12345
object encoding y
hincrby y a 1
object encoding y
hincrbyfloat z a 12345
object encoding z
config set hash-max-listpack-entries 0
hset zero a 1
object encoding zero
config get hash-max-ziplist-entries
config get hash-max-ziplist-value
config set hash-max-ziplist-entries 7
config get hash-max-listpack-entries
config set hash-max-ziplist-value 9
config get hash-max-listpack-value
config set hash-max-listpack-entries -1
config set hash-max-listpack-entries 512
config set hash-max-listpack-value 64
"""
HASH_SCRIPT_RESP3 = """
hset r3 a 1 b 2
hgetall r3
hgetall nokey
hrandfield r3 2 withvalues
hset one a 1
hrandfield one -3 withvalues
hrandfield one -2
hrandfield r3 5
hscan r3 0
hmget r3 a zz
hget r3 zz
hrandfield nokey
hrandfield nokey 1 withvalues
hincrbyfloat r3 a 0.5
"""


class HashRepliesTest(ParityBase):
    def test_hash_replies_match_redis(self):
        self.same("FLUSHALL")
        self.run_script(HASH_SCRIPT)

    def test_hash_replies_match_redis_over_resp3(self):
        self.same("FLUSHALL")
        self.run_script(HASH_SCRIPT_RESP3, resp3=True)


# Sorted sets: every option and error of the commands prefixd has, with scores that print
# differently (%.17g, inf, -0 in a listpack), ties broken by member, encodings at their limits; the
# script is shared with zsets_test.cc.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "zset_script.txt")) as f:
    ZSET_SCRIPT = "\n".join(l for l in f.read().split("\n") if l and not l.startswith("#"))
ZSET_SCRIPT_RESP3 = """
zadd r3 1 a 2 b 3 c
zrange r3 0 -1 withscores
zrange r3 0 -1
zrangebyscore r3 -inf inf withscores
zpopmin r3
zpopmin r3 1
zpopmax r3 5
zadd r3 1 a
zscore r3 a
zmscore r3 a x
zincrby r3 1 a
zadd r3 incr 1 a
zadd r3 nx incr 1 a
zscan r3 0
zmpop 1 r3 max count 2
zmpop 1 nokey min
"""


class ZsetRepliesTest(ParityBase):
    def run_script(self, script, resp3=False):
        import shlex
        for line in script.strip().split("\n"):
            with self.subTest(line=line):
                self.same(*shlex.split(line), resp3=resp3)

    def test_zset_replies_match_redis(self):
        self.same("FLUSHALL")
        self.same("CONFIG", "SET", "zset-max-listpack-entries", "16")
        try:
            self.run_script(ZSET_SCRIPT)
            self.same("ZADD", "big", "17", "q")
            self.same("OBJECT", "ENCODING", "big")  # the 17th member: past the limit
            self.same("ZREM", "big", "q", "p")
            self.same("OBJECT", "ENCODING", "big")  # never back to a listpack
            self.same("CONFIG", "SET", "zset-max-ziplist-entries", "0")
            self.same("ZADD", "sk", "-0", "z", "0.5", "a")
            self.same("ZRANGE", "sk", "0", "-1", "WITHSCORES")
            self.same("OBJECT", "ENCODING", "sk")
            self.same("CONFIG", "GET", "zset-max-ziplist-entries")
            self.same("CONFIG", "SET", "zset-max-ziplist-value", "1kb")
            self.same("CONFIG", "GET", "zset-max-listpack-value")
        finally:
            self.same("CONFIG", "SET", "zset-max-listpack-entries", "128",
                      "zset-max-listpack-value", "64")

    def test_zset_replies_match_redis_over_resp3(self):
        self.same("FLUSHALL")
        self.run_script(ZSET_SCRIPT_RESP3, resp3=True)


class SetListRepliesTest(ParityBase):
    def test_set_and_list_replies_match_redis(self):
        self.same("FLUSHALL")
        self.run_script(SET_LIST_SCRIPT)

    def test_set_and_list_replies_match_redis_over_resp3(self):
        self.same("FLUSHALL")
        self.run_script(SET_LIST_SCRIPT)
        self.run_script(SET_LIST_SCRIPT_RESP3, resp3=True)


def info_lines(reply, section):
    """The field lines of one INFO section reply (RESP2 bulk or RESP3 verbatim)."""
    body = reply.split(b"\r\n", 1)[1]
    if body.startswith(b"txt:"):
        body = body[4:]
    return [l for l in body.split(b"\r\n") if l and not l.startswith(b"#")]


def mask_times(lines):
    """Replaces the timing figures (usec, usec_per_call, percentile values) with 'T'."""
    import re
    out = []
    for l in lines:
        l = re.sub(rb"usec=\d+,usec_per_call=[\d.]+", b"usec=T,usec_per_call=T", l)
        l = re.sub(rb"(p[\d.]+)=[\d.]+", rb"\1=T", l)
        out.append(l)
    return out


class IntrospectionTest(ParityBase):
    """INFO commandstats, errorstats and latencystats after the same traffic on both servers."""

    def test_client_info_qbuf_is_the_running_request_as_redis(self):
        # Redis trims its query buffer after running a read's requests: while CLIENT INFO runs,
        # qbuf is the bytes of its own request.
        if self.rd is None:
            self.skipTest("redis-server is not installed")
        field = lambda reply: [f for f in reply.split() if f.startswith(b"qbuf=")][0]
        self.assertEqual(field(self.px.call("CLIENT", "INFO")), b"qbuf=26")
        self.assertEqual(field(self.px.call("CLIENT", "INFO")), field(self.rd.call("CLIENT", "INFO")))

    def test_config_set_of_every_setting_to_its_own_value(self):
        # What CONFIG GET * returns can be written back, start-only settings included (a no-op),
        # and reads back the same.
        def pairs():
            reply = redis.Redis(port=self.server.port).config_get("*")
            return {k: v for k, v in reply.items()}
        before = pairs()
        self.assertIn("port", before)
        for name, value in before.items():
            with self.subTest(name=name):
                self.assertEqual(self.px.call("CONFIG", "SET", name, value), b"+OK\r\n")
        self.assertEqual(pairs(), before)
        # A start-only setting still refuses a new value, with Redis's words.
        other = str(int(before["tcp-backlog"]) + 1)
        self.assertEqual(self.px.call("CONFIG", "SET", "tcp-backlog", other),
                         b"-ERR CONFIG SET failed (possibly related to argument 'tcp-backlog') - "
                         b"can't set immutable config\r\n")
        self.assertEqual(self.px.call("CONFIG", "SET", "port", before["port"], "timeout", "x"),
                         b"-ERR CONFIG SET failed (possibly related to argument 'timeout') - "
                         b"argument couldn't be parsed into an integer\r\n")

    def test_info_section_selection_matches_redis(self):
        # Sections Redis has that prefixd has not (Modules) and prefixd's own (Disktier,
        # Vstore, Pion) aside, the same arguments select the same sections, in the same order.
        def headers(conn, args, skip):
            text = conn.call("INFO", *args).decode()
            return [l for l in text.split("\r\n") if l.startswith("# ") and l[2:] not in skip]
        if self.rd is None:
            self.skipTest("redis-server is not installed")
        for args in ((), ("default",), ("all",), ("everything",), ("cpu", "default"),
                     ("cpu", "all"), ("cpu", "sentinel"), ("commandSTATS",)):
            with self.subTest(args=args):
                self.assertEqual(headers(self.px, args, ("Disktier", "Vstore", "Pion")),
                                 headers(self.rd, args, ("Modules",)))
        # rejected_calls is a commandstats field only: the default sections never show it.
        self.assertNotIn(b"rejected_calls", self.px.call("INFO"))
        self.assertNotIn(b"rejected_calls", self.px.call("INFO", "default"))
        self.assertIn(b"rejected_calls", self.px.call("INFO", "everything"))

    def traffic(self, conn):
        conn.call("CONFIG", "RESETSTAT")
        conn.call("PING")
        conn.call("PING", "x")
        conn.call("ECHO")
        conn.call("NOSUCH", "a")
        conn.call("CLIENT", "NOSUCH")
        conn.call("CONFIG", "GET", "maxmemory")
        conn.call("CONFIG", "SET", "nosuch-setting", "1")

    def test_commandstats_errorstats_latencystats_match_redis(self):
        if self.rd is None:
            self.skipTest("redis-server is not installed")
        for conn in (self.px, self.rd):
            self.traffic(conn)
        for section in ("commandstats", "errorstats", "latencystats"):
            with self.subTest(section=section):
                want = sorted(mask_times(info_lines(self.rd.call("INFO", section), section)))
                got = sorted(mask_times(info_lines(self.px.call("INFO", section), section)))
                # RESETSTAT itself: Redis counts it after the reset, so both list it.
                self.assertEqual(got, want)
        stats = lambda c: [l for l in info_lines(c.call("INFO", "stats"), "stats")
                           if l.startswith(b"total_error_replies:")]
        self.assertEqual(stats(self.px), stats(self.rd))

    def test_client_reply_on_off_skip(self):
        seq = [("CLIENT", "REPLY", "SKIP"), ("PING", "a"), ("PING", "b"),
               ("CLIENT", "REPLY", "OFF"), ("PING", "c"), ("ECHO",), ("NOSUCH",),
               ("CLIENT", "REPLY", "SKIP"), ("CLIENT", "REPLY", "ON"), ("PING", "d"),
               ("CLIENT", "REPLY", "x")]
        want = b"$1\r\nb\r\n+OK\r\n$1\r\nd\r\n-ERR syntax error\r\n"
        for conn in (self.px, self.rd) if self.rd else (self.px,):
            conn.sock.sendall(b"".join(encode(c) for c in seq))
            got = b""
            while len(got) < len(want):
                got += conn.sock.recv(65536)
            self.assertEqual(got, want)

    def test_client_kill_and_list_type(self):
        for args in (("CLIENT", "KILL", "TYPE", "foo"), ("CLIENT", "KILL", "TYPE", "slave"),
                     ("CLIENT", "KILL", "TYPE", "pubsub"), ("CLIENT", "LIST", "TYPE", "foo"),
                     ("CLIENT", "LIST", "TYPE", "replica"), ("CLIENT", "KILL", "TYPE", "master"),
                     ("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "maybe")):
            with self.subTest(args=args):
                self.same(*args)
        other = Raw(self.server.port)
        try:
            other.call("PING")
            self.assertEqual(self.px.call("CLIENT", "KILL", "TYPE", "normal"), b":1\r\n")
        finally:
            other.close()

    def test_client_info_fields_are_redis_7_0_15s(self):
        if self.rd is None:
            self.skipTest("redis-server is not installed")
        keys = lambda line: [f.split(b"=")[0] for f in line.split(b"\r\n")[1].split(b" ")]
        self.assertEqual(keys(self.px.call("CLIENT", "INFO")), keys(self.rd.call("CLIENT", "INFO")))
        self.assertEqual(keys(self.px.call("CLIENT", "LIST")), keys(self.rd.call("CLIENT", "LIST")))
        # A client that names its library (CLIENT SETINFO, Redis 7.2) sees 7.2's two extra fields.
        self.assertEqual(self.px.call("CLIENT", "SETINFO", "LIB-NAME", "redis-py"), b"+OK\r\n")
        self.assertTrue(self.px.call("CLIENT", "INFO").endswith(
            b" resp=2 lib-name=redis-py lib-ver=\n\r\n"))

    def test_monitor_lines_match_redis(self):
        import re
        if self.rd is None:
            self.skipTest("redis-server is not installed")
        seen = []
        for port in (self.redis.port, self.server.port):
            monitor, other = Raw(port), Raw(port)
            try:
                self.assertEqual(monitor.call("MONITOR"), b"+OK\r\n")
                other.call("ECHO", b"a b\"\\\n\r\t\x01\xff")
                other.call("AUTH", "secret")
                other.call("HELLO", "2", "AUTH", "user", "secret", "SETNAME", "me")
                other.call("CONFIG", "GET", "maxmemory")  # admin: not shown
                other.call("ECHO")  # rejected: not shown
                other.call("PING")
                data = b""
                monitor.sock.settimeout(5)
                while data.count(b"\r\n") < 4:
                    try:
                        data += monitor.sock.recv(65536)
                    except socket.timeout:
                        self.fail("port %d: monitor got only %r" % (port, data))
                lines = [l + b"\r\n" for l in data.split(b"\r\n")[:-1]]
                self.assertEqual(len(lines), 4, lines)
                mask = lambda l: re.sub(rb"^\+\d+\.\d{6} \[0 127\.0\.0\.1:\d+\]", b"+T [0 A]", l)
                seen.append([mask(l) for l in lines])
                for l in lines:
                    self.assertRegex(l, rb"^\+\d{10}\.\d{6} \[0 127\.0\.0\.1:\d+\] ")
            finally:
                monitor.close()
                other.close()
        self.assertEqual(seen[1], seen[0])
        self.assertEqual(seen[1][3], b'+T [0 A] "PING"\r\n')

    def test_latency_percentiles_config_matches_redis(self):
        for value in ("abc", "101", "-1", "50 x", "", "50  99.0 99.9", "0 100"):
            with self.subTest(value=value):
                self.same("CONFIG", "SET", "latency-tracking-info-percentiles", value)
                self.same("CONFIG", "GET", "latency-tracking-info-percentiles")
        self.same("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99 99.9")

    def test_latency_percentiles_setting(self):
        self.px.call("CONFIG", "RESETSTAT")
        self.assertEqual(
            self.px.call("CONFIG", "SET", "latency-tracking-info-percentiles", "50 90 99.99"),
            b"+OK\r\n")
        self.px.call("PING")
        lines = info_lines(self.px.call("INFO", "latencystats"), "latencystats")
        ping = [l for l in lines if l.startswith(b"latency_percentiles_usec_ping:")]
        self.assertEqual(len(ping), 1)
        self.assertRegex(ping[0].decode(), r"^latency_percentiles_usec_ping:"
                         r"p50=\d+\.\d{3},p90=\d+\.\d{3},p99\.99=\d+\.\d{3}$")
        self.px.call("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99 99.9")
        self.px.call("CONFIG", "SET", "latency-tracking", "no")
        self.px.call("CONFIG", "RESETSTAT")
        self.px.call("PING")
        self.assertEqual(info_lines(self.px.call("INFO", "latencystats"), "latencystats"), [])
        self.px.call("CONFIG", "SET", "latency-tracking", "yes")


if __name__ == "__main__":
    unittest.main(verbosity=2)
