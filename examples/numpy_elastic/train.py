#!/usr/bin/env python3
"""Logistic regression on scikit-learn's digits with NumPy: an elastic tessera job.

Deterministic: step s's minibatch is a pure function of s (and, for forked copies, of the
copy), parameters start at zero and float32 arithmetic runs single-threaded, so a run that is
preempted, checkpointed and resumed ends bitwise equal to one that never stopped. Runs on its
own too (no TESSERA_LEASE): `python3 train.py --steps 3000 --checkpoint-dir /tmp/ckpt`.
"""
import argparse
import hashlib
import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy: one thread, same sums
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

try:
    from tessera_client import Lease, atomic_open
except ImportError:  # not pip-installed: the repository's copy
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "clients", "python"))
    from tessera_client import Lease, atomic_open


def load_data():
    """(x_train, y_train, x_test, y_test): 1500 training and 297 held-out digits."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    order = np.random.default_rng(0).permutation(len(x))
    train, test = order[297:], order[:297]
    return x[train], digits.target[train], x[test], digits.target[test]


def batch_indices(step, copy, copies, n, size):
    """Step `step`'s minibatch for copy `copy` of `copies`: copies draw disjoint batches."""
    index = step * copies + copy
    epoch, k = divmod(index, n // size)
    order = np.random.default_rng([1, epoch]).permutation(n)
    return order[k * size:(k + 1) * size]


def sgd_step(w, b, x, y, lr):
    """One step of softmax regression, in place; returns the batch's loss."""
    logits = x @ w + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = float(-np.log(p[rows, y]).mean())
    p[rows, y] -= 1
    p /= np.float32(len(y))
    w -= lr * (x.T @ p)
    b -= lr * p.sum(axis=0)
    return loss


def load_checkpoint(path):
    """(w, b, step) from the checkpoint, or the start when there is none."""
    if not os.path.exists(path):
        return np.zeros((64, 10), np.float32), np.zeros(10, np.float32), 0
    with np.load(path) as ckpt:
        return ckpt["w"], ckpt["b"], int(ckpt["step"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000, help="total steps (the job's total_steps)")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--checkpoint-dir", default="checkpoints",
                    help="used when TESSERA_CHECKPOINT_DIR is not set")
    args = ap.parse_args()
    ckpt_dir = os.environ.get("TESSERA_CHECKPOINT_DIR") or args.checkpoint_dir
    os.makedirs(ckpt_dir, exist_ok=True)
    ckpt = os.path.join(ckpt_dir, "params.npz")

    x, y, x_test, y_test = load_data()
    w, b, start = load_checkpoint(ckpt)
    lr = np.float32(args.lr)
    # renew=True: the process lives on across rounds while the job stays on this node; it
    # checkpoints (and, forked, averages) at the lease ends the node flags (the job's
    # checkpoint_every), inside the loop, and after it when told exit unsaved.
    lease = Lease(range(start, args.steps), step=start, renew=True)
    loss = None

    def checkpoint():
        """Averages with the other copies (forked), writes the checkpoint (the writer): the
        job's state at lease.position, also when done (a rerun then completes at once)."""
        nonlocal w, b
        at = lease.position
        if lease.copies > 1:  # forked: every copy goes on from the copies' mean
            w, b = mean = lease.average([w, b])
            at = mean.step
        if lease.writer:
            with atomic_open(ckpt) as f:
                np.savez(f, w=w, b=b, step=at)
        return at

    at = start
    for _ in lease:
        step = lease.position - 1  # the job's step this item makes
        idx = batch_indices(step, lease.copy, lease.copies, len(x), args.batch_size)
        loss = sgd_step(w, b, x[idx], y[idx], lr)
        lease.report(loss=loss)
        if lease.should_checkpoint():
            at = checkpoint()
    if not lease.should_checkpoint():  # the loop ended on an item not flagged: save now
        at = checkpoint()
    if at < args.steps:  # the lease ended first: exit 0, resume in a later lease
        return
    accuracy = float(((x_test @ w + b).argmax(axis=1) == y_test).mean())
    result = {"step": at, "loss": loss, "accuracy": accuracy,
              "params_sha256": hashlib.sha256(w.tobytes() + b.tobytes()).hexdigest()}
    if lease.writer:
        with atomic_open(os.path.join(ckpt_dir, "final.json")) as f:
            f.write(json.dumps(result).encode() + b"\n")
    print(json.dumps(result), flush=True)
    lease.complete(loss=loss, accuracy=accuracy)


if __name__ == "__main__":
    main()
