#!/usr/bin/python3
"""maxmemory bounds the process, not only the stores: with an eviction policy and a stream of
large values, the server's RSS stays within 1.1x of maxmemory plus the fixed overhead it starts
with (docs/cache-design.md, "What maxmemory counts"). Arguments being read count against the
budget (as Redis counts its query buffers), and the buffer pool keeps no more free regions than
a tenth of the budget. The server is $PREFIXD_SERVER. Run with /usr/bin/python3.
"""

import os
import sys
import tempfile
import time
import unittest

try:
    import redis
except ImportError:  # pragma: no cover - depends on the machine
    print("python3-redis is not installed for this interpreter; run with /usr/bin/python3",
          file=sys.stderr)
    sys.exit(1)

from prefixd_server import start_server, stop_server

MIB = 1 << 20
BUDGET = 64 * MIB
# What the server holds besides data at start (binary, thread stacks, io buffers) is measured;
# this covers the allocator's own slack on top of it.
SLACK = 8 * MIB


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class MemoryBudgetTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="prefixd-budget-")
        self.proc, self.port = start_server(self.root, flags=[
            "--appendonly", "no", "--maxmemory", str(BUDGET),
            "--maxmemory-policy", "allkeys-lru"])
        self.r = redis.Redis(port=self.port, socket_timeout=30)
        time.sleep(0.2)
        self.base = rss(self.proc.pid)

    def tearDown(self):
        self.r.close()
        stop_server(self, self.proc, self.root)

    def bound(self):
        return self.base + BUDGET * 11 // 10 + SLACK

    def check_stream(self, store, size, count):
        peak = 0
        values = [os.urandom(size) for _ in range(4)]
        for i in range(count):
            store("key:%04d" % i, values[i % 4])
            peak = max(peak, rss(self.proc.pid))
        info = self.r.info("memory")
        self.assertLessEqual(info["used_memory"], BUDGET + size)
        self.assertGreater(info["used_memory"], BUDGET // 2)
        self.assertGreater(self.r.info("stats")["evicted_keys"], 0)
        self.assertLessEqual(peak, self.bound(),
                             "peak RSS %.1f MiB, bound %.1f MiB (start %.1f MiB)" %
                             (peak / MIB, self.bound() / MIB, self.base / MIB))
        # The last value is whole.
        last = count - 1
        self.assertEqual(bytes(self.fetch("key:%04d" % last)), values[last % 4])

    def test_strings_of_4_mib(self):
        self.fetch = self.r.get
        self.check_stream(self.r.set, 4 * MIB, 96)

    def test_sessions_of_16_mib(self):
        self.fetch = lambda key: self.r.execute_command("SSM.PREFIX.FETCH", key, 0)
        self.check_stream(
            lambda key, value: self.r.execute_command("SSM.PREFIX.STORE", key, 0, value),
            16 * MIB, 24)

    def test_budget_lowered_at_run_time_trims_the_pool(self):
        for i in range(12):
            self.r.set("key:%d" % i, os.urandom(4 * MIB))
        self.r.execute_command("FLUSHALL")
        self.assertEqual(self.r.config_set("maxmemory", str(16 * MIB)), True)
        self.assertLessEqual(self.r.info("memory")["buffer_pool_free_bytes"], 16 * MIB // 10)


if __name__ == "__main__":
    unittest.main()
