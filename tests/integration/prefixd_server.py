"""Starts the prefixd-server under test ($PREFIXD_SERVER) for the python integration tests."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import redis


def start_server(root, port=None, flags=()):
    """Starts prefixd with its data in root/data and its log in root/server.log, on `port` or a
    free one (a few tries, in case another process takes the port first); returns (process,
    port) once it answers PING."""
    binary = os.environ.get("PREFIXD_SERVER", "build/prefixd-server")
    for _ in range(5):
        if port is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        with open(os.path.join(root, "server.log"), "ab") as log:
            proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--dir",
                                     os.path.join(root, "data")] + list(flags),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
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
    for _ in range(nodes):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
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
