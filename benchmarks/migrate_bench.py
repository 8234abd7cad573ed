#!/usr/bin/python3
"""MIGRATE benchmark: prefixd vs redis-server, each moving keys to a second server of its kind.

For each value size it stores one string key on the source, runs `MIGRATE host port key 0 60000`
and measures the wall time and how far the source's peak resident memory (VmHWM) rose during it
(redis-server builds the whole DUMP payload and the RESTORE command in memory; prefixd streams
the stored buffer). Then a batch: 100 keys of 1 MiB in one `MIGRATE ... KEYS`. The targets
persist with `appendonly yes`, `appendfsync everysec`; the sources keep no log (so their peak
before MIGRATE is the values alone). Each case runs on fresh servers
(VmHWM only grows); medians of --reps runs. Figures go to stdout and, unless --no-write, to the
"MIGRATE" section of docs/benchmarks.md.

  benchmarks/migrate_bench.py [--build-dir build/dev] [--reps 3] [--no-write]
"""
import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

from bench_util import free_port, resp, wait_ready, write_doc_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "## MIGRATE: prefixd vs redis-server"


def peak_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for pid {pid}")


class Pair:
    """A source and a target server of one kind, in a temporary directory."""

    def __init__(self, kind, binary):
        self.kind, self.binary = kind, binary
        self.root = tempfile.mkdtemp(prefix="prefixd-migrate-bench-")
        self.procs, self.ports = [], []
        # The source keeps no log, so its peak before MIGRATE is the values alone (redis-server
        # copies each SET into its AOF buffer); the target persists what it receives.
        for name, appendonly in (("source", "no"), ("target", "yes")):
            port, data = free_port(), os.path.join(self.root, name)
            os.makedirs(data)
            if kind == "prefixd":
                cmd = [binary, "--port", str(port), "--dir", data, "--appendonly", appendonly,
                       "--appendfsync", "everysec", "--loglevel", "warning"]
            else:
                cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", data,
                       "--save", "", "--appendonly", appendonly, "--appendfsync", "everysec",
                       "--proto-max-bulk-len", "1gb", "--loglevel", "warning"]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_ready(port, 60, proc)
            self.procs.append(proc)
            self.ports.append(port)
        self.conn = socket.create_connection(("127.0.0.1", self.ports[0]))
        self.buffer = b""

    def call(self, *args):
        self.conn.sendall(resp(*args))
        while b"\r\n" not in self.buffer:
            self.buffer += self.conn.recv(65536)
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        if line[:1] in (b"-",):
            raise RuntimeError(line.decode())
        return line

    def close(self):
        self.conn.close()
        for proc in self.procs:
            proc.terminate()
            proc.wait(60)
        shutil.rmtree(self.root, ignore_errors=True)


def one_case(kind, binary, sizes_and_counts):
    """Stores `count` keys of `size` bytes, migrates them in one MIGRATE; (seconds, KiB)."""
    pair = Pair(kind, binary)
    try:
        keys = []
        for i, (size, count) in enumerate(sizes_and_counts):
            value = os.urandom(size)  # incompressible: redis-server's DUMP compresses with LZF
            for j in range(count):
                keys.append(f"k{i}:{j}")
                pair.call("SET", keys[-1], value)
        before = peak_kib(pair.procs[0].pid)
        start = time.monotonic()
        if len(keys) == 1:
            reply = pair.call("MIGRATE", "127.0.0.1", pair.ports[1], keys[0], 0, 60000)
        else:
            reply = pair.call("MIGRATE", "127.0.0.1", pair.ports[1], "", 0, 60000, "KEYS", *keys)
        seconds = time.monotonic() - start
        assert reply == b"+OK", reply
        return seconds, peak_kib(pair.procs[0].pid) - before
    finally:
        pair.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "dev"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    binary = os.path.join(args.build_dir, "prefixd-server")
    cases = [("1 key, 1 MiB", [(1 << 20, 1)]), ("1 key, 64 MiB", [(64 << 20, 1)]),
             ("1 key, 256 MiB", [(256 << 20, 1)]), ("100 keys, 1 MiB each", [(1 << 20, 100)])]
    rows = []
    for name, shape in cases:
        figures = {}
        for kind in ("prefixd", "redis"):
            runs = [one_case(kind, binary, shape) for _ in range(args.reps)]
            figures[kind] = (statistics.median(r[0] for r in runs),
                             statistics.median(r[1] for r in runs))
        p, r = figures["prefixd"], figures["redis"]
        rows.append((name, p[0] * 1e3, r[0] * 1e3, r[0] / p[0], p[1] / 1024, r[1] / 1024))
        print(f"{name}: prefixd {p[0]*1e3:.1f} ms +{p[1]/1024:.1f} MiB peak, "
              f"redis {r[0]*1e3:.1f} ms +{r[1]/1024:.1f} MiB peak", flush=True)
    cpu = platform.processor() or platform.machine()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    lines = [SECTION, "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} "
             f"cores ({cpu}), kernel {platform.release()}, commit {commit}, load average "
             f"{os.getloadavg()[0]:.1f}. Command: `benchmarks/migrate_bench.py --reps "
             f"{args.reps}` (build: {os.path.relpath(args.build_dir, ROOT)}).", "",
             "String keys moved with `MIGRATE` from a source to a target server of the same kind "
             "on loopback; the targets persist (`appendonly yes`, `appendfsync everysec`), the "
             "sources keep no log; values are random bytes (redis-server's DUMP compresses with "
             "LZF); fresh servers per run, medians. *Peak growth* is how far the source's VmHWM rose during the MIGRATE: "
             "redis-server serialises each value into a DUMP payload and copies that into the "
             "RESTORE command before sending; prefixd sends the stored buffer with gather writes "
             "(docs/cluster.md).", "",
             "| keys | prefixd ms | redis ms | redis/prefixd time | prefixd peak growth MiB | "
             "redis peak growth MiB |", "|---|---:|---:|---:|---:|---:|"]
    for name, pms, rms, ratio, pmib, rmib in rows:
        lines.append(f"| {name} | {pms:.1f} | {rms:.1f} | {ratio:.2f} | {pmib:.1f} | {rmib:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        write_doc_section(SECTION, text)


if __name__ == "__main__":
    main()
