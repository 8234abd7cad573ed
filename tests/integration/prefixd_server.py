"""Starts the prefixd-server under test ($PREFIXD_SERVER) for the python integration tests."""

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import redis


def free_port():
    """A free loopback port below the kernel's ephemeral range (32768 and up by default), where no
    client connection's own port lands; random, so parallel test processes rarely pick the same
    one. A port taken anyway shows when the server's bind fails (start_server tries another)."""
    for _ in range(64):
        port = random.randrange(10000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free loopback port in 10000-31999")


def log_size(log_path):
    try:
        return os.path.getsize(log_path)
    except OSError:
        return 0


def said_ready(log_path, since):
    """Whether the server logging to `log_path` wrote that it is ready after byte `since`. Until it
    has, whatever answers on its port is someone else's: the port was taken between picking and
    binding it, and this server is about to fail its bind."""
    try:
        with open(log_path, "rb") as f:
            f.seek(since)
            return b"Ready to accept connections" in f.read()
    except OSError:
        return False


def start_server(root, port=None, flags=()):
    """Starts prefixd with its data in root/data and its log in root/server.log, on `port` or a
    free one (a few tries, in case another process takes the port first); returns (process,
    port) once it says it is ready and answers PING."""
    binary = os.environ.get("PREFIXD_SERVER", "build/prefixd-server")
    log_path = os.path.join(root, "server.log")
    for _ in range(5):
        if port is None:
            port = free_port()
        since = log_size(log_path)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--dir",
                                     os.path.join(root, "data")] + list(flags),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            if not said_ready(log_path, since):
                time.sleep(0.02)
                continue
            try:
                if redis.Redis(port=port, socket_timeout=1).ping():
                    return proc, port
            except redis.ConnectionError:
                time.sleep(0.05)
        proc.kill()
        proc.wait()
        port = None
    raise RuntimeError("prefixd-server did not start")


def stop_server(test, proc, root):
    """Stops a server start_server started, asserting a clean exit, and removes its root."""
    proc.terminate()
    try:
        test.assertEqual(proc.wait(timeout=10), 0)
    finally:
        shutil.rmtree(root, ignore_errors=True)


class ServerTestCase(unittest.TestCase):
    """One server per test with DEBUG enabled, its data in a fresh directory named from `prefix`
    (`flags` added to its command line), and a redis-py client `r`; restart() stops it cleanly and
    starts it again on the same data directory and port."""

    flags = ["--io-threads", "2", "--enable-debug-command", "yes"]
    prefix = "prefixd-py-"

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix=self.prefix)
        self.proc, self.port = start_server(self.root, flags=self.flags)
        self.r = redis.Redis(port=self.port, socket_timeout=10)

    def tearDown(self):
        self.r.close()
        stop_server(self, self.proc, self.root)

    def restart(self):
        self.r.close()
        self.proc.terminate()
        self.assertEqual(self.proc.wait(timeout=10), 0)
        self.proc, self.port = start_server(self.root, self.port, self.flags)
        self.r = redis.Redis(port=self.port, socket_timeout=10)

    def error(self, *args):
        """The text of the error reply `args` get (fails when there is none)."""
        with self.assertRaises(redis.ResponseError) as caught:
            self.r.execute_command(*args)
        return str(caught.exception)


def start_cluster(root, nodes=3, flags=()):
    """Starts `nodes` cluster-enabled prefixd servers under root/node-N, each with a nodes.conf
    naming all of them and an equal share of the 16384 slots; returns [(process, port, id)]."""
    ports = []
    while len(ports) < nodes:
        port = free_port()
        if port not in ports:
            ports.append(port)
    ids = ["%039x%x" % (0, i + 1) for i in range(nodes)]
    bounds = [16384 * i // nodes for i in range(nodes + 1)]
    started = []
    for i in range(nodes):
        data = os.path.join(root, "node-%d" % i, "data")
        os.makedirs(data)
        with open(os.path.join(data, "nodes.conf"), "w") as conf:
            for j in range(nodes):
                role = "myself,master" if i == j else "master"
                conf.write("%s 127.0.0.1:%d@0 %s - 0 0 %d connected %d-%d\n"
                           % (ids[j], ports[j], role, j + 1, bounds[j], bounds[j + 1] - 1))
            conf.write("vars currentEpoch %d lastVoteEpoch 0\n" % nodes)
        proc, _ = start_server(os.path.join(root, "node-%d" % i), ports[i],
                               ["--cluster-enabled", "yes", "--io-threads", "1"] + list(flags))
        started.append((proc, ports[i], ids[i]))
    return started
