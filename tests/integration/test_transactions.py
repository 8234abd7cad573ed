#!/usr/bin/python3
"""Transactions through Debian's python3-redis: pipeline() (MULTI ... EXEC by default), a
queue-time error raising on execute(), the WATCH retry loop of redis-py's transaction() helper
under concurrent clients (no update lost), and WatchError when a watched key changes.

Run with Debian's interpreter: /usr/bin/python3 tests/integration/test_transactions.py
"""

import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefixd_server import start_server, stop_server  # noqa: E402

import redis  # noqa: E402


class TransactionsTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="prefixd-py-txn-")
        self.proc, self.port = start_server(self.root, flags=["--io-threads", "4"])
        self.r = redis.Redis(port=self.port, socket_timeout=10)

    def tearDown(self):
        self.r.close()
        stop_server(self, self.proc, self.root)

    def test_pipeline_is_a_transaction(self):
        pipe = self.r.pipeline()  # transaction=True
        pipe.set("a", "1").incr("a").incrbyfloat("a", 0.5).get("a").get("missing")
        self.assertEqual(pipe.execute(), [True, 2, 2.5, b"2.5", None])

    def test_queue_time_error_aborts(self):
        pipe = self.r.pipeline()
        pipe.set("k", "v")
        pipe.execute_command("SET", "k")  # wrong arity: refused while queueing
        with self.assertRaises(redis.ResponseError) as caught:
            pipe.execute()
        # redis-py reports the queue-time error that made EXEC answer EXECABORT.
        self.assertIn("wrong number of arguments for 'set' command", str(caught.exception))
        self.assertIsNone(self.r.get("k"))

    def test_run_time_error_inside_exec(self):
        self.r.set("s", "text")
        pipe = self.r.pipeline()
        pipe.incr("s").set("t", "after")
        results = pipe.execute(raise_on_error=False)
        self.assertIsInstance(results[0], redis.ResponseError)
        self.assertEqual(results[1], True)
        self.assertEqual(self.r.get("t"), b"after")

    def test_watch_error(self):
        self.r.set("w", "0")
        with self.r.pipeline() as pipe:
            pipe.watch("w")
            other = redis.Redis(port=self.port, socket_timeout=10)
            other.set("w", "changed")
            other.close()
            pipe.multi()
            pipe.set("w", "mine")
            with self.assertRaises(redis.WatchError):
                pipe.execute()
        self.assertEqual(self.r.get("w"), b"changed")

    def test_transaction_helper_under_contention(self):
        clients, adds = 4, 100

        def add_one(pipe):
            value = int(pipe.get("counter") or 0)
            pipe.multi()
            pipe.set("counter", value + 1)

        errors = []

        def worker():
            c = redis.Redis(port=self.port, socket_timeout=10)
            try:
                for _ in range(adds):
                    c.transaction(add_one, "counter")
            except Exception as e:  # reported below: a thread's exception is otherwise lost
                errors.append(e)
            finally:
                c.close()

        threads = [threading.Thread(target=worker) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(int(self.r.get("counter")), clients * adds)


if __name__ == "__main__":
    unittest.main()
