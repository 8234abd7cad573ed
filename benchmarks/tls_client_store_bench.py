#!/usr/bin/python3
"""16 MiB SET and GET over TLS from the clients users have, prefixd against redis-server.

    /usr/bin/python3 benchmarks/tls_client_store_bench.py [--build-dir build/dev] [--reps 5]
                                                           [--requests 20] [--size-mib 16]

Starts build/dev/prefixd-server (--appendonly no) and Debian's redis-server (--save '') in one
run, both with a TLS port (certificates from tests/integration/tls/make_certs.sh,
tls-auth-clients no, OpenSSL's defaults), then times, per rep and server (the order alternating
each rep): redis-py with ssl (Debian's python3-redis, 4.3.4 here; one connection, `--requests`
SETs of one value, then as many GETs, each checked), and redis-cli --tls (`-x SET` of the value
read from a file, `--requests` times in one process with -r). Prints the median GB/s of each as a
markdown table; writes nothing else. The machine and load are the caller's to report.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, certs, what):
    for _ in range(100):
        try:
            if client(port, certs).ping():
                return
        except (redis.exceptions.ConnectionError, OSError):
            time.sleep(0.1)
    sys.exit(f"{what} did not answer on TLS port {port}")


def client(port, certs):
    return redis.Redis(host="127.0.0.1", port=port, ssl=True,
                       ssl_ca_certs=os.path.join(certs, "ca.crt"), ssl_cert_reqs="required",
                       socket_timeout=60)


def redis_py(port, certs, value, requests):
    """GB/s of `requests` SETs, then of as many GETs, on one connection."""
    c = client(port, certs)
    c.set("warm", value)  # the handshake and first buffers outside the timing
    start = time.perf_counter()
    for i in range(requests):
        c.set(f"k{i % 2}", value)
    set_s = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(requests):
        if c.get(f"k{i % 2}") != value:
            sys.exit("GET returned another value")
    get_s = time.perf_counter() - start
    c.close()
    total = len(value) * requests / 1e9
    return total / set_s, total / get_s


def redis_cli(port, certs, path, size, requests):
    """GB/s of `requests` `SET k <file>` from one redis-cli --tls process (connect included)."""
    cmd = ["redis-cli", "--tls", "--cacert", os.path.join(certs, "ca.crt"), "-h", "127.0.0.1",
           "-p", str(port), "-r", str(requests), "-x", "SET", "cli"]
    with open(path, "rb") as stdin:
        start = time.perf_counter()
        out = subprocess.run(cmd, stdin=stdin, capture_output=True, check=True)
        seconds = time.perf_counter() - start
    if out.stdout.count(b"OK") != requests:
        sys.exit(f"redis-cli answered {out.stdout[:200]!r}")
    return size * requests / 1e9 / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build/dev"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--size-mib", type=int, default=16)
    args = ap.parse_args()
    size = args.size_mib << 20
    work = tempfile.mkdtemp(prefix="prefixd-tls-client-bench.")
    procs = []
    try:
        certs = os.path.join(work, "certs")
        subprocess.run([os.path.join(REPO, "tests/integration/tls/make_certs.sh"), certs],
                       check=True)
        tls = ["--tls-cert-file", os.path.join(certs, "server.crt"), "--tls-key-file",
               os.path.join(certs, "server.key"), "--tls-ca-cert-file",
               os.path.join(certs, "ca.crt"), "--tls-auth-clients", "no"]
        ports = {}
        for name in ("prefixd", "redis"):
            plain, tls_port = free_port(), free_port()
            ports[name] = tls_port
            data = os.path.join(work, name)
            os.makedirs(data)
            if name == "prefixd":
                cmd = [os.path.join(args.build_dir, "prefixd-server"), "--dir", data,
                       "--appendonly", "no", "--loglevel", "warning"]
            else:
                cmd = ["redis-server", "--dir", data, "--save", "", "--appendonly", "no",
                       "--proto-max-bulk-len", "1gb", "--loglevel", "warning"]
            cmd += ["--bind", "127.0.0.1", "--port", str(plain), "--tls-port", str(tls_port)]
            log = open(os.path.join(work, name + ".log"), "w")
            procs.append(subprocess.Popen(cmd + tls, stdout=log, stderr=log))
        for name, port in ports.items():
            wait_ready(port, certs, name)
        value = os.urandom(size)
        path = os.path.join(work, "value")
        with open(path, "wb") as f:
            f.write(value)
        results = {name: {"set": [], "get": [], "cli": []} for name in ports}
        for rep in range(args.reps):
            order = list(ports) if rep % 2 == 0 else list(reversed(list(ports)))
            for name in order:
                set_gbs, get_gbs = redis_py(ports[name], certs, value, args.requests)
                results[name]["set"].append(set_gbs)
                results[name]["get"].append(get_gbs)
                results[name]["cli"].append(
                    redis_cli(ports[name], certs, path, size, args.requests))
        print(f"| {args.size_mib} MiB over TLS, {args.reps} reps x {args.requests} requests "
              "(median GB/s) | prefixd | redis-server | prefixd/redis |")
        print("|---|---:|---:|---:|")
        for key, what in (("set", "redis-py SET"), ("get", "redis-py GET"),
                          ("cli", "redis-cli --tls -x SET")):
            p = statistics.median(results["prefixd"][key])
            r = statistics.median(results["redis"][key])
            print(f"| {what} | {p:.3f} | {r:.3f} | {p / r:.2f}x |")
        for key in ("set", "get", "cli"):
            for name in ports:
                runs = " ".join(f"{x:.3f}" for x in results[name][key])
                print(f"<!-- {name} {key}: {runs} -->")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
