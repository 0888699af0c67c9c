#!/usr/bin/env python3
"""What the Python lease client costs a program, against tests/clients/fake_node.py (a Python
stand-in for the node: its round trips are not the real node's):
- per item: a Lease over range(N) with an empty body, against a plain loop over range(N);
- overhead on 10 ms steps: S steps of a 10 ms busy body with and without a Lease (no caps),
  median of R runs each;
- report round trip: the time of one report (sent by Lease.report when due), p50/p99.

usage: /usr/bin/python3 bench/lease_client_bench.py [--items N] [--steps S] [--runs R]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from unittest import mock

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "clients"))

from fake_node import FakeNode  # noqa: E402
from tessera_client import Lease  # noqa: E402
from tessera_client import lease as lease_module  # noqa: E402


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def with_lease(sock, body, n):
    """Seconds to run `body` over n items of a Lease served by a fresh fake node."""
    node = FakeNode(sock, {"terms": {}}).start()
    env = {"TESSERA_LEASE": sock, "TESSERA_LEASE_TOKEN": node.token}
    with mock.patch.dict(os.environ, env):
        start = time.perf_counter()
        lease = Lease(range(n))
        for _ in lease:
            body()
        took = time.perf_counter() - start
        lease.complete()
    node.join()
    return took


def plain(body, n):
    start = time.perf_counter()
    for _ in range(n):
        body()
    return time.perf_counter() - start


def round_trips(sock, n):
    """Seconds of n reports (every report due: the interval patched to 0)."""
    node = FakeNode(sock, {"terms": {}}).start()
    env = {"TESSERA_LEASE": sock, "TESSERA_LEASE_TOKEN": node.token}
    out = []
    with mock.patch.dict(os.environ, env), mock.patch.object(lease_module, "REPORT_INTERVAL", 0):
        lease = Lease()
        for _ in range(n):
            start = time.perf_counter()
            lease.report(loss=1.0)
            out.append(time.perf_counter() - start)
        lease.complete()
    node.join()
    return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=200000)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        sock = os.path.join(d, "lease.sock")
        empty = lambda: None  # noqa: E731
        per_item = (with_lease(sock, empty, args.items) - plain(empty, args.items)) / args.items
        print(f"per item: {per_item * 1e6:.2f} us over {args.items} items")
        ten_ms = lambda: busy(0.010)  # noqa: E731
        a = statistics.median(plain(ten_ms, args.steps) for _ in range(args.runs))
        b = statistics.median(with_lease(sock, ten_ms, args.steps) for _ in range(args.runs))
        print(f"10 ms steps: {args.steps} steps plain {a:.3f} s, with a lease {b:.3f} s, "
              f"overhead {100 * (b - a) / a:.2f}% (median of {args.runs})")
        rt = round_trips(sock, 2000)
        print(f"report round trip (fake node): p50 {rt[len(rt) // 2] * 1e6:.0f} us, "
              f"p99 {rt[int(len(rt) * 0.99)] * 1e6:.0f} us over {len(rt)}")


if __name__ == "__main__":
    main()
