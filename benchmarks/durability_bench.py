#!/usr/bin/python3
"""Durability benchmark: prefixd vs redis-server, both persisting every write.

For each appendfsync policy (always, everysec, no) it measures store throughput of 1 MiB and
16 MiB blobs with 1 and 4 clients, against redis-server with `appendonly yes` and the same
appendfsync, alternating the two servers and taking medians. Then it measures restart time:
both servers load about 1 GiB of stored blobs from their data directory after a SIGKILL.
Figures go to stdout and, unless --no-write, to the "Durability" section of docs/benchmarks.md.

  benchmarks/durability_bench.py [--build-dir build/dev] [--reps 3] [--quick] [--no-write]
"""
import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench_util import free_port, wait_ready, write_doc_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION = "## Durability: prefixd vs redis-server (appendonly yes)"


class Server:
    def __init__(self, kind, binary, policy, data_dir):
        self.kind, self.binary, self.policy, self.dir = kind, binary, policy, data_dir
        self.port = free_port()
        self.proc = None

    def start(self):
        if self.kind == "prefixd":
            cmd = [self.binary, "--port", str(self.port), "--dir", self.dir,
                   "--appendfsync", self.policy, "--io-threads", "2", "--loglevel", "warning"]
        else:
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                   "--dir", self.dir, "--save", "", "--appendonly", "yes",
                   "--appendfsync", self.policy, "--proto-max-bulk-len", "1gb",
                   "--loglevel", "warning"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return wait_ready(self.port)

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def bench(blob_bench, server, size, clients, requests):
    out = subprocess.run(
        [blob_bench, "--mode", server.kind, "--port", str(server.port), "--size", size,
         "--clients", str(clients), "--requests", str(requests), "--seconds", "60",
         "--verify", "first-last"],
        capture_output=True, text=True, timeout=300, check=True).stdout
    for line in out.splitlines():
        row = json.loads(line)
        if row["op"] == "store":
            if not row.get("verified", True):
                raise RuntimeError("fetched bytes differ from stored bytes")
            return row
    raise RuntimeError("no store row in: " + out)


def throughput(args, blob_bench, prefixd_bin):
    sizes = [("1m", 1, 200 if not args.quick else 40), ("1m", 4, 400 if not args.quick else 80),
             ("16m", 1, 24 if not args.quick else 8), ("16m", 4, 48 if not args.quick else 16)]
    rows = []
    for policy in ["always", "everysec", "no"]:
        for size, clients, requests in sizes:
            results = {"prefixd": [], "redis": []}
            for rep in range(args.reps):
                for kind in ["prefixd", "redis"]:
                    d = tempfile.mkdtemp(prefix=f"dur-{kind}-", dir=args.scratch)
                    server = Server(kind, prefixd_bin, policy, d)
                    server.start()
                    try:
                        results[kind].append(bench(blob_bench, server, size, clients, requests))
                    finally:
                        server.stop()
                        shutil.rmtree(d, ignore_errors=True)
            p = statistics.median(r["gb_per_s"] for r in results["prefixd"])
            r = statistics.median(r["gb_per_s"] for r in results["redis"])
            pp50 = statistics.median(r_["p50_ms"] for r_ in results["prefixd"])
            rp50 = statistics.median(r_["p50_ms"] for r_ in results["redis"])
            rows.append((policy, size, clients, p, r, p / r if r else float("inf"), pp50, rp50))
            print(f"{policy:8} {size:>4} x{clients}: prefixd {p:.3f} GB/s, redis {r:.3f} GB/s, "
                  f"ratio {p / r:.2f}", flush=True)
    return rows


def recovery(args, blob_bench, prefixd_bin):
    total = (1 << 30) if not args.quick else (256 << 20)
    blob = 16 << 20
    rows = []
    for kind in ["prefixd", "redis"]:
        d = tempfile.mkdtemp(prefix=f"rec-{kind}-", dir=args.scratch)
        server = Server(kind, prefixd_bin, "everysec", d)
        server.start()
        # Distinct keys, so the data set really is `total` bytes.
        subprocess.run([blob_bench, "--mode", kind, "--port", str(server.port), "--size", "16m",
                        "--clients", str(total // blob), "--requests", str(total // blob),
                        "--verify", "none", "--key", "rec"],
                       capture_output=True, text=True, timeout=600, check=True)
        time.sleep(1.5)  # let everysec reach the disk
        server.stop(signal.SIGKILL)
        on_disk = sum(os.path.getsize(os.path.join(dp, f))
                      for dp, _, fs in os.walk(d) for f in fs)
        subprocess.run(["sync"], check=False)
        seconds = server.start()
        server.stop()
        shutil.rmtree(d, ignore_errors=True)
        rows.append((kind, total, on_disk, seconds))
        print(f"recovery {kind}: {total / 2**30:.2f} GiB stored, {on_disk / 1e9:.2f} GB on disk, "
              f"ready after {seconds:.2f} s", flush=True)
    return rows


def render(tp, rec, command):
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = m.group(1) if m else cpu
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    lines = [SECTION, "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} "
             f"cores ({cpu}), kernel {platform.release()}, commit {commit}, load average "
             f"{os.getloadavg()[0]:.1f}. Command: `{command}`.", "",
             "Both servers persist every write to their data directory with the same "
             "`appendfsync`; redis-server 7.0 runs with `appendonly yes` and no RDB saves. "
             "Stores through `prefixd-blob-bench` (raw sockets); medians of alternating runs. "
             "A store is acknowledged only once its record is written (and, under `always`, "
             "fsynced) in both servers.", "",
             "| appendfsync | blob | clients | prefixd GB/s | redis GB/s | prefixd/redis | "
             "prefixd p50 ms | redis p50 ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for policy, size, clients, p, r, ratio, pp50, rp50 in tp:
        lines.append(f"| {policy} | {size.upper()}iB | {clients} | {p:.3f} | {r:.3f} | "
                     f"**{ratio:.2f}×** | {pp50:.2f} | {rp50:.2f} |")
    lines += ["", "Restart after SIGKILL (16 MiB blobs, `everysec`): time from start until the "
              "server answers PING, which both do only once their data is loaded.", "",
              "| server | stored | on disk | ready after | seconds per GB stored |",
              "|---|---:|---:|---:|---:|"]
    for kind, total, on_disk, seconds in rec:
        lines.append(f"| {kind} | {total / 2**30:.2f} GiB | {on_disk / 1e9:.2f} GB | "
                     f"{seconds:.2f} s | {seconds / (total / 1e9):.2f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "dev"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--scratch", default=None, help="where the data directories go")
    args = ap.parse_args()
    if args.quick:
        args.reps = 1
    prefixd_bin = os.path.join(args.build_dir, "prefixd-server")
    blob_bench = os.path.join(args.build_dir, "prefixd-blob-bench")
    if not os.path.exists(blob_bench):
        blob_bench = os.path.join(args.build_dir, "benchmarks", "prefixd-blob-bench")
    for b in (prefixd_bin, blob_bench):
        if not os.access(b, os.X_OK):
            sys.exit(f"missing {b}: build prefixd-server and prefixd-blob-bench first")
    tp = throughput(args, blob_bench, prefixd_bin)
    rec = recovery(args, blob_bench, prefixd_bin)
    text = render(tp, rec, "benchmarks/durability_bench.py " + " ".join(sys.argv[1:]))
    print()
    print(text)
    if not args.no_write:
        write_doc_section(SECTION, text)


if __name__ == "__main__":
    main()
