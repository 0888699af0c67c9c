#!/usr/bin/env python3
"""The training script that bench/torchrun_resize.py runs under torchrun (one process per agent).

The model, data and minibatch order are examples/pytorch_elastic/train.py's (the 9,930-parameter
CNN on scikit-learn's 8x8 digits, DDP over gloo on the CPU), imported from it, so the step is the
one tessera's example takes. What differs is what a torchrun-style script does and train.py (a
tessera lease program) does not: it checkpoints every --ckpt-every steps (rank 0, atomically),
resumes from --ckpt-file at every (re)start, and runs until it is killed. (Option names must not
be prefixes of torchrun's own: torchrun parses abbreviations, so "--log" is refused as ambiguous.)

It appends one JSON line per event to --trace-file (O_APPEND, one write per line, so the processes of
all agents can share one file):
  {"ev": "start", ...}     first line of the script, before `import torch`
  {"ev": "imported", ...}  torch, sklearn and train.py imported
  {"ev": "pg", ...}        process group initialised (world > 1)
  {"ev": "built", ...}     model and optimizer constructed
  {"ev": "ready", ...}     data loaded, checkpoint loaded, DDP built
  {"ev": "step", "step": s, ...}  after every optimizer step (loss read back)
each with "t" (time.time()), "pid", "ppid" (the torchrun agent), "rank", "world", "restart"
(TORCHELASTIC_RESTART_COUNT) and "group_rank".
"""
import time

T_START = time.time()  # before anything else: the process is up

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-file", required=True)
    ap.add_argument("--ckpt-file", required=True, help="checkpoint file (model, optimizer, step)")
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--steps", type=int, default=10**9, help="stop after this step (default: never)")
    ap.add_argument("--step-sleep", type=float, default=0.02,
                    help="seconds to sleep after each step, so that three workers leave the "
                         "2-core host some CPU (a GPU job's host CPU is mostly idle too)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    base = {"pid": os.getpid(), "ppid": os.getppid(), "rank": rank, "world": world,
            "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", -1)),
            "group_rank": int(os.environ.get("GROUP_RANK", -1))}
    fd = os.open(args.trace_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(ev, t=None, **kw):
        rec = {"ev": ev, "t": time.time() if t is None else t, **base, **kw}
        os.write(fd, (json.dumps(rec) + "\n").encode())

    log("start", t=T_START)
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    sys.path.insert(0, os.path.join(HERE, "..", "examples", "pytorch_elastic"))
    from train import Net, batch_indices, load_data  # noqa: E402  (also imports tessera_client)
    log("imported")

    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo")  # env:// (MASTER_ADDR/PORT from torchrun)
        log("pg")

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    log("built")  # the first optimizer takes ~1.5 s: torch imports torch._dynamo lazily here
    start = 0
    if os.path.exists(args.ckpt_file):
        state = torch.load(args.ckpt_file, map_location="cpu")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["step"]
    if world > 1:  # every rank goes on from rank 0's step (and DDP broadcasts rank 0's parameters)
        s = torch.tensor([start])
        dist.broadcast(s, 0)
        start = int(s.item())
        net = nn.parallel.DistributedDataParallel(model)
    else:
        net = model
    x, y, _, _ = load_data()
    log("ready", step=start)

    for step in range(start, args.steps):
        idx = batch_indices(step, rank, world, len(x), args.batch_size)
        opt.zero_grad()
        loss_t = F.cross_entropy(net(x[idx]), y[idx])
        loss_t.backward()
        opt.step()
        loss = loss_t.item()
        log("step", step=step + 1, loss=round(loss, 5))
        if rank == 0 and (step + 1) % args.ckpt_every == 0:
            tmp = args.ckpt_file + f".tmp{os.getpid()}"
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "step": step + 1}, tmp)
            os.replace(tmp, args.ckpt_file)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
