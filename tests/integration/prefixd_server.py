"""Starts the prefixd-server under test ($PREFIXD_SERVER) for the python integration tests."""

import os
import socket
import subprocess
import time

import redis


def start_server(root, port=None):
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
                                     os.path.join(root, "data")],
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
