#!/usr/bin/env python3
"""A forked program job for the tests: each copy steps its lease out, then averages known
buffers (copy c sends c + 1 and -(c + 1) / 8 at every position, exact in float32) and writes
what came back to <checkpoint dir>/average-r<n>-c<copy>.json, n counting its leases.
Completes once the job's step reaches the total given as argv[1]. With argv[2] = N it
averages one NumPy buffer of N float32 values instead, copy c sending (c + 1) x (i mod 7) at
position i, and records whether every value of the mean is the exact one, (k + 1) / 2 x
(i mod 7) over k copies.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "clients", "python"))
from tessera_client import Lease  # noqa: E402

total = int(sys.argv[1])
floats = int(sys.argv[2]) if len(sys.argv) > 2 else 0
ckpt = os.path.join(os.environ["TESSERA_CHECKPOINT_DIR"], "step.txt")
start = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
lease = Lease(range(start, total), step=start)
dies = os.environ.get("AVERAGE_CHECK_DIE_COPY") == str(lease.copy) and lease.copies > 1 and \
    not os.path.exists(os.path.join(lease.checkpoint_dir, "died-once"))
for step in lease:
    time.sleep(0.002)
    if dies:  # the copy that dies asks at once, so it dies while the others still step
        break
at = start + lease.steps_made
if lease.expired or at < total:
    c = lease.copy
    record = {"copy": c, "copies": lease.copies}
    # AVERAGE_CHECK_DIE_COPY=k: copy k dies while its first average waits (exit 3, once).
    if dies:
        open(os.path.join(lease.checkpoint_dir, "died-once"), "w").close()
        import threading
        threading.Timer(0.3, lambda: os._exit(3)).start()
    if floats:
        import numpy as np
        pattern = (np.arange(floats, dtype=np.int64) % 7).astype(np.float32)
        mean = lease.average([pattern * np.float32(c + 1)])
        want = pattern * np.float32((mean.copies + 1) / 2)
        record.update(floats=floats, exact=bool(np.array_equal(mean[0], want)),
                      head=[float(x) for x in mean[0][:8]])
    else:
        mean = lease.average([[float(c + 1)] * 5, [-(c + 1) / 8.0] * 3])
        record["values"] = [list(map(float, b)) for b in mean]
    at = mean.step
    record.update(averaged_copies=mean.copies, step=at)
    n = len([f for f in os.listdir(lease.checkpoint_dir) if f.startswith("average-")])
    with open(os.path.join(lease.checkpoint_dir, "average-r%d-c%d-%d.json" % (n, c, os.getpid())),
              "w") as f:
        json.dump(record, f)
    if lease.writer:
        with open(ckpt + ".tmp", "w") as f:
            f.write(str(at))
        os.replace(ckpt + ".tmp", ckpt)
if at >= total:
    lease.complete(loss=0.0, accuracy=1.0)
