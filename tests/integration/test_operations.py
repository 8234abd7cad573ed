#!/usr/bin/python3
"""Operations: the default config file, Prometheus /metrics and systemd supervision.

Starts $PREFIXD_SERVER on free loopback ports: with etc/prefixd.conf (every directive in the
settings table must be in it, and the server must start with it), with --metrics-port (the
exposition is scraped and checked by `promtool check metrics`, from Debian's prometheus package),
and with --supervised systemd under a NOTIFY_SOCKET this test listens on.
Run with Debian's interpreter: /usr/bin/python3 tests/integration/test_operations.py
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefixd_server import free_port, said_ready  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = os.path.join(ROOT, "etc", "prefixd.conf")
PROMTOOL = shutil.which("promtool", path="/usr/bin:/usr/local/bin")


class Server:
    def __init__(self, *args, env=None):
        self.root = tempfile.mkdtemp(prefix="prefixd-ops-")
        self.port = free_port()
        self.log_path = os.path.join(self.root, "server.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [os.environ["PREFIXD_SERVER"], *args, "--bind", "127.0.0.1", "--port",
                 str(self.port), "--dir", os.path.join(self.root, "data")],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited: " + self.log())
            if not said_ready(self.log_path, 0):
                time.sleep(0.02)
                continue
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("server did not start: " + self.log())

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)
        return self.proc.returncode


def directives(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, value = line.partition(" ")
            out[name] = value.strip().strip('"')
    return out


class DefaultConfigTest(unittest.TestCase):
    def test_every_setting_is_in_the_file_and_the_server_starts_with_it(self):
        conf = directives(CONF)
        server, plain = Server(CONF), Server()
        try:
            settings = server.client.config_get("*")
            # CONFIG GET * also answers Redis 7.0's older names of five settings, as Redis does;
            # the file lists each setting once, under its own name.
            aliases = {"hash-max-ziplist-entries": "hash-max-listpack-entries",
                       "hash-max-ziplist-value": "hash-max-listpack-value",
                       "zset-max-ziplist-entries": "zset-max-listpack-entries",
                       "zset-max-ziplist-value": "zset-max-listpack-value",
                       "list-max-ziplist-size": "list-max-listpack-size"}
            for alias, name in aliases.items():
                self.assertEqual(settings.pop(alias), settings[name], alias)
            self.assertEqual(sorted(conf), sorted(settings), "etc/prefixd.conf and CONFIG GET *")
            # The file sets every directive to its default: the same values as no file at all.
            defaults = plain.client.config_get("*")
            for name in conf:
                if name in ("port", "dir"):
                    continue  # given on the command line, different for the two servers
                with self.subTest(name=name):
                    self.assertEqual(settings[name], defaults[name])
            self.assertEqual(server.client.info("server")["config_file"], CONF)
        finally:
            self.assertEqual(plain.stop(), 0)
            self.assertEqual(server.stop(), 0)

    def test_metrics_are_off_by_default(self):
        self.assertEqual(directives(CONF)["metrics-port"], "0")


class MetricsTest(unittest.TestCase):
    def setUp(self):
        self.metrics_port = free_port()
        self.server = Server("--metrics-port", str(self.metrics_port))
        self.url = "http://127.0.0.1:%d" % self.metrics_port

    def tearDown(self):
        self.assertEqual(self.server.stop(), 0)

    def scrape(self, path="/metrics"):
        with urllib.request.urlopen(self.url + path, timeout=5) as r:
            self.assertEqual(r.headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8")
            return r.read().decode()

    def sample(self, text, name, labels=""):
        m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
        self.assertIsNotNone(m, "%s%s missing" % (name, labels))
        return float(m.group(1))

    def test_scrape_passes_promtool_and_counts_traffic(self):
        c = self.server.client
        blob = os.urandom(100000)
        c.execute_command("SSM.PREFIX.STORE", "s1", 0, blob)
        c.execute_command("SSM.PREFIX.FETCH", "s1", 0)
        c.execute_command("SSM.PREFIX.FETCH", "nobody", 0)
        for _ in range(5):
            c.ping()
        with self.assertRaises(redis.ResponseError):
            c.execute_command("ECHO")
        text = self.scrape()
        self.assertIsNotNone(PROMTOOL, "promtool is missing: scripts/install-deps.sh installs it")
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                               capture_output=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        # Five, and the one Server() sent to see the server up.
        self.assertEqual(self.sample(text, "prefixd_commands_total", '{command="ping"}'), 6)
        self.assertEqual(
            self.sample(text, "prefixd_commands_rejected_total", '{command="echo"}'), 1)
        self.assertEqual(self.sample(text, "prefixd_error_replies_total", '{code="ERR"}'), 1)
        self.assertEqual(self.sample(
            text, "prefixd_command_duration_seconds_count", '{command="ssm.prefix.fetch"}'), 2)
        self.assertEqual(self.sample(
            text, "prefixd_command_duration_seconds_bucket", '{command="ping",le="+Inf"}'), 6)
        self.assertEqual(self.sample(text, "prefixd_store_bytes", '{store="ssm"}'), len(blob))
        self.assertEqual(self.sample(text, "prefixd_store_keys", '{store="ssm"}'), 1)
        self.assertEqual(self.sample(text, "prefixd_keyspace_hits_total"), 1)
        self.assertEqual(self.sample(text, "prefixd_keyspace_misses_total"), 1)
        self.assertGreaterEqual(self.sample(text, "prefixd_connected_clients"), 1)
        self.assertGreater(self.sample(text, "prefixd_memory_used_bytes"), len(blob) - 1)
        self.assertGreaterEqual(self.sample(text, "prefixd_persistence_lag_records"), 0)

    def test_keyspace_figures(self):
        c = self.server.client
        c.execute_command("SSM.PREFIX.STORE", "kept", 0, b"x")
        c.execute_command("SSM.PREFIX.STORE", "short", 0, b"x")
        c.execute_command("SSM.PREFIX.STORE", "ttl", 0, b"x")
        c.execute_command("PEXPIRE", "short", 1)
        c.execute_command("EXPIRE", "ttl", 1000)
        time.sleep(0.05)
        self.assertEqual(c.exists("short"), 0)  # deleted lazily: one expired key
        text = self.scrape()
        self.assertEqual(self.sample(text, "prefixd_keys"), 2)
        self.assertEqual(self.sample(text, "prefixd_keys_with_expiry"), 1)
        self.assertEqual(self.sample(text, "prefixd_expired_keys_total"), 1)
        self.assertEqual(self.sample(text, "prefixd_evicted_keys_total"), 0)

    def test_keys_and_bytes_per_type(self):
        c = self.server.client
        c.set("s1", b"a" * 1000)
        c.set("s2", b"b" * 3000)
        c.set("gone", b"c" * 500)
        c.delete("gone")
        c.execute_command("SSM.PREFIX.STORE", "sess", 0, b"x" * 10)
        c.execute_command("V.CREATE", "vs", 4)
        c.execute_command("KV.PREFIX.NAMESPACE", "{ns}", "BLOCK", 4, "ATTN", 1, "KVDIM", 2,
                          "RECURRENT", 1, "VQUANT", "fp32")
        c.hset("h", "f", "v")
        c.zadd("z1", {"m": 1})
        c.zadd("z2", {"m": 1})
        text = self.scrape()
        expected = {"string": 2, "ssm-prefix": 1, "vstore": 1, "prefix-index": 1, "kvprefix": 0,
                    "hash": 1, "zset": 2}
        for kind, count in expected.items():
            self.assertEqual(self.sample(text, "prefixd_keys_by_type", '{type="%s"}' % kind),
                             count, kind)
        self.assertEqual(self.sample(text, "prefixd_keys"), sum(expected.values()))
        # The values' buffers: at least their bytes, not the deleted one's.
        string_bytes = self.sample(text, "prefixd_string_bytes")
        self.assertGreaterEqual(string_bytes, 4000)
        self.assertLess(string_bytes, 4500)
        self.assertGreater(self.sample(text, "prefixd_store_bytes", '{store="prefix_index"}'), 0)
        c.set("s1", b"1")  # overwritten by a small value; the type changes with FLUSHALL only
        c.execute_command("FLUSHALL")
        text = self.scrape()
        for kind in expected:
            self.assertEqual(self.sample(text, "prefixd_keys_by_type", '{type="%s"}' % kind), 0)
        self.assertEqual(self.sample(text, "prefixd_string_bytes"), 0)

    def test_other_paths_and_methods(self):
        with self.assertRaises(urllib.error.HTTPError) as ctx:
            self.scrape("/")
        self.assertEqual(ctx.exception.code, 404)
        req = urllib.request.Request(self.url + "/metrics", data=b"x", method="POST")
        with self.assertRaises(urllib.error.HTTPError) as ctx:
            urllib.request.urlopen(req, timeout=5)
        self.assertEqual(ctx.exception.code, 405)
        # A client that connects and says nothing does not block the next scrape for long.
        idle = socket.create_connection(("127.0.0.1", self.metrics_port))
        try:
            start = time.monotonic()
            self.scrape()
            self.assertLess(time.monotonic() - start, 4)
        finally:
            idle.close()


class SupervisionTest(unittest.TestCase):
    def test_sd_notify_ready_status_stopping(self):
        root = tempfile.mkdtemp(prefix="prefixd-notify-")
        path = os.path.join(root, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(10)
        try:
            env = dict(os.environ, NOTIFY_SOCKET=path)
            server = Server("--supervised", "systemd", env=env)
            ready = sock.recv(4096).decode()
            self.assertIn("READY=1", ready.split("\n"))
            self.assertRegex(ready, r"STATUS=Ready to accept connections on port %d" % server.port)
            self.assertEqual(server.stop(), 0)
            self.assertEqual(sock.recv(4096).decode(), "STOPPING=1")
        finally:
            sock.close()
            shutil.rmtree(root, ignore_errors=True)

    def test_no_notification_without_supervision(self):
        root = tempfile.mkdtemp(prefix="prefixd-notify-")
        path = os.path.join(root, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(0.5)
        try:
            server = Server(env=dict(os.environ, NOTIFY_SOCKET=path))
            self.assertEqual(server.stop(), 0)
            with self.assertRaises(socket.timeout):
                sock.recv(4096)
        finally:
            sock.close()
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
