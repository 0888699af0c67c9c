#!/usr/bin/env python3
"""A small CNN on scikit-learn's 8x8 digits with PyTorch: an elastic tessera job.

It trains on the GPU the node gave it (CUDA_VISIBLE_DEVICES, set by a node with real GPUs)
when PyTorch can use it, else on the CPU (--device). A copy of scale K is K processes
training with DistributedDataParallel (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the
node; gloo on the CPU, NCCL on GPUs, process r on the r-th GPU it was given); forked copies (TESSERA_COPIES > 1)
average their parameters through the lease at every lease end. Completes at --steps, or as
soon as the held-out accuracy reaches --target-accuracy. Runs on its own too (no
TESSERA_LEASE): `python3 train.py --checkpoint-dir /tmp/ckpt`.
"""
import argparse
import json
import os
import sys

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

try:
    from tessera_client import Lease, atomic_open
except ImportError:  # not pip-installed: the repository's copy
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "clients", "python"))
    from tessera_client import Lease, atomic_open


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def load_data(path=None):
    """(x_train, y_train, x_test, y_test) as tensors: 1500 training and 297 held-out digits,
    from scikit-learn, or from `path`: a torch.save'd dict of its `images` and `target` (for a
    machine whose Python has torch but no scikit-learn)."""
    if path:
        d = torch.load(path)
        images, target = d["images"].double(), d["target"]
    else:
        from sklearn.datasets import load_digits
        digits = load_digits()
        images, target = digits.images, digits.target
    x = torch.as_tensor(images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.as_tensor(target)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    return x[order[297:]], y[order[297:]], x[order[:297]], y[order[:297]]


def batch_indices(step, slot, slots, n, size, seed=0):
    """Step `step`'s minibatch for process `slot` of `slots` (every process of every copy
    draws its own): a pure function of its arguments."""
    epoch, k = divmod(step * slots + slot, n // size)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(1000 + epoch + 7919 * seed))
    return order[k * size:(k + 1) * size]


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def pick_device(choice, rank):
    """auto: the GPU the node handed this job (CUDA_VISIBLE_DEVICES) when PyTorch can use one,
    else the CPU. cuda without a usable GPU is an error, not a silent fall back."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if choice == "auto":
        choice = "cuda" if given not in ("", "-1") and torch.cuda.is_available() else "cpu"
    if choice == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        sys.exit(f"train.py: --device cuda, but PyTorch finds no usable GPU "
                 f"(CUDA_VISIBLE_DEVICES={given!r})")
    return torch.device("cuda", rank % torch.cuda.device_count())


def agree_on(device):
    """The element-wise maximum of the lease flags over the copy's processes."""
    def agree(flags):
        t = torch.tensor(flags, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()
    return agree


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000, help="total steps (the job's total_steps)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0, help="initial parameters and data order")
    ap.add_argument("--target-accuracy", type=float, default=0.0,
                    help="complete once the held-out accuracy reaches it (0: run all steps)")
    ap.add_argument("--eval-every", type=int, default=50,
                    help="steps between accuracy checks of an unforked job (forked: at lease ends)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads per process")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                    help="auto (default): the GPU the node gave the job, else the CPU")
    ap.add_argument("--digits", help="a torch.save'd dict of the digits (images, target) "
                    "instead of scikit-learn's")
    ap.add_argument("--checkpoint-dir", default="checkpoints",
                    help="used when TESSERA_CHECKPOINT_DIR is not set")
    return ap.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = pick_device(args.device, rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method="env://")
    ckpt_dir = os.environ.get("TESSERA_CHECKPOINT_DIR") or args.checkpoint_dir
    os.makedirs(ckpt_dir, exist_ok=True)
    ckpt = os.path.join(ckpt_dir, "model.pt")

    torch.manual_seed(args.seed)  # every copy and process starts from the same parameters
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt, map_location="cpu")
        model.load_state_dict(state["model"])  # onto the model's device
        opt.load_state_dict(state["optimizer"])  # momentum follows its parameters' device
        start = state["step"]
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    x, y, x_test, y_test = (t.to(device) for t in load_data(args.digits))

    # renew=True: the process (its model, data and CUDA context) lives on across rounds while
    # the job stays where it is; the lease ends the node flags (the job's checkpoint_every)
    # average (forked) and checkpoint in the loop, and the code after it when told exit unsaved.
    lease = Lease(range(start, args.steps), step=start, renew=True,
                  agree=agree_on(device) if world > 1 else None)

    def lease_end():
        """A lease's end: the copies' mean (forked), the held-out accuracy, the checkpoint
        (writer). Returns the job's step and the accuracy."""
        at = lease.position
        if lease.copies > 1:  # forked: every copy goes on from the copies' mean
            means = lease.average(list(model.parameters()))
            with torch.no_grad():
                for p, m in zip(model.parameters(), means):
                    p.copy_(m)
            at = means.step
        acc = accuracy(model, x_test, y_test)
        if lease.writer:
            with atomic_open(ckpt) as f:
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                            "step": at}, f)
        return at, acc

    loss, reached, ended, made, began = None, False, False, 0, time.monotonic()
    for _ in lease:
        made += 1
        step, ended = lease.position - 1, False  # the job's step this item makes
        idx = batch_indices(step, lease.copy * world + rank, lease.copies * world, len(x),
                            args.batch_size, args.seed).to(device)
        opt.zero_grad()
        loss_t = F.cross_entropy(net(x[idx]), y[idx])
        loss_t.backward()
        opt.step()
        loss = loss_t.item()
        lease.report(loss=loss)
        if args.target_accuracy and lease.copies == 1 and (step + 1) % args.eval_every == 0 \
                and accuracy(model, x_test, y_test) >= args.target_accuracy:
            reached = True  # every process of the copy sees the same parameters: all stop here
            break
        if lease.should_checkpoint():
            (at, acc), ended = lease_end(), True
            if args.target_accuracy and acc >= args.target_accuracy:
                reached = True
                break
    if not ended:  # the loop ended on an item not flagged (or broke off): its end now
        at, acc = lease_end()
    done = at >= args.steps or reached or (args.target_accuracy and acc >= args.target_accuracy)
    if not done:  # the lease ended first: exit 0, resume in a later lease
        lease.close()
        return
    if rank == 0:
        took = time.monotonic() - began  # this process's loop: every lease it held
        print(json.dumps({"step": at, "loss": loss, "accuracy": acc, "device": str(device),
                          "process_steps": made, "process_seconds": round(took, 3),
                          "renewals": lease.renewals}), flush=True)
    lease.complete(loss=loss, accuracy=acc)


if __name__ == "__main__":
    main()
