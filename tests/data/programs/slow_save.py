#!/usr/bin/env python3
"""A warm program job for the tests whose checkpoint takes a while: it steps every 2 ms from
the step in <checkpoint dir>/step.txt, saves (sleeping argv[2] seconds first, then writing
atomically) whenever should_checkpoint() and after its loop when the lease's end was not
saved, and appends "START END" to <checkpoint dir>/ran.txt for the steps each process made.
Completes once the job's step reaches argv[1]. A process that starts from an older state
than the one its predecessor reached shows as overlapping ranges in ran.txt.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "clients", "python"))
from tessera_client import Lease  # noqa: E402

total, delay = int(sys.argv[1]), float(sys.argv[2])
ckpt = os.path.join(os.environ["TESSERA_CHECKPOINT_DIR"], "step.txt")
start = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
lease = Lease(range(start, total), step=start, renew=True)


def save():
    time.sleep(delay)
    if lease.writer:
        with open(ckpt + ".tmp", "w") as f:
            f.write(str(lease.position))
        os.replace(ckpt + ".tmp", ckpt)


for _ in lease:
    time.sleep(0.002)
    if lease.should_checkpoint():
        save()
if not lease.should_checkpoint():
    save()
with open(os.path.join(lease.checkpoint_dir, "ran.txt"), "a") as f:
    f.write(f"{start} {lease.position}\n")
if lease.position >= total:
    lease.complete()
