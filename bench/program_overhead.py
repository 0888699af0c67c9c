#!/usr/bin/env python3
"""What the lease channel costs a program with 10 ms steps, and how long programs take from
their assignment to their first step, with the real node (`tessera run --local 1`):
- overhead: bench/programs/busy_steps.py steps N x 10 ms busy work through the Python client,
  alone (no TESSERA_LEASE: the client passes through) and as a job of kind "program"; the
  per-step wall time of each (measured by the program over its stepping), median of R runs;
- start: `startup_seconds` of the run summary (from the process's start to its hello) for the
  NumPy, PyTorch and C++ examples, median of R runs.

usage: /usr/bin/python3 bench/program_overhead.py [--steps N] [--runs R] [--build build]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CLUSTER = '[cluster]\nname = "one"\n[[cluster.server]]\nname = "a"\ngpu_type = "v100"\n' \
          'gpus = 1\nspeed = 1.0\n'


def tessera_run(args, tmp, job, name):
    """Runs `job` (a [[job]] table) alone on one node; returns the summary's job entry."""
    with open(os.path.join(tmp, "cluster.toml"), "w") as f:
        f.write(CLUSTER)
    with open(os.path.join(tmp, name + ".toml"), "w") as f:
        f.write(job)
    out = os.path.join(tmp, name + ".json")
    cmd = [os.path.join(ROOT, args.build, "tessera"), "run", "--local", "1", "--cluster",
           os.path.join(tmp, "cluster.toml"), "--jobs", os.path.join(tmp, name + ".toml"),
           "--round-length", str(args.round_length), "--checkpoint-dir", os.path.join(tmp, "ckpt-" + name),
           "--json", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    return json.load(open(out))["jobs"][0]


def overhead(args, tmp):
    prog = os.path.join(ROOT, "bench", "programs", "busy_steps.py")
    alone, leased = [], []
    for r in range(args.runs):
        res = os.path.join(tmp, f"alone-{r}.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
        subprocess.run(["/usr/bin/python3", prog, str(args.steps), res], check=True, env=env)
        a = json.load(open(res))
        alone.append(a["seconds"] / a["steps"])
        res = os.path.join(tmp, f"leased-steps-{r}.json")
        tessera_run(args, tmp, f'[[job]]\nkind = "program"\ncommand = ["/usr/bin/python3", '
                    f'"{prog}", "{args.steps}", "{res}"]\ntotal_steps = {args.steps}\n'
                    'step_time = 0.01\n', f"leased-{r}")
        b = json.load(open(res))
        leased.append(b["seconds"] / b["steps"])
    a, b = statistics.median(alone), statistics.median(leased)
    print(f"10 ms steps x {args.steps}, median of {args.runs}: alone {a * 1e3:.4f} ms/step, "
          f"leased {b * 1e3:.4f} ms/step, overhead {100 * (b - a) / a:.3f} %")


def startup(args, tmp):
    cpp = os.path.join(ROOT, args.build, "examples", "cpp_program", "example_cpp_program")
    examples = {
        "numpy": ('["/usr/bin/python3", "train.py", "--steps", "300"]', "numpy_elastic", 300),
        "pytorch": ('["/usr/bin/python3", "train.py", "--steps", "100"]', "pytorch_elastic", 100),
        "c++": (f'["{cpp}", "--steps", "300"]', "cpp_program", 300),
    }
    for name, (command, folder, steps) in examples.items():
        seconds = []
        for r in range(args.runs):
            j = tessera_run(args, tmp, f'[[job]]\nkind = "program"\ncommand = {command}\n'
                            f'workdir = "{ROOT}/examples/{folder}"\ntotal_steps = {steps}\n'
                            'step_time = 0.001\nenv = { OMP_NUM_THREADS = "1" }\n', f"{name}-{r}")
            seconds.append(j["startup_seconds"])
        print(f"assignment to first contact, {name}: median {statistics.median(seconds):.3f} s "
              f"(min {min(seconds):.3f}, max {max(seconds):.3f}, {args.runs} runs)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build", default="build")
    ap.add_argument("--round-length", type=float, default=8,
                    help="longer than one run of the program: it runs in one lease")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        overhead(args, tmp)
        startup(args, tmp)


if __name__ == "__main__":
    main()
