#!/usr/bin/python3
"""What a replica's full resynchronisation costs when the data is hashes, sorted sets and streams.

Loads one sorted set of N members, one stream of N entries (two fields each) and N/10 hashes of
10 fields into prefixd, takes its RDB with `redis-cli --rdb` and checks it with redis-check-rdb,
then starts a redis-server on that very file (so both hold the same data). For each server, per
round: a SYNC on one connection while another sends PINGs back to back; prints the longest PING
(the pause the SYNC imposes on every other client), the time to the last byte of the RDB, and its
size. redis-server runs with repl-diskless-sync-delay 0 (its default waits 5 s for more replicas).
Loopback only; everything it starts is stopped at exit. docs/replication.md, "The RDB".

Usage: benchmarks/rdb_sync_bench.py [N (default 200000)] [rounds (default 3)]
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import free_port, resp as command  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.environ.get("PREFIXD_SERVER", os.path.join(REPO, "build/dev/prefixd-server"))


def load_file(path, n):
    with open(path, "wb") as f:
        for first in range(0, n, 1000):
            args = ["ZADD", "zset"]
            for i in range(first, min(first + 1000, n)):
                args += [str(i * 0.5 - n / 4), "member:%d" % i]
            f.write(command(*args))
        for i in range(n):
            f.write(command("XADD", "stream", "%d-%d" % (1 + i // 10, i % 10), "field",
                            "value:%d" % i, "n", str(i)))
        for h in range(n // 10):
            args = ["HSET", "hash:%d" % h]
            for k in range(10):
                args += ["f%d" % k, "v%d" % (h * k)]
            f.write(command(*args))


def wait_up(port):
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(command("PING"))
                if s.recv(64).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("server on %d did not come up" % port)


def read_line(s):
    line = b""
    while not line.endswith(b"\r\n"):
        c = s.recv(1)
        if not c:
            raise RuntimeError("connection closed")
        line += c
    return line


def sync_round(port):
    """(longest PING in s, seconds to the RDB's last byte, RDB bytes)."""
    done = threading.Event()
    longest = [0.0]

    def pinger():
        with socket.create_connection(("127.0.0.1", port)) as s:
            while not done.is_set():
                start = time.perf_counter()
                s.sendall(command("PING"))
                read_line(s)
                longest[0] = max(longest[0], time.perf_counter() - start)

    t = threading.Thread(target=pinger)
    t.start()
    time.sleep(0.05)
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(command("SYNC"))
        header = read_line(s).lstrip(b"\n")  # redis-server's newlines while it prepares
        size = int(header[1:])
        left = size
        while left:
            left -= len(s.recv(min(left, 1 << 20)))
        took = time.perf_counter() - start
    time.sleep(0.05)
    done.set()
    t.join()
    return longest[0], took, size


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    work = tempfile.mkdtemp(prefix="prefixd-rdb-bench.")
    procs = []
    try:
        pp, rp = free_port(), free_port()
        procs.append(subprocess.Popen(
            [SERVER, "--port", str(pp), "--bind", "127.0.0.1", "--appendonly", "no", "--dir",
             os.path.join(work, "prefixd")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_up(pp)
        load = os.path.join(work, "load.resp")
        load_file(load, n)
        with open(load, "rb") as f:
            subprocess.run(["redis-cli", "-p", str(pp), "--pipe"], stdin=f, check=True,
                           stdout=subprocess.DEVNULL)
        rdb = os.path.join(work, "dump.rdb")
        subprocess.run(["redis-cli", "-p", str(pp), "--rdb", rdb], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        check = subprocess.run(["redis-check-rdb", rdb], capture_output=True, text=True)
        if "RDB looks OK" not in check.stdout:
            raise RuntimeError("redis-check-rdb refused prefixd's RDB:\n" + check.stdout)
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(rp), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", work, "--dbfilename", "dump.rdb",
             "--repl-diskless-sync-delay", "0", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_up(rp)
        print("N=%d: zset of %d members, stream of %d entries, %d hashes of 10 fields"
              % (n, n, n, n // 10))
        print("%-13s %5s %16s %18s %12s" % ("server", "round", "longest PING ms", "RDB received ms",
                                             "RDB bytes"))
        for r in range(rounds):
            for name, port in (("prefixd", pp), ("redis-server", rp)):
                longest, took, size = sync_round(port)
                print("%-13s %5d %16.1f %18.1f %12d" % (name, r + 1, longest * 1e3, took * 1e3,
                                                         size))
                time.sleep(0.5)  # redis-server's SYNC child exits and is reaped
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
