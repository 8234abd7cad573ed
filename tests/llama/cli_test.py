#!/usr/bin/env python3
"""prefixd-llama end to end: a real prefixd-server, the saving process (prefixd-llama itself) and
the restoring one it spawns, on synthetic tiny models. `chat` runs each workload and every turn
must restore what earlier turns left (a first turn of multiturn restores nothing), decode logits
bit-identical to a cold run split at the same place and the cold run's 64 greedy tokens; `sweep`
must restore each prefix whole, over TCP, and over the unix socket through the server's shared
arenas and (--no-shm) without them. The CSV and SVG files must be written.

Usage: cli_test.py PATH/TO/prefixd-llama PATH/TO/make_gguf.py ARCH [chat|sweep]
($PREFIXD_SERVER names the server; Debian's python3 with python3-redis runs it.)
"""
import csv
import os
import subprocess
import sys
import tempfile

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from prefixd_server import start_server  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_support import require_numpy  # noqa: E402


def run(cmd, timeout=300):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise AssertionError(f"{' '.join(cmd[:2])} exited {done.returncode}")
    return done


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def check_chat(llama, model, port, d):
    for workload in ("multiturn", "fanout", "branch"):
        out_csv, out_svg = os.path.join(d, f"{workload}.csv"), os.path.join(d, f"{workload}.svg")
        run([llama, "chat", "--model", model, "--port", str(port), "--workload", workload,
             "--turns", "5", "--threads", "1", "--block", "16", "--interval", "64",
             "--system-tokens", "100", "--user-tokens", "40", "--reply-tokens", "24",
             "--seed", str(len(workload)), "--csv", out_csv, "--chart", out_svg])
        table = rows(out_csv)
        assert len(table) == 5, table
        for r in table:
            assert r["states_bitexact"] == "yes", (workload, r)
            assert r["token_agreement"] == "64/64", (workload, r)
            assert int(r["matched_tokens"]) + int(r["prefilled_tokens"]) == int(r["prompt_tokens"])
        # The first turn of a conversation finds nothing; every later one restores what the
        # earlier turns stored, at most all but the last token.
        if workload == "multiturn":
            assert int(table[0]["matched_tokens"]) == 0, table[0]
        for r in table[1:]:
            matched, prompt = int(r["matched_tokens"]), int(r["prompt_tokens"])
            assert 64 <= matched <= prompt - 1, (workload, r)
        if workload == "multiturn":
            # Each turn resumes where the previous prompt ended (its checkpoint before the last
            # token): the previous prompt's length less one.
            for prev, r in zip(table, table[1:]):
                assert int(r["matched_tokens"]) == int(prev["prompt_tokens"]) - 1, (prev, r)
        with open(out_svg) as f:
            assert f.read().startswith("<svg"), out_svg


def check_sweep(llama, model, port, d):
    out_csv, out_svg = os.path.join(d, "sweep.csv"), os.path.join(d, "sweep.svg")
    run([llama, "sweep", "--model", model, "--port", str(port), "--threads", "1", "--block", "32",
         "--interval", "64", "--lengths", "40,200,500", "--csv", out_csv, "--chart", out_svg])
    table = rows(out_csv)
    assert [int(r["prefix_tokens"]) for r in table] == [40, 200, 500], table
    for r in table:
        assert int(r["restored_tokens"]) == int(r["prefix_tokens"]), r
        assert r["states_bitexact"] == "yes" and r["token_agreement"] == "64/64", r
        assert float(r["file_load_ms"]) > 0 and float(r["restore_ms"]) > 0, r
        assert r["transport"] == "socket", r  # TCP: the shared arenas are out of reach
        assert r["save_transport"] == "socket" and float(r["save_ms"]) > 0, r
    with open(out_svg) as f:
        assert f.read().startswith("<svg"), out_svg
    # On the unix socket of a server with shared arenas the warm process restores through them
    # and the cold one saves through memfds (SHM.CALL) by itself, and with --no-shm both go over
    # the socket: the same states either way.
    sock = os.path.join(d, "prefixd.sock")
    for extra, transport in (([], "shm"), (["--no-shm"], "socket")):
        # An empty server, so that the saves store (the runs before stored the same prefixes).
        redis.Redis(port=port, socket_timeout=5).flushall()
        out_csv = os.path.join(d, f"sweep-{transport}.csv")
        run([llama, "sweep", "--model", model, "--socket", sock, "--threads", "1", "--block", "32",
             "--interval", "64", "--lengths", "40,200", "--csv", out_csv] + extra)
        for r in rows(out_csv):
            assert int(r["restored_tokens"]) == int(r["prefix_tokens"]), r
            assert r["states_bitexact"] == "yes" and r["token_agreement"] == "64/64", r
            assert r["transport"] == transport and r["save_transport"] == transport, r


def main():
    llama, make_gguf, arch, what = sys.argv[1:5]
    require_numpy()  # the models are written with it
    with tempfile.TemporaryDirectory(prefix=f"prefixd-llama-cli-{arch}-") as d:
        model = os.path.join(d, f"{arch}.gguf")
        run(["/usr/bin/python3", make_gguf, "--arch", arch, "--shape", "tiny", "--seed", "1",
             "--out", model])
        server, port = start_server(d, flags=("--unixsocket", os.path.join(d, "prefixd.sock"),
                                              "--shm-arenas", "yes"))
        try:
            (check_chat if what == "chat" else check_sweep)(llama, model, port, d)
        finally:
            server.terminate()
            server.wait(timeout=30)
        # The server down: the program says so and fails; it does not hang.
        done = subprocess.run([llama, "sweep", "--model", model, "--port", str(port),
                               "--lengths", "40", "--timeout-ms", "500"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and "prefixd-llama:" in done.stderr, done
    print("ok")


if __name__ == "__main__":
    main()
