#!/usr/bin/python3
"""Black-box test of prefixd with Debian's python3-redis (4.3.4, RESP2) client.

Starts the server binary named by $PREFIXD_SERVER on a free loopback port with a temporary data
directory, then drives SSM.PREFIX.* and the connection/server commands through redis-py.
Run with Debian's interpreter: /usr/bin/python3 tests/integration/test_python_client.py
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

try:
    import redis
except ImportError:  # pragma: no cover - depends on the machine
    print("python3-redis is not installed for this interpreter (apt-get install python3-redis); "
          "run with /usr/bin/python3", file=sys.stderr)
    sys.exit(1)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefixd_server import free_port, log_size, said_ready  # noqa: E402


class ServerProcess:
    """One prefixd-server child on 127.0.0.1 with its own temporary directory."""

    def __init__(self, binary, args=()):
        self.binary = binary
        self.args = list(args)  # extra flags, e.g. ["--requirepass", "secret"]
        self.root = tempfile.mkdtemp(prefix="prefixd-py-")
        self.log_path = os.path.join(self.root, "server.log")
        self.proc = None
        self.port = None

    def start(self, timeout=10.0):
        for _ in range(5):
            self.port = free_port()
            since = log_size(self.log_path)
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [self.binary, "--bind", "127.0.0.1", "--port", str(self.port),
                 "--dir", os.path.join(self.root, "data")] + self.args,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            log.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if not said_ready(self.log_path, since):
                    time.sleep(0.02)
                    continue
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                        s.sendall(b"PING\r\n")
                        if s.recv(16).startswith((b"+PONG", b"-NOAUTH")):
                            return
                except OSError:
                    time.sleep(0.02)
            if self.proc.poll() is None:
                self.stop()
                raise RuntimeError("prefixd-server did not answer PING within %.0f s:\n%s"
                                   % (timeout, self.log()))
            if b"in use" not in self.log().encode():
                raise RuntimeError("prefixd-server exited with %s during startup:\n%s"
                                   % (self.proc.returncode, self.log()))
        raise RuntimeError("no free port for prefixd-server in 5 attempts")

    def log(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        """Stops the server; returns its exit code (None if it had to be killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            return None

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


def random_blob(rng, size):
    return rng.getrandbits(8 * size).to_bytes(size, "little") if size else b""


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = os.environ.get("PREFIXD_SERVER")
        if not binary:
            raise RuntimeError("set PREFIXD_SERVER to the prefixd-server binary")
        cls.server = ServerProcess(binary)
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        ok = code == 0
        if not ok:
            print("prefixd-server did not exit cleanly (code %r); log:\n%s"
                  % (code, cls.server.log()), file=sys.stderr)
        cls.server.cleanup()
        if not ok:
            raise AssertionError("prefixd-server did not exit cleanly after SIGTERM")

    def setUp(self):
        self.r = redis.Redis(host="127.0.0.1", port=self.server.port, socket_timeout=60)
        self.rng = random.Random(self.id())

    def tearDown(self):
        self.r.close()

    def test_store_fetch_bit_exact(self):
        for size in (0, 1, 255, 4096, 100_003, 1 << 20, 16 << 20):
            blob = random_blob(self.rng, size)
            self.assertEqual(self.r.execute_command("SSM.PREFIX.STORE", "py", 3, blob), b"OK")
            got = self.r.execute_command("SSM.PREFIX.FETCH", "py", 3)
            self.assertEqual(len(got), size)
            self.assertTrue(got == blob, "blob of %d bytes came back altered" % size)
        for pattern in (b"\x00", b"\xff", b"\r\n"):
            blob = pattern * 50_000
            self.r.execute_command("SSM.PREFIX.STORE", b"bin\x00sid", 0, blob)
            self.assertEqual(self.r.execute_command("SSM.PREFIX.FETCH", b"bin\x00sid", 0), blob)

    def test_fetch_miss_is_none(self):
        self.assertIsNone(self.r.execute_command("SSM.PREFIX.FETCH", "nobody", 0))

    def test_fetch_range(self):
        blob = random_blob(self.rng, 10_000)
        self.r.execute_command("SSM.PREFIX.STORE", "range", 1, blob)
        self.assertEqual(
            self.r.execute_command("SSM.PREFIX.FETCH", "range", 1, "RANGE", 100, 50), blob[100:150])
        self.assertEqual(
            self.r.execute_command("SSM.PREFIX.FETCH", "range", 1, "RANGE", 9990, 50), blob[9990:])
        self.assertEqual(
            self.r.execute_command("SSM.PREFIX.FETCH", "range", 1, "RANGE", 20000, 5), b"")

    def test_mstore_mfetch_layers_drop(self):
        blobs = {layer: random_blob(self.rng, 1000 * layer + 1) for layer in range(5)}
        args = []
        for layer, blob in blobs.items():
            args += [layer, blob]
        self.assertEqual(self.r.execute_command("SSM.PREFIX.MSTORE", "multi", *args), b"OK")
        got = self.r.execute_command("SSM.PREFIX.MFETCH", "multi", 4, 9, 0, 2)
        self.assertEqual(got, [blobs[4], None, blobs[0], blobs[2]])
        layers = self.r.execute_command("SSM.PREFIX.LAYERS", "multi")
        self.assertEqual(layers, [x for layer in range(5) for x in (layer, 1000 * layer + 1)])
        self.assertEqual(self.r.execute_command("SSM.PREFIX.DROP", "multi", 2), b"OK")
        self.assertIsNone(self.r.execute_command("SSM.PREFIX.FETCH", "multi", 2))
        self.assertEqual(self.r.execute_command("SSM.PREFIX.DROP", "multi"), b"OK")
        self.assertEqual(self.r.execute_command("SSM.PREFIX.MFETCH", "multi", 0, 1),
                         [None, None])
        self.assertEqual(self.r.execute_command("SSM.PREFIX.LAYERS", "multi"), [])

    def test_errors_raise_response_error(self):
        with self.assertRaises(redis.exceptions.ResponseError) as ctx:
            self.r.execute_command("SSM.PREFIX.FETCH", "s", "-1")
        self.assertEqual(str(ctx.exception),
                         "invalid layer '-1': must be an integer from 0 to 2147483647")
        with self.assertRaises(redis.exceptions.ResponseError) as ctx:
            self.r.execute_command("NO.SUCH.COMMAND", "a")
        self.assertIn("unknown command 'NO.SUCH.COMMAND'", str(ctx.exception))

    def test_pipeline(self):
        blobs = [random_blob(self.rng, self.rng.randrange(0, 70_000)) for _ in range(50)]
        pipe = self.r.pipeline(transaction=False)
        for i, blob in enumerate(blobs):
            pipe.execute_command("SSM.PREFIX.STORE", "pipe", i, blob)
        for i in range(len(blobs)):
            pipe.execute_command("SSM.PREFIX.FETCH", "pipe", i)
        pipe.ping()
        results = pipe.execute()
        self.assertEqual(results[:50], [b"OK"] * 50)
        self.assertEqual(results[50:100], blobs)
        self.assertTrue(results[100])

    def test_ping_echo_info(self):
        self.assertTrue(self.r.ping())
        self.assertEqual(self.r.echo(b"hello\x00world"), b"hello\x00world")
        info = self.r.info()
        self.assertIsInstance(info, dict)
        self.assertIn("redis_version", info)
        self.assertIn("connected_clients", info)
        self.assertGreaterEqual(int(info["connected_clients"]), 1)
        server = self.r.info("server")
        self.assertIn("redis_version", server)
        self.assertNotIn("connected_clients", server)
        self.assertIsInstance(self.r.dbsize(), int)

    def test_generic_key_commands(self):
        # redis-py's own helpers for the generic commands, on prefixd's typed keys.
        self.r.execute_command("SSM.PREFIX.STORE", "gk:a", 0, b"x")
        self.r.execute_command("SSM.PREFIX.STORE", "gk:b", 0, b"y")
        self.assertEqual(self.r.type("gk:a"), b"ssm-prefix")
        self.assertEqual(self.r.exists("gk:a", "gk:b", "gk:none"), 2)
        self.assertTrue(self.r.expire("gk:a", 100))
        self.assertFalse(self.r.expire("gk:a", 200, nx=True))
        self.assertTrue(0 < self.r.ttl("gk:a") <= 100)
        self.assertTrue(self.r.persist("gk:a"))
        self.assertEqual(self.r.ttl("gk:a"), -1)
        self.assertEqual(sorted(self.r.scan_iter(match="gk:*", count=1)), [b"gk:a", b"gk:b"])
        self.assertEqual(sorted(self.r.keys("gk:*")), [b"gk:a", b"gk:b"])
        self.assertEqual(self.r.delete("gk:a", "gk:b"), 2)
        self.assertEqual(self.r.exists("gk:a"), 0)

    def test_client_name(self):
        self.assertIsNone(self.r.client_getname())
        self.assertTrue(self.r.client_setname("py-client"))
        name = self.r.client_getname()
        self.assertEqual(name.decode() if isinstance(name, bytes) else name, "py-client")
        self.assertIsInstance(self.r.client_id(), int)
        names = [c.get("name") for c in self.r.client_list()]
        self.assertIn("py-client", names)
        with self.assertRaises(redis.exceptions.ResponseError):
            self.r.client_setname("has space")

    def test_config_get_set(self):
        self.assertEqual(self.r.config_get("maxclients"), {"maxclients": "10000"})
        self.assertTrue(self.r.config_set("timeout", 7))
        self.assertEqual(self.r.config_get("timeout"), {"timeout": "7"})
        self.assertTrue(self.r.config_set("timeout", 0))
        with self.assertRaises(redis.exceptions.ResponseError):
            self.r.config_set("no-such-setting", 1)

    def test_decode_responses_client(self):
        r = redis.Redis(host="127.0.0.1", port=self.server.port, decode_responses=True)
        try:
            r.execute_command("SSM.PREFIX.STORE", "text", 0, "héllo")
            self.assertEqual(r.execute_command("SSM.PREFIX.FETCH", "text", 0), "héllo")
        finally:
            r.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
