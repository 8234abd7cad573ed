#!/usr/bin/python3
"""The cache benchmark's simulation and Redis baseline (docs/benchmarks.md, "Cache: ...").

Runs prefixd-cache-sim (exact whole-session LRU and LFU, and exact per-layer LRU, on
store::EvictionIndex) on a Zipf(0.99) trace of 16-layer sessions of 1-16 MiB whose total is 4x the
budget, then replays the same trace against a real redis-server with `maxmemory <budget>` and each
--redis-policy, every layer its own key, as a client of Redis would store a session:

  request  TOUCH s<id>:l0 .. s<id>:l15   (Redis's read lookup: LRU/LFU updated, no transfer)
           all 16 present: a hit. Some: a partial session (counted as a miss).
  on a miss SET every layer again, one command at a time (no pipelining, so the query buffer
           holds one layer and client memory does not push Redis into extra evictions)

With --prefixd-policy, the same trace also runs against prefixd-server itself (`maxmemory` the
simulation's budget, appendonly no), each session one key:

  request  SSM.PREFIX.LAYERS s<id>   (a read lookup: touched by the policy); 16 layers: a hit,
           none: a miss, some: a partial session (whole-key eviction makes that impossible)
  on a miss SSM.PREFIX.MSTORE of all 16 layers in one command

and each server's RSS is sampled every 50 requests (the peak against its maxmemory is reported).

Loopback only; redis-server runs without persistence on a random port and is stopped at the end.
Prints a markdown table. Usage (from the repository root, after building prefixd-cache-sim):

  /usr/bin/python3 benchmarks/cache_sim.py [--budget-mb 128] [--requests 4000] [--seed 1]
      [--sim build/dev/prefixd-cache-sim] [--redis-policy allkeys-lru --redis-policy ...]
      [--prefixd build/dev/prefixd-server --prefixd-policy allkeys-lru ...]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import redis

from bench_util import rss_bytes, start_server


def start_redis(budget_mb, policy, workdir):
    proc, port = start_server(
        ["redis-server", "--save", "", "--appendonly", "no", "--dir", workdir,
         "--maxmemory", f"{budget_mb}mb", "--maxmemory-policy", policy])
    return proc, redis.Redis(port=port)


def replay(client, pid, layers, layer_bytes, requests):
    values = {size: os.urandom(size) for size in set(layer_bytes)}
    hits = partial = 0
    peak_rss = 0
    for n, s in enumerate(requests):
        keys = [f"s{s}:l{l}" for l in range(layers)]
        present = client.execute_command("TOUCH", *keys)
        if n % 50 == 0:
            peak_rss = max(peak_rss, rss_bytes(pid))
        if present == layers:
            hits += 1
            continue
        if present:
            partial += 1
        value = values[layer_bytes[s]]
        for key in keys:
            client.set(key, value)
    return hits, partial, peak_rss


def start_prefixd(binary, budget_bytes, policy, workdir):
    proc, port = start_server(
        [binary, "--appendonly", "no", "--dir", workdir, "--maxmemory", str(budget_bytes),
         "--maxmemory-policy", policy])
    return proc, redis.Redis(port=port)


def replay_prefixd(client, pid, layers, layer_bytes, requests):
    values = {size: os.urandom(size) for size in set(layer_bytes)}
    hits = partial = 0
    peak_rss = 0
    for n, s in enumerate(requests):
        sid = f"s{s}"
        present = len(client.execute_command("SSM.PREFIX.LAYERS", sid)) // 2
        if n % 50 == 0:
            peak_rss = max(peak_rss, rss_bytes(pid))
        if present == layers:
            hits += 1
            continue
        if present:
            partial += 1
        value = values[layer_bytes[s]]
        args = []
        for l in range(layers):
            args += [l, value]
        client.execute_command("SSM.PREFIX.MSTORE", sid, *args)
    return hits, partial, peak_rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget-mb", type=int, default=128)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sim", default="build/dev/prefixd-cache-sim")
    ap.add_argument("--redis-policy", action="append")
    ap.add_argument("--prefixd", default="build/dev/prefixd-server")
    ap.add_argument("--prefixd-policy", action="append", default=[])
    args = ap.parse_args()
    policies = args.redis_policy or ["allkeys-lru"]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        trace_file = os.path.join(tmp, "trace.txt")
        reserve = None
        for policy in policies:
            proc, client = start_redis(args.budget_mb, policy, tmp)
            try:
                if reserve is None:
                    # Redis's own memory at start is not room for data: the simulation gets the
                    # same room by having it taken off its budget.
                    reserve = int(client.info("memory")["used_memory"])
                    sim = subprocess.run(
                        [args.sim, "--budget-mb", str(args.budget_mb), "--requests",
                         str(args.requests), "--seed", str(args.seed), "--reserve-bytes",
                         str(reserve), "--trace-out", trace_file],
                        check=True, capture_output=True, text=True)
                    for line in sim.stdout.splitlines():
                        r = json.loads(line)
                        rows.append((f"exact {r['policy']} (simulated)", r["hit_ratio"],
                                     r["partial_ratio"], r["evictions"], None))
                    with open(trace_file) as f:
                        layers = int(f.readline())
                        layer_bytes = [int(x) for x in f.readline().split()]
                        requests = [int(x) for x in f.readline().split()]
                start = time.time()
                hits, partial, peak_rss = replay(client, proc.pid, layers, layer_bytes, requests)
                seconds = time.time() - start
                stats = client.info("stats")
                mem = client.info("memory")
                rows.append((f"redis-server {policy}, per-layer keys", hits / len(requests),
                             partial / len(requests), stats["evicted_keys"],
                             f"{seconds:.0f} s, peak used_memory "
                             f"{mem['used_memory_peak'] / 2**20:.0f} MiB, peak RSS "
                             f"{peak_rss / 2**20:.0f} MiB = "
                             f"{peak_rss / (args.budget_mb << 20):.2f}x maxmemory"))
            finally:
                proc.terminate()
                proc.wait()
        # prefixd gets the simulation's budget: maxmemory less what Redis holds at start.
        budget = (args.budget_mb << 20) - reserve
        for policy in args.prefixd_policy:
            proc, client = start_prefixd(args.prefixd, budget, policy, tmp)
            try:
                start = time.time()
                hits, partial, peak_rss = replay_prefixd(client, proc.pid, layers, layer_bytes,
                                                         requests)
                seconds = time.time() - start
                stats = client.info("stats")
                mem = client.info("memory")
                rows.append((f"prefixd {policy}, whole sessions", hits / len(requests),
                             partial / len(requests), stats["evicted_keys"],
                             f"{seconds:.0f} s, peak used_memory "
                             f"{mem['used_memory_peak'] / 2**20:.0f} MiB, peak RSS "
                             f"{peak_rss / 2**20:.0f} MiB = {peak_rss / budget:.2f}x maxmemory"))
            finally:
                proc.terminate()
                proc.wait()

    total = sum(layer_bytes) * layers
    print(f"Trace: {len(layer_bytes)} sessions of {layers} layers, {total / 2**20:.0f} MiB in all "
          f"({total / (args.budget_mb << 20):.1f}x the {args.budget_mb} MiB budget), "
          f"{len(requests)} Zipf(0.99) requests, seed {args.seed}; "
          f"redis-server used_memory at start {reserve / 2**20:.2f} MiB.\n")
    print("| policy | hit ratio | partial sessions (of requests) | evictions | notes |")
    print("|---|---|---|---|---|")
    for name, hit, part, evicted, note in rows:
        print(f"| {name} | {hit:.3f} | {part:.3f} | {evicted} | {note or ''} |")


if __name__ == "__main__":
    main()
