#!/usr/bin/python3
"""Memory per entry: prefixd-server vs redis-server, small and large entries (docs/benchmarks.md).

Starts each server (no persistence, loopback, random port), reads its RSS, stores N entries
(pipelined, 1000 per batch), reads RSS again and prints (RSS after - RSS before) / N:

  small: a 13-byte key with one 64-byte value   (prefixd: SSM.PREFIX.STORE <sid> 0 <v>;
                                                 redis: SET <key> <v>)
  string: the same with SET on both, and with a 28-byte value (LMCache's metadata)
  expiring string: SET <key> <64-byte value> EX 100000 on both
  large: a 13-byte key with one 1 MiB value

Usage, from the repository root after building prefixd-server:
  /usr/bin/python3 benchmarks/entry_cost.py [--small 200000] [--large 200]
      [--prefixd build/dev/prefixd-server]
"""
import argparse
import os
import tempfile
import time

import redis

from bench_util import rss_bytes, start_server, stop_server


def measure(argv, store, count, value):
    proc, port = start_server(argv)
    client = redis.Redis(port=port)
    try:
        time.sleep(0.2)
        before = rss_bytes(proc.pid)
        pipe = client.pipeline(transaction=False)
        for i in range(count):
            store(pipe, f"sess:{i:08d}", value)  # 13 bytes
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()
        time.sleep(0.2)
        after = rss_bytes(proc.pid)
        return (after - before) / count
    finally:
        stop_server(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=200000)
    ap.add_argument("--large", type=int, default=200)
    ap.add_argument("--prefixd", default="build/dev/prefixd-server")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prefixd = [args.prefixd, "--appendonly", "no", "--dir", tmp]
        redis_argv = ["redis-server", "--save", "", "--appendonly", "no", "--dir", tmp]

        def ssm(pipe, key, value):
            pipe.execute_command("SSM.PREFIX.STORE", key, 0, value)

        def setter(pipe, key, value):
            pipe.set(key, value)

        def setter_ex(pipe, key, value):
            pipe.set(key, value, ex=100000)

        print("| entry | prefixd bytes/entry | redis-server bytes/entry | ratio |")
        print("|---|---:|---:|---:|")
        for name, count, size, store, redis_store in (
                ("13-byte key, 64-byte value", args.small, 64, ssm, setter),
                ("13-byte key, 64-byte string (SET)", args.small, 64, setter, setter),
                ("13-byte key, 64-byte string (SET ... EX)", args.small, 64, setter_ex, setter_ex),
                ("13-byte key, 28-byte string (SET)", args.small, 28, setter, setter),
                ("13-byte key, 1 MiB value", args.large, 1 << 20, ssm, setter),
                ("13-byte key, 1 MiB string (SET)", args.large, 1 << 20, setter, setter)):
            value = os.urandom(size)
            p = measure(prefixd, store, count, value)
            r = measure(redis_argv, redis_store, count, value)
            print(f"| {name} (x{count}) | {p:.0f} | {r:.0f} | {p / r:.2f} |")


if __name__ == "__main__":
    main()
