"""Cluster throughput and the cost of a redirect, side by side in one run.

1. Aggregate SSM.PREFIX.STORE + FETCH throughput of C client processes over one prefixd node and
   over three cluster nodes (each client routing by the session id's slot from CLUSTER SLOTS),
   same blobs, same time. On a machine with fewer cores than nodes + clients the nodes share cores: the ratio shows
   the routing's overhead, not the scale-out a node per machine gives.
2. A 64 MB store sent to the wrong node (answered -MOVED before its body is taken in; the body is
   dropped as it arrives) then to the right one, against the same store sent to the right node
   directly: the redirect's cost in time, and the wrong node's RSS growth (none is the point).

Run: /usr/bin/python3 benchmarks/cluster_bench.py [--server build/release/prefixd-server]
     [--seconds 5] [--clients 4] [--blob-kib 1024]
"""

import argparse
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import resp, rss_bytes  # noqa: E402
from prefixd_server import start_cluster, start_server  # noqa: E402

import redis  # noqa: E402
from redis.crc import key_slot  # noqa: E402


class SlotRouter:
    """A cluster client in a few lines: the slot map from CLUSTER SLOTS, one connection per node.
    redis-py 4.3.4's RedisCluster is not used for throughput: it formats every argument into a
    debug string before routing (13 ms per MB stored), which would measure the client."""

    def __init__(self, seed_port):
        self.owner = [None] * 16384
        conns = {}
        for start, end, (_, port, *_), *_ in redis.Redis(port=seed_port).execute_command(
                "CLUSTER", "SLOTS"):
            conn = conns.setdefault(port, redis.Redis(port=port))
            for slot in range(start, end + 1):
                self.owner[slot] = conn

    def execute_command(self, *args):
        return self.owner[key_slot(args[1].encode())].execute_command(*args)


def worker(ports, cluster, seconds, blob_kib, index, out):
    """Stores and fetches blob_kib KiB sessions for `seconds`; puts (operations, bytes)."""
    client = SlotRouter(ports[0]) if cluster else redis.Redis(port=ports[0])
    blob = os.urandom(blob_kib * 1024)
    ops = moved = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sid = "bench-%d-%d" % (index, ops % 64)
        client.execute_command("SSM.PREFIX.STORE", sid, 0, blob)
        got = client.execute_command("SSM.PREFIX.FETCH", sid, 0)
        assert len(got) == len(blob)
        ops += 1
        moved += 2 * len(blob)
    out.put((ops, moved))


def throughput(ports, cluster, args):
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker,
                                     args=(ports, cluster, args.seconds, args.blob_kib, i, out))
             for i in range(args.clients)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    ops = sum(r[0] for r in results)
    return ops / args.seconds, sum(r[1] for r in results) / args.seconds / 1e6


def send_store(port, sid, blob):
    """Sends one SSM.PREFIX.STORE on a fresh socket and returns (reply line, seconds)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        start = time.monotonic()
        s.sendall(resp("SSM.PREFIX.STORE", sid, 0, blob))
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += s.recv(4096)
        return reply.decode().strip(), time.monotonic() - start


def redirect_cost(nodes, blob_mib):
    blob = os.urandom(blob_mib << 20)
    sid = "redirect-probe"
    slot = redis.Redis(port=nodes[0][1]).execute_command("CLUSTER", "KEYSLOT", sid)
    owner = next(port for start, end, (_, port, *_), *_ in
                 redis.Redis(port=nodes[0][1]).execute_command("CLUSTER", "SLOTS")
                 if start <= slot <= end)
    wrong = next((proc, port) for proc, port, _ in nodes if port != owner)
    rows = []
    for _ in range(3):
        before = rss_bytes(wrong[0].pid)
        moved, t_wrong = send_store(wrong[1], sid, blob)
        grown = rss_bytes(wrong[0].pid) - before
        assert moved.startswith("-MOVED"), moved
        ok, t_right = send_store(owner, sid, blob)
        assert ok == "+OK", ok
        _, t_direct = send_store(owner, sid, blob)
        rows.append((t_wrong + t_right, t_direct, grown))
    return min(rows, key=lambda r: r[0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", default="build/release/prefixd-server")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--blob-kib", type=int, default=1024)
    parser.add_argument("--redirect-mib", type=int, default=64)
    args = parser.parse_args()
    os.environ["PREFIXD_SERVER"] = args.server
    root = tempfile.mkdtemp(prefix="prefixd-cluster-bench-")
    try:
        single_root = os.path.join(root, "single")
        os.makedirs(single_root)
        proc, port = start_server(single_root, flags=["--appendonly", "no"])
        one = throughput([port], False, args)
        proc.terminate()
        proc.wait()
        nodes = start_cluster(os.path.join(root, "cluster"), 3, ["--appendonly", "no"])
        three = throughput([nodes[0][1]], True, args)
        via_redirect, direct, grown = redirect_cost(nodes, args.redirect_mib)
        for proc, _, _ in nodes:
            proc.terminate()
            proc.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("machine: %d cores; %d client processes, %d KiB sessions, %.0f s each"
          % (os.cpu_count(), args.clients, args.blob_kib, args.seconds))
    print("| setup | store+fetch pairs/s | MB/s moved | vs 1 node |")
    print("|---|---:|---:|---:|")
    print("| 1 node | %.0f | %.0f | 1.00 |" % one)
    print("| 3 nodes, routed by slot | %.0f | %.0f | %.2f |" % (three + (three[0] / one[0],)))
    print()
    print("| %d MB store | seconds | ratio |" % args.redirect_mib)
    print("|---|---:|---:|")
    print("| to the owner | %.3f | 1.00 |" % direct)
    print("| to another node (-MOVED), then the owner | %.3f | %.2f |"
          % (via_redirect, via_redirect / direct))
    print("| RSS growth of the node that answered -MOVED | %.1f MB | |" % (grown / 1e6))


if __name__ == "__main__":
    main()
