#!/usr/bin/python3
"""Hostile-client soak: runs the attacks of issue 8 against one prefixd-server for N minutes
while a well-behaved client measures PING latency, and reports PING p50/p99 and the server's RSS
over time. Not part of CI (it runs for minutes); loopback only; every attack is bounded.

  scripts/hostile-soak.py --minutes 5 [--server build/dev/prefixd-server] [--interval 10]
                          [--tls] [--as-limit 4g] [--nofile 1024] [--csv out.csv]

Attacks (each in its own thread, looping until the deadline):
  flood      opens connections past maxclients, holds them briefly, closes them
  slowloris  sends requests one byte at a time and stalls
  bigbulk    declares a 512 MB bulk, sends one byte, holds the connection
  nonreader  pulls 16 MB values and never reads the replies
  throwing   MFETCH of 40,000 copied layers (throws under --as-limit), then PING
  garbage    random bytes and malformed RESP
  config     CONFIG SET with out-of-range, duplicate and protected values
  kill       CLIENT KILL of everyone but itself, in a loop
  tls        (with --tls) plain text and half-finished handshakes on the TLS port
The server runs with --maxclients 256 and, with --tls, a TLS port (certificates from
tests/integration/tls/make_certs.sh). Exit status 1 if the server died or a PING ever went
unanswered for 5 s.
"""

import argparse
import os
import random
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
from bench_util import free_port, resp  # noqa: E402


def connect(port, timeout=2.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class Soak:
    def __init__(self, args):
        self.args = args
        self.deadline = time.monotonic() + args.minutes * 60
        self.stop = threading.Event()
        self.counts = {}
        self.lock = threading.Lock()
        self.root = tempfile.mkdtemp(prefix="prefixd-hostile-")
        self.port = free_port()
        self.tls_port = free_port() if args.tls else 0

    def count(self, name, n=1):
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + n

    def start_server(self):
        cmd = []
        if self.args.as_limit or self.args.nofile:
            cmd = ["prlimit"]
            if self.args.as_limit:
                cmd.append("--as=%d" % parse_size(self.args.as_limit))
            if self.args.nofile:
                cmd.append("--nofile=%d:%d" % (self.args.nofile, self.args.nofile))
            cmd.append("--")
        cmd += [self.args.server, "--port", str(self.port), "--dir", os.path.join(self.root, "data"),
                "--maxclients", "256", "--appendonly", "no", "--loglevel", "notice"]
        if self.args.tls:
            certs = os.path.join(self.root, "certs")
            subprocess.run([os.path.join(REPO, "tests/integration/tls/make_certs.sh"), certs],
                           check=True)
            cmd += ["--tls-port", str(self.tls_port), "--tls-auth-clients", "no",
                    "--tls-cert-file", os.path.join(certs, "server.crt"),
                    "--tls-key-file", os.path.join(certs, "server.key")]
        self.log_path = os.path.join(self.root, "server.log")
        self.proc = subprocess.Popen(cmd, stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                with connect(self.port) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("server did not start:\n" + open(self.log_path).read()[-3000:])

    def store(self, sid, value):
        # Retried: the CLIENT KILL attack may cut any connection, this one included.
        while self.running():
            try:
                with connect(self.port, 30) as s:
                    s.sendall(resp("SSM.PREFIX.STORE", sid, 0, value))
                    if s.recv(16).startswith(b"+OK"):
                        return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def running(self):
        return not self.stop.is_set() and time.monotonic() < self.deadline

    # --- attacks -------------------------------------------------------------------------------
    def flood(self):
        while self.running():
            held = []
            for _ in range(300):
                try:
                    held.append(connect(self.port, 1))
                except OSError:
                    self.count("flood_connect_failed")
            time.sleep(0.5)
            for s in held:
                s.close()
            self.count("flood_rounds")

    def slowloris(self):
        while self.running():
            try:
                with connect(self.port) as s:
                    for b in resp("SSM.PREFIX.STORE", "slow", 0, b"x" * 64)[:40]:
                        if not self.running():
                            break
                        s.sendall(bytes([b]))
                        time.sleep(0.05)
            except OSError:
                pass
            self.count("slowloris")

    def bigbulk(self):
        held = []
        while self.running():
            try:
                s = connect(self.port)
                s.sendall(b"*4\r\n$16\r\nSSM.PREFIX.STORE\r\n$3\r\nbig\r\n$1\r\n0\r\n$536870912\r\nx")
                held.append(s)
                self.count("bigbulk_held")
            except OSError:
                self.count("bigbulk_refused")
            if len(held) >= 50:
                held.pop(0).close()
            time.sleep(0.1)
        for s in held:
            s.close()

    def nonreader(self):
        if not self.store("huge", os.urandom(16 << 20)):
            return
        while self.running():
            try:
                s = connect(self.port)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(resp("SSM.PREFIX.FETCH", "huge", 0) * 4)
                time.sleep(3)
                s.close()
                self.count("nonreader")
            except OSError:
                self.count("nonreader_failed")

    def throwing(self):
        if not self.store("amp", b"y" * 16000):
            return
        request = resp("SSM.PREFIX.MFETCH", "amp", *([0] * 40000))
        while self.running():
            try:
                with connect(self.port, 60) as s:
                    s.sendall(request)
                    first = s.recv(64)
                    self.count("throwing_oom" if first.startswith(b"-OOM") else "throwing_other")
            except OSError:
                self.count("throwing_failed")
            time.sleep(1)

    def garbage(self):
        rng = random.Random(7)
        samples = [b"*-5\r\n", b"$9999999999999\r\n", b"*3\r\n$3\r\nSET\r\n", b"\x00\xff" * 100,
                   b"*1\r\n$-2\r\n", b"*2\r\n$4\r\nPING\r\n$5\r\nab\r\n"]
        while self.running():
            try:
                with connect(self.port) as s:
                    s.sendall(rng.choice(samples) + bytes(rng.getrandbits(8) for _ in range(64)))
                    s.settimeout(0.5)
                    try:
                        s.recv(4096)
                    except OSError:
                        pass
                self.count("garbage")
            except OSError:
                self.count("garbage_refused")

    def config(self):
        bad = [("timeout", "9223372036854776"), ("maxclients", "0"), ("maxmemory", "-1"),
               ("vstore-max-tokens", "1099511627776"), ("dir", "/"), ("tls-cert-file", "/etc/passwd")]
        while self.running():
            try:
                with connect(self.port) as s:
                    name, value = random.choice(bad)
                    s.sendall(resp("CONFIG", "SET", name, value))
                    reply = s.recv(512)
                    if reply.startswith(b"+"):
                        self.count("config_ACCEPTED")
                    else:  # an error, or killed by the CLIENT KILL attack
                        self.count("config_refused" if reply else "config_killed")
                    s.sendall(resp("CONFIG", "SET", "maxmemory", 1, "maxmemory", 2))
                    s.recv(512)
            except OSError:
                self.count("config_failed")
            time.sleep(0.05)

    def kill(self):
        while self.running():
            try:
                with connect(self.port) as s:
                    for _ in range(20):
                        s.sendall(resp("CLIENT", "KILL", "SKIPME", "yes"))
                        s.recv(64)
                        time.sleep(0.2)
                self.count("kill_rounds")
            except OSError:
                self.count("kill_failed")

    def tls(self):
        while self.running():
            try:
                with connect(self.tls_port) as s:
                    s.sendall(b"PING\r\n")
                    s.settimeout(1)
                    try:
                        s.recv(64)
                    except OSError:
                        pass
                with connect(self.tls_port) as s:
                    s.sendall(b"\x16\x03\x01\x00\xa0\x01")  # the start of a ClientHello, then silence
                    time.sleep(0.5)
                self.count("tls_bad")
            except OSError:
                self.count("tls_refused")

    # --- the well-behaved client -----------------------------------------------------------------
    def measure(self, rows):
        conn = None
        window, worst_gap = [], 0.0
        next_report = time.monotonic() + self.args.interval
        start = time.monotonic()
        while self.running():
            t0 = time.monotonic()
            try:
                if conn is None:
                    conn = connect(self.port, 5)
                    conn.settimeout(5)
                conn.sendall(b"PING\r\n")
                if not conn.recv(16).startswith(b"+PONG"):
                    raise OSError("bad reply")
                window.append((time.monotonic() - t0) * 1000)
            except OSError:
                # Killed by the CLIENT KILL attack, or no answer within 5 s.
                worst_gap = max(worst_gap, time.monotonic() - t0)
                conn = None
            time.sleep(0.01)
            if time.monotonic() >= next_report:
                window.sort()
                p50 = statistics.median(window) if window else float("nan")
                p99 = window[int(len(window) * 0.99) - 1] if len(window) >= 100 else (
                    window[-1] if window else float("nan"))
                row = (time.monotonic() - start, len(window), p50, p99, rss_kib(self.proc.pid) / 1024)
                rows.append(row)
                print("t=%6.0fs pings=%5d p50=%7.2f ms p99=%8.2f ms rss=%8.1f MiB" % row, flush=True)
                window = []
                next_report += self.args.interval
            if self.proc.poll() is not None:
                print("SERVER EXITED with %s" % self.proc.returncode, flush=True)
                self.stop.set()
        return worst_gap

    def run(self):
        self.start_server()
        attacks = [self.flood, self.slowloris, self.bigbulk, self.nonreader, self.throwing,
                   self.garbage, self.config, self.kill]
        if self.args.tls:
            attacks.append(self.tls)
        threads = [threading.Thread(target=a, daemon=True) for a in attacks]
        for t in threads:
            t.start()
        rows = []
        print("prefixd-server pid %d, port %d%s; %s minutes" % (
            self.proc.pid, self.port, ", TLS %d" % self.tls_port if self.args.tls else "",
            self.args.minutes), flush=True)
        worst_gap = self.measure(rows)
        self.stop.set()
        for t in threads:
            t.join(timeout=10)
        alive = self.proc.poll() is None
        log_size = os.path.getsize(self.log_path)
        if alive:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        print("\nattacks: " + ", ".join("%s=%d" % kv for kv in sorted(self.counts.items())))
        print("server log: %d bytes; longest PING gap %.2f s; exit status %s" % (
            log_size, worst_gap, self.proc.returncode))
        if self.args.csv:
            with open(self.args.csv, "w") as f:
                f.write("seconds,pings,p50_ms,p99_ms,rss_mib\n")
                for r in rows:
                    f.write("%.0f,%d,%.3f,%.3f,%.1f\n" % r)
        ok = alive and self.proc.returncode == 0 and worst_gap < 5 and not self.counts.get(
            "config_ACCEPTED")
        if not ok:
            print("FAILED; log tail:\n" + open(self.log_path, errors="replace").read()[-3000:])
        shutil.rmtree(self.root, ignore_errors=True)
        return 0 if ok else 1


def parse_size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.lower()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=5)
    p.add_argument("--server", default=os.path.join(REPO, "build/dev/prefixd-server"))
    p.add_argument("--interval", type=float, default=10, help="seconds per report line")
    p.add_argument("--tls", action="store_true")
    p.add_argument("--as-limit", default="", help="address-space limit for the server, e.g. 4g")
    p.add_argument("--nofile", type=int, default=0, help="open-files limit for the server")
    p.add_argument("--csv", default="")
    sys.exit(Soak(p.parse_args()).run())


if __name__ == "__main__":
    main()
