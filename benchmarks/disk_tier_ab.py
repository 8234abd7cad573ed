#!/usr/bin/python3
"""Cold fetch, server builds side by side (docs/benchmarks.md, "Disk tier").

disk_tier_bench.py stores its data anew for every run, so two builds are compared across
minutes of a shared machine's changing load. This stores once (--sessions sessions of 4 x 4 MiB
layers under maxmemory 64 MiB, SAVE: the cold ones sit in the snapshot), then for --rounds rounds
starts each given build on that same directory in turn, drops the page cache (as root) and
fetches every cold session with SSM.PREFIX.MFETCH by one client (first and last 4 KiB of each
layer checked), and times `dd bs=4M` of the snapshot with the cache dropped just before and just
after each pass. Per run it prints GB/s, the ratio to the mean of those two dd runs, and the CPU
seconds the server and the client used; then each build's medians. Loopback only; every server is stopped.

  sudo /usr/bin/python3 benchmarks/disk_tier_ab.py --servers A,B [--rounds 6] [--sessions 64]
      [--dir /var/tmp/prefixd-disk-tier-ab] [--client build/dev/prefixd-cold-fetch [--clients 1]]
      [--vstore]

With --vstore the sessions are V-store sessions (fp16, value_dim 1024, as disk_tier_bench.py
--vstore) fetched layer by layer with V.FETCH ... RANGE ... FMT NATIVE. With --client the
fetches are made by that C++ client (disk_tier_bench.py --client) over
--clients connections, and its CPU seconds are the client's.
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import time

import disk_tier_bench as bench

LAYERS, LAYER_BYTES, MAXMEMORY_MB = 4, 4 << 20, 64


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(server, data, log):
    for _ in range(5):  # a random port may be taken
        try:
            port = random.randint(20000, 60000)
            proc, client, _ = bench.start(server, port, data, MAXMEMORY_MB, log)
            return port, proc, client
        except SystemExit:
            continue
    raise SystemExit("%s did not start; see its log" % server)


def cold_pass(server, data, log, clients):
    port, proc, client = start(server, data, log)
    cold = int(bench.info(client, "disktier")["cold_keys"])
    bench.drop_cache()
    server_cpu, client_cpu = cpu_seconds(proc.pid), os.times()
    speed = bench.fetch_all(port, list(range(cold)), LAYERS, LAYER_BYTES, clients)
    server_cpu = cpu_seconds(proc.pid) - server_cpu
    after = os.times()
    client_cpu = after.user + after.system - client_cpu.user - client_cpu.system
    if bench.CLIENT:
        client_cpu = bench.CLIENT_CPU[-1]
    bench.stop(proc)
    return speed, server_cpu, client_cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", required=True, help="comma-separated server binaries")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--dir", default="/var/tmp/prefixd-disk-tier-ab")
    ap.add_argument("--client", help="the C++ fetch client (build/dev/prefixd-cold-fetch)")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--vstore", action="store_true", help="V-store sessions instead of SSM")
    args = ap.parse_args()
    bench.CLIENT = args.client
    bench.VSTORE_DIM = 1024 if args.vstore else 0
    servers = args.servers.split(",")
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    data = os.path.join(args.dir, "data")
    log = open(os.path.join(args.dir, "server.log"), "ab")
    port, proc, client = start(servers[0], data, log)
    for s in range(args.sessions):
        bench.store_session(client, s, LAYERS, LAYER_BYTES)
    client.call("SAVE")
    bench.stop(proc)
    snapshot = os.path.join(data, "snapshot.pds")
    ratios = {s: [] for s in servers}
    speeds = {s: [] for s in servers}
    def dd():
        bench.drop_cache()
        t0 = time.monotonic()
        subprocess.run(["dd", "if=" + snapshot, "of=/dev/null", "bs=4M"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return os.path.getsize(snapshot) / (time.monotonic() - t0)

    # The disk is shared and its speed moves within seconds: each pass is set against dd of the
    # same file just before and just after it (their mean).
    dd_after = dd()
    for r in range(args.rounds):
        for s in servers:
            dd_before = dd_after
            speed, server_cpu, client_cpu = cold_pass(s, data, log, args.clients)
            dd_after = dd()
            disk = (dd_before + dd_after) / 2
            speeds[s].append(speed)
            ratios[s].append(speed / disk)
            print("round %d %-40s %.2f GB/s, %3.0f %% of dd (%.2f GB/s: %.2f before, %.2f after); "
                  "cpu server %.2f s, client %.2f s; load %.1f" %
                  (r, s, speed / 1e9, 100 * speed / disk, disk / 1e9, dd_before / 1e9,
                   dd_after / 1e9, server_cpu, client_cpu, os.getloadavg()[0]), flush=True)
    for s in servers:
        print("%-40s median %.2f GB/s, %.0f %% of dd" % (s, statistics.median(speeds[s]) / 1e9,
                                                         100 * statistics.median(ratios[s])))
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
