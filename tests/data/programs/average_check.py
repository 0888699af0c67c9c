#!/usr/bin/env python3
"""A forked program job for the tests: each copy steps its lease out, then averages known
buffers (copy c sends c + 1 and -(c + 1) / 8 at every position, exact in float32) and writes
what came back to <checkpoint dir>/average-r<n>-c<copy>.json, n counting its leases.
Completes once the job's step reaches the total given as argv[1].
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "clients", "python"))
from tessera_client import Lease  # noqa: E402

total = int(sys.argv[1])
ckpt = os.path.join(os.environ["TESSERA_CHECKPOINT_DIR"], "step.txt")
start = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
lease = Lease(range(start, total), step=start)
for step in lease:
    time.sleep(0.002)
at = start + lease.steps_made
if lease.expired or at < total:
    c = lease.copy
    mean = lease.average([[float(c + 1)] * 5, [-(c + 1) / 8.0] * 3])
    at = mean.step
    n = len([f for f in os.listdir(lease.checkpoint_dir) if f.startswith("average-")])
    with open(os.path.join(lease.checkpoint_dir, "average-r%d-c%d-%d.json" % (n, c, os.getpid())),
              "w") as f:
        json.dump({"copy": c, "copies": lease.copies, "averaged_copies": mean.copies,
                   "values": [list(map(float, b)) for b in mean], "step": at}, f)
    if lease.writer:
        with open(ckpt + ".tmp", "w") as f:
            f.write(str(at))
        os.replace(ckpt + ".tmp", ckpt)
if at >= total:
    lease.complete(loss=0.0, accuracy=1.0)
