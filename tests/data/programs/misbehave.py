#!/usr/bin/env python3
"""A program job for the tests that speaks the lease protocol by hand (no client library) and
misbehaves on request: tests/mpi/test_program_run.cpp runs it under `tessera run`.

usage: misbehave.py MODE [STEP_SECONDS]
MODE: ok | crash | crash_once | silent | garbage | oversized | version | never | orphan |
      hang_after_lease | stubborn | slow_start (as ok after MISBEHAVE_START seconds, 2 if unset)
      | plain (exits 0 at once without a word to the node, as a script written for torchrun)
Every mode but `never` and `plain` says hello; `ok` steps until its lease ends, writes its step to the
checkpoint directory and exits 0 (complete once the job's total is reached).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

mode = sys.argv[1]
step_seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 0.01
ckpt_dir = os.environ["TESSERA_CHECKPOINT_DIR"]
ckpt = os.path.join(ckpt_dir, "step.txt")


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["TESSERA_LEASE"])
    return s, s.makefile("rb")


def ask(s, f, msg):
    s.sendall((json.dumps(msg) + "\n").encode())
    line = f.readline()
    return json.loads(line) if line else None


if mode == "plain":
    sys.exit(0)

if mode == "never":
    time.sleep(600)
    sys.exit(0)

if mode == "slow_start":
    time.sleep(float(os.environ.get("MISBEHAVE_START", "2")))

own = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
s, f = connect()
lease = ask(s, f, {"v": 2, "op": "hello", "token": os.environ["TESSERA_LEASE_TOKEN"],
                   "pid": os.getpid(), "step": own})
assert lease["op"] == "lease", lease

if mode == "crash_once" and not os.path.exists(os.path.join(ckpt_dir, "crashed")):
    open(os.path.join(ckpt_dir, "crashed"), "w").close()
    mode = "crash"
if mode == "crash":
    print("misbehave: about to fail on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
if mode == "orphan":
    # A child of its own in the same process group, which must not outlive the job.
    subprocess.Popen(["sleep", "997"])
    print("misbehave: left a child behind", file=sys.stderr, flush=True)
    sys.exit(4)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends it
    mode = "silent"
if mode == "silent":
    time.sleep(600)
if mode == "garbage":
    s.sendall(b"this is not json\n")
    time.sleep(600)
if mode == "oversized":
    s.sendall(b"{" + b" " * (80 << 20))
    time.sleep(600)
if mode == "version":
    print(ask(s, f, {"v": 99, "op": "report", "steps": 0}), file=sys.stderr, flush=True)
    time.sleep(600)

start = time.monotonic()
done = 0
cap = lease["steps"]
seconds = lease["seconds"]
last_report = start
while (cap < 0 or done < cap) and (seconds < 0 or time.monotonic() - start + step_seconds <= seconds):
    time.sleep(step_seconds / max(lease["speed"], 1e-3))
    done += 1
    if time.monotonic() - last_report > 0.2:
        lease = ask(s, f, {"v": 2, "op": "report", "steps": done, "loss": 1.0 / (own + done)})
        cap = lease["steps"]
        last_report = time.monotonic()
ask(s, f, {"v": 2, "op": "report", "steps": done, "loss": 1.0 / max(1, own + done), "final": True})
if mode == "hang_after_lease":
    time.sleep(600)
step = own + done
if lease["writer"]:
    with open(ckpt + ".tmp", "w") as out:
        out.write(str(step))
    os.replace(ckpt + ".tmp", ckpt)
total = int(os.environ.get("MISBEHAVE_TOTAL", "0"))
if total and step >= total:
    ask(s, f, {"v": 2, "op": "complete", "steps": done, "loss": 1.0 / step, "accuracy": 0.5})
sys.exit(0)
