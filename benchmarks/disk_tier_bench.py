#!/usr/bin/python3
"""The disk tier's benchmark (docs/benchmarks.md, "Disk tier").

1. Fetch speed. prefixd-server runs with appendonly yes and a small maxmemory under
   allkeys-lru; --sessions sessions of --layers layers of --layer-mb MiB are stored, so all but
   the last few go cold (their bytes stay in the log). The page cache is dropped
   (/proc/sys/vm/drop_caches, as root), then every cold session is fetched whole with
   SSM.PREFIX.MFETCH by 1 and by --clients concurrent clients, each byte checked. The figure is
   payload bytes per second, set against the disk's sequential read speed measured on the same
   files (`dd bs=4M` after dropping the cache) and with O_DIRECT.
   With --vstore the sessions are V-store sessions instead (fp16, value_dim --dim, one
   V.STOREBATCH of --layer-mb MiB per layer, FMT F16), fetched whole layer by layer with
   `V.FETCH sid L RANGE 0 rows FMT NATIVE` (the stored bytes, every layer's request pipelined
   in one write), each byte of the first and last 4 KiB checked.
2. Restart time. The same data directory after SAVE (its cold sessions flagged in the snapshot)
   is started three ways: as is (cold set on disk, hot set in memory), from a directory holding
   only the hot set, and with maxmemory 0 (everything loaded), timing start to first PING.

With --client build/dev/prefixd-cold-fetch every fetch pass is made by that C++ client instead
of Python threads (the same requests over --clients connections, the same bytes checked, the
middle of each value dropped in the kernel unread), so the figure is the server's path: a
Python client spends about as much CPU per byte as the server does.

Loopback only; the server is stopped at the end. Needs root for dropping the page cache
(otherwise the fetch figures are from the page cache, and say so). Usage (repository root):

  /usr/bin/python3 benchmarks/disk_tier_bench.py [--server build/dev/prefixd-server]
      [--sessions 96] [--layers 4] [--layer-mb 4] [--maxmemory-mb 64] [--clients 4]
      [--io-threads 0] [--dir /var/tmp/prefixd-disk-tier-bench] [--vstore [--dim 1024]]
      [--client build/dev/prefixd-cold-fetch]
"""
import argparse
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import threading
import time

from bench_util import resp


class Client:
    """A minimal RESP client that reads bulk replies straight into preallocated buffers."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        out = bytearray(n)
        view = memoryview(out)
        have = min(n, len(self.buf))
        view[:have] = self.buf[:have]
        self.buf = self.buf[have:]
        while have < n:
            got = self.sock.recv_into(view[have:], n - have)
            if got == 0:
                raise ConnectionError("closed")
            have += got
        return out

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self._exact(n + 2)
            return bytes(data[:n]) if n < 4096 else memoryview(data)[:n]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        if kind == b":":
            return int(rest)
        if kind == b"-":
            raise RuntimeError(rest.decode())
        return rest.decode()

    def call(self, *args):
        self.sock.sendall(resp(*args))
        return self.reply()


def layer_value(session, layer, size):
    # Cheap, distinct per (session, layer), checkable: a repeated 4 KiB random block.
    rng = random.Random(session * 1009 + layer)
    block = rng.randbytes(4096)
    return (block * (size // 4096 + 1))[:size]


IO_THREADS = 0
VSTORE_DIM = 0  # 0: SSM sessions; else V-store sessions of this value_dim (fp16)
CLIENT = None  # the C++ fetch client (prefixd-cold-fetch), or None: Python threads
CLIENT_CPU = []  # the C++ client's CPU seconds per pass, in order


def store_session(c, s, layers, layer_bytes):
    if not VSTORE_DIM:
        c.call("SSM.PREFIX.MSTORE", "s%d" % s,
               *[x for layer in range(layers) for x in (layer, layer_value(s, layer, layer_bytes))])
        return
    c.call("V.CREATE", "s%d" % s, VSTORE_DIM, "VQUANT", "fp16")
    rows = layer_bytes // (2 * VSTORE_DIM)
    for layer in range(layers):
        c.call("V.STOREBATCH", "s%d" % s, layer, 0, rows, layer_value(s, layer, layer_bytes),
               "FMT", "F16")


def fetch_session(c, sid, layers, layer_bytes):
    if not VSTORE_DIM:
        return c.call("SSM.PREFIX.MFETCH", "s%d" % sid, *range(layers))
    rows = layer_bytes // (2 * VSTORE_DIM)
    c.sock.sendall(b"".join(resp("V.FETCH", "s%d" % sid, layer, "RANGE", 0, rows, "FMT",
                                 "NATIVE") for layer in range(layers)))
    return [c.reply() for _ in range(layers)]


def start(server, port, data_dir, maxmemory_mb, log):
    t0 = time.monotonic()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--dir",
                             data_dir, "--appendonly", "yes", "--maxmemory",
                             "%dmb" % maxmemory_mb, "--maxmemory-policy", "allkeys-lru",
                             "--auto-aof-rewrite-percentage", "0",
                             "--io-threads", str(IO_THREADS)],
                            stdout=log, stderr=subprocess.STDOUT)
    while True:
        try:
            c = Client(port)
            if c.call("PING") == "PONG":
                return proc, c, time.monotonic() - t0
        except (ConnectionError, OSError, RuntimeError):
            time.sleep(0.005)
        if proc.poll() is not None:
            raise SystemExit("server exited; see its log")


def stop(proc):
    proc.terminate()
    proc.wait(timeout=60)


def info(c, section):
    text = c.call("INFO", section)
    return dict(line.split(":", 1) for line in text.decode().split("\r\n") if ":" in line)


def drop_cache():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return True
    except OSError:
        return False


def dd_speed(paths, direct):
    total, seconds = 0, 0.0
    for p in paths:
        drop_cache()
        flags = ["iflag=direct"] if direct else []
        t0 = time.monotonic()
        subprocess.run(["dd", "if=" + p, "of=/dev/null", "bs=4M"] + flags, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds += time.monotonic() - t0
        total += os.path.getsize(p)
    return total / seconds


def fetch_all_native(port, sids, layers, layer_bytes, clients):
    # One record per job: the session number, then each layer's expected 4 KiB block.
    jobs = b"".join(struct.pack("<I", sid) + b"".join(layer_value(sid, layer, 4096)
                                                      for layer in range(layers))
                    for sid in sids)
    path = "/dev/shm/prefixd-cold-fetch-jobs-%d" % os.getpid()
    with open(path, "wb") as f:
        f.write(jobs)
    try:
        cmd = [CLIENT, "--port", str(port), "--jobs", path, "--layers", str(layers),
               "--layer-bytes", str(layer_bytes), "--clients", str(clients)]
        if VSTORE_DIM:
            cmd += ["--vstore-dim", str(VSTORE_DIM)]
        done = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        os.unlink(path)
    if done.returncode != 0:
        raise SystemExit("prefixd-cold-fetch failed: %s %s" % (done.stdout, done.stderr))
    result = json.loads(done.stdout)
    CLIENT_CPU.append(result["cpu_seconds"])
    return result["bytes"] / result["seconds"]


def fetch_all(port, sids, layers, layer_bytes, clients):
    if CLIENT:
        return fetch_all_native(port, sids, layers, layer_bytes, clients)
    queue = list(sids)
    lock = threading.Lock()
    errors = []

    def work():
        c = Client(port)
        while True:
            with lock:
                if not queue:
                    return
                sid = queue.pop()
            got = fetch_session(c, sid, layers, layer_bytes)
            for layer, v in enumerate(got):
                # The value repeats one 4 KiB block: its first and last blocks are checked.
                block = layer_value(sid, layer, 4096)
                if v is None or len(v) != layer_bytes or bytes(v[:4096]) != block or \
                        bytes(v[-4096:]) != block:
                    errors.append((sid, layer))

    t0 = time.monotonic()
    threads = [threading.Thread(target=work) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - t0
    if errors:
        raise SystemExit("wrong bytes for %s" % errors[:5])
    return len(sids) * layers * layer_bytes / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="build/dev/prefixd-server")
    ap.add_argument("--sessions", type=int, default=96)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--layer-mb", type=int, default=4)
    ap.add_argument("--maxmemory-mb", type=int, default=64)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--dir", default="/var/tmp/prefixd-disk-tier-bench")
    ap.add_argument("--io-threads", type=int, default=0, help="0: the server's default")
    ap.add_argument("--vstore", action="store_true", help="V-store sessions instead of SSM")
    ap.add_argument("--dim", type=int, default=1024, help="--vstore: value_dim (fp16 rows)")
    ap.add_argument("--client", help="the C++ fetch client (build/dev/prefixd-cold-fetch)")
    ap.add_argument("--restart-only", action="store_true",
                    help="skip the fetch passes: store, then time the restarts (large data sets)")
    args = ap.parse_args()
    global IO_THREADS, VSTORE_DIM, CLIENT
    IO_THREADS = args.io_threads
    CLIENT = args.client
    VSTORE_DIM = args.dim if args.vstore else 0
    layer_bytes = args.layer_mb << 20
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    data = os.path.join(args.dir, "data")
    log = open(os.path.join(args.dir, "server.log"), "ab")
    port = random.randint(20000, 60000)

    proc, c, _ = start(args.server, port, data, args.maxmemory_mb, log)
    for s in range(args.sessions):
        store_session(c, s, args.layers, layer_bytes)
    tier = info(c, "disktier")
    cold_sids = [s for s in range(args.sessions)]
    # The cold ones: everything but the newest few (LRU keeps the newest hot).
    hot_guess = int(tier["cold_keys"])
    cold_sids = cold_sids[:hot_guess]
    fetch_session(c, len(cold_sids), 1, 4096)  # warm the connection path
    tier = info(c, "disktier")
    hot_sids = [s for s in range(len(cold_sids), args.sessions)]
    if args.restart_only:
        # The last cold and hot sessions only: enough to check the bytes, not to time reads.
        fetch_all(port, cold_sids[-1:] + hot_sids[-1:], args.layers, layer_bytes, 1)
    else:
        hot = fetch_all(port, hot_sids * 16, args.layers, layer_bytes, args.clients)
        tier_hot = info(c, "disktier")
        if tier_hot["cold_hits"] != tier["cold_hits"]:
            print("warning: the hot pass read from disk")
        warm = fetch_all(port, cold_sids, args.layers, layer_bytes, args.clients)
        dropped = drop_cache()
        one = fetch_all(port, cold_sids, args.layers, layer_bytes, 1)
        drop_cache()
        many = fetch_all(port, cold_sids, args.layers, layer_bytes, args.clients)
        tier_after = info(c, "disktier")
    stop(proc)
    # Restart from the log alone: every record is read (and checksummed), then what is past
    # maxmemory goes back to disk.
    drop_cache()
    proc, c, from_log = start(args.server, port, data, args.maxmemory_mb, log)
    rec_log = info(c, "persistence")
    c.call("SAVE")
    segments = [os.path.join(data, n) for n in os.listdir(data) if n.endswith(".pds")]
    dd_cached = dd_speed(segments, direct=False)
    dd_direct = dd_speed(segments, direct=True)
    stop(proc)

    cold_gb = int(tier["cold_bytes"]) / 1e9
    print("machine: %d cores, %s; load average %.1f" % (os.cpu_count(), os.uname().release,
                                                        os.getloadavg()[0]))
    print("kind: %s; client: %s" % ("V-store sessions, fp16, value_dim %d" % VSTORE_DIM
                                     if VSTORE_DIM else "SSM sessions",
                                     CLIENT or "Python threads"))
    print("stored: %d sessions x %d layers x %d MiB = %.2f GB; maxmemory %d MiB; cold %s keys, "
          "%.2f GB" % (args.sessions, args.layers, args.layer_mb,
                       args.sessions * args.layers * layer_bytes / 1e9, args.maxmemory_mb,
                       tier["cold_keys"], cold_gb))
    if args.restart_only:
        dropped = drop_cache()
        print("dd bs=4M of the snapshot, cache dropped: %.2f GB/s; O_DIRECT: %.2f GB/s" %
              (dd_cached / 1e9, dd_direct / 1e9))
    else:
        print_fetches(args, dropped, one, many, warm, hot, dd_cached, dd_direct, tier_after)
    restarts(args, port, data, log, tier, from_log, rec_log, cold_gb)
    shutil.rmtree(args.dir, ignore_errors=True)


def print_fetches(args, dropped, one, many, warm, hot, dd_cached, dd_direct, tier_after):
    print("page cache dropped before each pass: %s" % ("yes" if dropped else "NO (not root)"))
    dd_best = max(dd_cached, dd_direct)
    print("cold fetch, 1 client:  %.2f GB/s (%.0f %% of the better dd)" % (one / 1e9,
                                                                          100 * one / dd_best))
    print("cold fetch, %d clients: %.2f GB/s (%.0f %% of the better dd)" %
          (args.clients, many / 1e9, 100 * many / dd_best))
    print("cold fetch, %d clients, page cache not dropped: %.2f GB/s" % (args.clients,
                                                                          warm / 1e9))
    print("hot fetch (in memory), %d clients: %.2f GB/s" % (args.clients, hot / 1e9))
    print("dd bs=4M of the snapshot, cache dropped: %.2f GB/s; O_DIRECT: %.2f GB/s" %
          (dd_cached / 1e9, dd_direct / 1e9))
    print("promotions during the fetches: %s; bytes read from disk: %.2f GB" %
          (tier_after["cold_promotions"], int(tier_after["cold_bytes_read"]) / 1e9))


def restarts(args, port, data, log, tier, from_log, rec_log, cold_gb):
    layer_bytes = args.layer_mb << 20

    # Restart from the snapshot: its cold sessions are not read; vs a directory of the hot set.
    drop_cache()
    proc, c, with_cold = start(args.server, port, data, args.maxmemory_mb, log)
    rec = info(c, "persistence")
    mem = info(c, "memory")
    stop(proc)
    hot_dir = os.path.join(args.dir, "hot-only")
    proc, c, _ = start(args.server, port, hot_dir, args.maxmemory_mb, log)
    hot_sessions = args.sessions - int(tier["cold_keys"])
    for s in range(hot_sessions):
        store_session(c, s, args.layers, layer_bytes)
    c.call("SAVE")
    stop(proc)
    drop_cache()
    proc, c, hot_only = start(args.server, port, hot_dir, args.maxmemory_mb, log)
    stop(proc)
    print("restart from the snapshot, %.2f GB cold + %d MiB hot: %.3f s to first PING "
          "(read %.1f MB, used_memory %.1f MB)" % (cold_gb, args.maxmemory_mb, with_cold,
                                                   int(rec["recovered_bytes"]) / 1e6,
                                                   int(mem["used_memory"]) / 1e6))
    print("restart, a directory of the hot set alone (%d sessions): %.3f s" % (hot_sessions,
                                                                             hot_only))
    print("restart from the log alone (every record read, %.1f MB): %.3f s" %
          (int(rec_log["recovered_bytes"]) / 1e6, from_log))


if __name__ == "__main__":
    main()
