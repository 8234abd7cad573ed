#!/usr/bin/python3
"""Per-connection memory and PING latency under non-reading clients: prefixd vs redis-server.

Against each server, on loopback, one after the other:
  idle      N connections that sent one PING: RSS growth per connection.
  declared  N connections that each declared a 512 MB bulk argument and sent one byte of it.
  closed    RSS 3 s after all of those connections closed, against the RSS before them.
  slowread  4 clients pipeline fetches of a 16 MB value and never read; a fifth client's PING
            latency (p50, p99, max over a bounded number of PINGs) and the server's RSS growth.
  decoded   prefixd only: 2 clients ask for a 4 GiB decoded V.FETCH and never read; RSS growth
            and the slowest PING meanwhile.
Everything is bounded in count and time. Prints a markdown table.

  benchmarks/client_memory_bench.py [--build-dir build/dev] [--conns 1000] [--pings 2000]
"""
import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from bench_util import free_port, resp, rss_bytes, stop_server, wait_ready

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VALUE = 16 << 20


def read_reply(s):
    """Reads one simple/bulk reply (enough for PING, OK, errors and a bulk)."""
    buf = b""
    while b"\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed")
        buf += chunk
    line, _, rest = buf.partition(b"\r\n")
    if line[:1] == b"$" and int(line[1:]) >= 0:
        need = int(line[1:]) + 2 - len(rest)
        while need > 0:
            chunk = s.recv(min(need, 1 << 20))
            if not chunk:
                raise RuntimeError("closed")
            need -= len(chunk)
    return line


class Server:
    def __init__(self, kind, build_dir, workdir):
        self.kind, self.port, self.dir = kind, free_port(), workdir
        if kind == "prefixd":
            cmd = [os.path.join(build_dir, "prefixd-server"), "--port", str(self.port), "--dir",
                   workdir, "--io-threads", "2", "--loglevel", "warning"]
        else:
            cmd = ["redis-server", "--port", str(self.port), "--dir", workdir, "--save", "",
                   "--appendonly", "no", "--maxclients", "20000", "--loglevel", "warning"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(self.port, 20, self.proc)

    def stop(self):
        stop_server(self.proc)

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def store_value(self):
        value = os.urandom(VALUE)
        with self.connect() as s:
            if self.kind == "prefixd":
                s.sendall(resp("SSM.PREFIX.STORE", "big", 0, value))
            else:
                s.sendall(resp("SET", "big", value))
            assert read_reply(s) == b"+OK"

    def fetch_request(self):
        return resp("SSM.PREFIX.FETCH", "big", 0) if self.kind == "prefixd" else resp("GET", "big")

    def declare_request(self):
        args = ["SSM.PREFIX.STORE", "d", 0] if self.kind == "prefixd" else ["SET", "d"]
        head = resp(*args)
        # One more argument than sent: the declared 512 MB one, of which one byte follows.
        count = b"*%d\r\n" % (len(args) + 1)
        return count + head[head.index(b"\r\n") + 2:] + b"$536870912\r\nx"


def settle(pid, seconds=1.0):
    time.sleep(seconds)
    return rss_bytes(pid)


def per_connection(server, n, declare):
    base = settle(server.proc.pid, 0.5)
    conns = []
    for _ in range(n):
        s = server.connect()
        if declare:
            s.sendall(server.declare_request())
        else:
            s.sendall(b"PING\r\n")
            assert read_reply(s) == b"+PONG"
        conns.append(s)
    grown = settle(server.proc.pid) - base
    for s in conns:
        s.close()
    after_close = settle(server.proc.pid, 3.0) - base
    return grown / n, after_close


def ping_under_slow_readers(server, pings):
    server.store_value()
    base = settle(server.proc.pid, 0.5)
    hogs = []
    for _ in range(4):
        s = server.connect()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        request = server.fetch_request() * 16
        try:
            s.send(request)
        except BlockingIOError:
            pass
        hogs.append(s)
    time.sleep(0.5)
    latencies = []
    with server.connect() as p:
        deadline = time.monotonic() + 30
        for _ in range(pings):
            if time.monotonic() > deadline:
                break
            t = time.perf_counter()
            p.sendall(b"PING\r\n")
            assert read_reply(p) == b"+PONG"
            latencies.append(time.perf_counter() - t)
    grown = rss_bytes(server.proc.pid) - base
    for s in hogs:
        s.close()
    latencies.sort()
    q = lambda f: latencies[min(len(latencies) - 1, int(f * len(latencies)))] * 1e3
    return q(0.5), q(0.99), latencies[-1] * 1e3, grown


def decoded_fetch_non_readers(server, pings):
    """prefixd only: 2 clients ask for a 4 GiB decoded V.FETCH and never read (issue 8)."""
    import struct
    with server.connect() as s:
        s.sendall(resp("V.CREATE", "vs", 256, "VQUANT", "fp16"))
        read_reply(s)
        s.sendall(resp("V.STOREBATCH", "vs", 0, 0, 1, struct.pack("<256f", *([0.5] * 256))))
        assert read_reply(s) == b"+OK"
    base = settle(server.proc.pid, 0.5)
    hogs = []
    for _ in range(2):
        h = server.connect()
        h.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        h.sendall(resp("V.FETCH", "vs", 0, "RANGE", 0, 4194304))
        hogs.append(h)
    worst = 0.0
    with server.connect() as p:
        for _ in range(pings):
            t = time.perf_counter()
            p.sendall(b"PING\r\n")
            assert read_reply(p) == b"+PONG"
            worst = max(worst, time.perf_counter() - t)
    grown = rss_bytes(server.proc.pid) - base
    for h in hogs:
        h.close()
    return worst * 1e3, grown


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "dev"))
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--declared", type=int, default=200)
    ap.add_argument("--pings", type=int, default=2000)
    ap.add_argument("--only", choices=["prefixd", "redis"], default=None)
    args = ap.parse_args()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.conns + 100)), hard))
    rows = []
    decoded = None
    for kind in ["prefixd", "redis"]:
        if args.only and kind != args.only:
            continue
        with tempfile.TemporaryDirectory() as d:
            server = Server(kind, args.build_dir, d)
            try:
                idle, idle_closed = per_connection(server, args.conns, declare=False)
                declared, declared_closed = per_connection(server, args.declared, declare=True)
                p50, p99, worst, slow_grown = ping_under_slow_readers(server, args.pings)
                if kind == "prefixd":
                    decoded = decoded_fetch_non_readers(server, args.pings)
            finally:
                server.stop()
        rows.append((kind, idle, idle_closed, declared, declared_closed, p50, p99, worst,
                     slow_grown))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.release()}; "
          f"{args.conns} idle, {args.declared} declared-bulk connections, {args.pings} PINGs")
    print("| server | idle conn | RSS left after idle closed | declared 512 MB bulk, 1 byte sent "
          "| RSS left after those closed | PING p50 / p99 / max with 4 non-readers of 16 MB "
          "| RSS growth with 4 non-readers |")
    print("|---|---|---|---|---|---|---|")
    for kind, idle, ic, dec, dc, p50, p99, worst, grown in rows:
        print(f"| {kind} | {idle / 1024:.1f} KiB | {ic / 1e6:.1f} MB | {dec / 1024:.1f} KiB "
              f"| {dc / 1e6:.1f} MB | {p50:.2f} / {p99:.2f} / {worst:.2f} ms | {grown / 1e6:.1f} MB |")
    if decoded:
        print(f"\nprefixd, 2 clients not reading a 4 GiB decoded `V.FETCH vs 0 RANGE 0 4194304`: "
              f"RSS growth {decoded[1] / 1e6:.1f} MB, slowest of {args.pings} PINGs "
              f"{decoded[0]:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
