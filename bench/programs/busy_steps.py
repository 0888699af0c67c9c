#!/usr/bin/env python3
"""A program of 10 ms steps (a busy loop, no sleeping) for bench/program_overhead.py: steps
through a Lease and writes the wall time of its stepping to argv[2] (JSON). argv[1]: steps."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "clients", "python"))
from tessera_client import Lease  # noqa: E402

steps, out = int(sys.argv[1]), sys.argv[2]
lease = Lease(range(steps))
t0 = time.perf_counter()
for _ in lease:
    end = time.perf_counter() + 0.010
    while time.perf_counter() < end:
        pass
t1 = time.perf_counter()
with open(out, "w") as f:
    json.dump({"steps": lease.steps_made, "seconds": t1 - t0}, f)
if lease.steps_made >= steps or lease.standalone:
    lease.complete()
