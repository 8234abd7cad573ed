#!/usr/bin/python3
"""prefixd over TLS with Python's own ssl module and Debian's python3-redis (ssl=True).

Makes a throwaway PKI with tests/integration/tls/make_certs.sh, starts $PREFIXD_SERVER with a TLS
port that requires client certificates, and checks: redis-py with and without a client
certificate, a raw ssl socket speaking RESP, large values both ways, the server's certificate
chain, and a plain-text client on the TLS port.
Run with Debian's interpreter: /usr/bin/python3 tests/integration/test_tls_python.py
"""

import os
import shutil
import socket
import ssl
import subprocess
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

HERE = os.path.dirname(os.path.abspath(__file__))


sys.path.insert(0, HERE)
from prefixd_server import free_port, said_ready  # noqa: E402


class TlsServer:
    def __init__(self, binary):
        self.root = tempfile.mkdtemp(prefix="prefixd-tls-py-")
        self.certs = os.path.join(self.root, "certs")
        subprocess.run([os.path.join(HERE, "tls", "make_certs.sh"), self.certs], check=True,
                       timeout=60)
        self.binary = binary
        self.port = free_port()
        self.tls_port = free_port()
        self.log_path = os.path.join(self.root, "server.log")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [binary, "--bind", "127.0.0.1", "--port", str(self.port),
                 "--tls-port", str(self.tls_port), "--dir", os.path.join(self.root, "data"),
                 "--tls-cert-file", self.cert("server.crt"),
                 "--tls-key-file", self.cert("server.key"),
                 "--tls-ca-cert-file", self.cert("ca.crt")],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            if not said_ready(self.log_path, 0):
                time.sleep(0.02)
                continue
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("prefixd-server did not start:\n" + self.log())

    def cert(self, name):
        return os.path.join(self.certs, name)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        shutil.rmtree(self.root, ignore_errors=True)
        return code


class TlsPythonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = TlsServer(os.environ.get("PREFIXD_SERVER", "prefixd-server"))

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, "prefixd-server exited with %s" % code

    def client(self, with_cert=True):
        kwargs = dict(host="127.0.0.1", port=self.server.tls_port, ssl=True,
                      ssl_ca_certs=self.server.cert("ca.crt"), ssl_cert_reqs="required",
                      socket_timeout=10)
        if with_cert:
            kwargs.update(ssl_certfile=self.server.cert("client.crt"),
                          ssl_keyfile=self.server.cert("client.key"))
        return redis.Redis(**kwargs)

    def test_redis_py_with_client_certificate(self):
        r = self.client()
        self.assertTrue(r.ping())
        blob = os.urandom(3 * 1024 * 1024 + 5)
        self.assertEqual(r.execute_command("SSM.PREFIX.STORE", "py", 0, blob), b"OK")
        self.assertEqual(r.execute_command("SSM.PREFIX.FETCH", "py", 0), blob)
        # Pipelined small requests.
        pipe = r.pipeline(transaction=False)
        for i in range(200):
            pipe.execute_command("SSM.PREFIX.STORE", "py", i + 1, b"v%d" % i)
        self.assertEqual(pipe.execute(), [b"OK"] * 200)
        self.assertEqual(r.execute_command("SSM.PREFIX.FETCH", "py", 150), b"v149")

    def test_redis_py_without_certificate_is_refused(self):
        with self.assertRaises((redis.ConnectionError, ssl.SSLError, OSError)):
            self.client(with_cert=False).ping()

    def test_raw_ssl_socket(self):
        context = ssl.create_default_context(cafile=self.server.cert("ca.crt"))
        context.load_cert_chain(self.server.cert("client.crt"), self.server.cert("client.key"))
        with socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as s:
                self.assertIn(s.version(), ("TLSv1.2", "TLSv1.3"))
                subject = dict(x[0] for x in s.getpeercert()["subject"])
                self.assertEqual(subject["commonName"], "server")
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                self.assertEqual(s.recv(64), b"+PONG\r\n")
                s.sendall(b"PING\r\nPING\r\n")  # inline requests, two in one record
                got = b""
                while len(got) < 14:
                    got += s.recv(64)
                self.assertEqual(got, b"+PONG\r\n+PONG\r\n")

    def test_monitor_over_tls_gets_lines_between_its_own_replies(self):
        # MONITOR's lines are written while the connection waits to read: over TLS both go
        # through one session, and must interleave without corrupting a record.
        context = ssl.create_default_context(cafile=self.server.cert("ca.crt"))
        context.load_cert_chain(self.server.cert("client.crt"), self.server.cert("client.key"))
        with socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"MONITOR\r\n")
                self.assertEqual(s.recv(64), b"+OK\r\n")
                other = self.client()
                for i in range(50):
                    other.echo("line%d" % i)
                got = b""
                while got.count(b"\r\n") < 50:
                    got += s.recv(65536)
                lines = got.split(b"\r\n")[:50]
                for i, line in enumerate(lines):
                    self.assertTrue(line.startswith(b"+"), line)
                    self.assertTrue(line.endswith(b'"ECHO" "line%d"' % i), line)
                s.sendall(b"PING\r\n")  # its own reply still comes, after the pushed lines
                self.assertEqual(s.recv(64), b"+PONG\r\n")

    def test_plain_text_on_the_tls_port_is_dropped(self):
        with socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=5) as s:
            s.sendall(b"PING\r\n")
            try:
                data = s.recv(64)
            except ConnectionResetError:
                data = b""
            self.assertNotIn(b"PONG", data)
        self.assertTrue(self.client().ping())


if __name__ == "__main__":
    unittest.main()
