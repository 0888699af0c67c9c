#!/usr/bin/env python3
"""scripts/gpu_checks.sh on a machine without a GPU (about 10 s):
1. with no nvidia-smi it runs nothing and exits 77, naming what it skipped;
2. with --prebuilt and an nvidia-smi that claims a GPU (CUDA still finds none), it runs every
   check from the given programs and fails, because a skipped GPU check on a "GPU machine" is
   a failure; the unit tests run the CLI cases through TESSERA_TEST_BINARY; the run's files
   land in GPU_CHECKS_OUT.
Skips (77) where this host has a real GPU: then the script's own run is the test.

usage: test_gpu_checks.py TESSERA TESSERA_TESTS MPI_AGGREGATOR_TESTS CUDA_BENCH"""

import os
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "gpu_checks.sh")


def run(env, *args):
    r = subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, env=env,
                       timeout=300)
    return r.returncode, r.stdout + r.stderr


def main():
    programs = sys.argv[1:5]
    if shutil.which("nvidia-smi"):
        # Why skip: with a real driver the checks below would not see the fake GPU that
        # CUDA cannot use; they would run the real GPU checks (minutes), which
        # scripts/gpu_checks.sh itself is for on such a host.
        print("SKIPPED: this host has nvidia-smi (a real NVIDIA driver); the fake-driver "
              "plumbing checked here does not apply; run scripts/gpu_checks.sh itself")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        # 1. No driver: nothing runs.
        code, out = run(dict(os.environ), "--prebuilt", tmp)
        assert code == 77, (code, out)
        assert "NO GPU" in out and "nvidia-smi is not installed" in out, out
        assert "skipped: the CUDA build" in out, out

        # 2. A driver that lists a GPU the CUDA runtime cannot use.
        fake = os.path.join(tmp, "fakebin")
        os.mkdir(fake)
        smi = os.path.join(fake, "nvidia-smi")
        with open(smi, "w") as f:
            f.write("#!/bin/sh\necho '0, NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04'\n")
        os.chmod(smi, os.stat(smi).st_mode | stat.S_IXUSR)
        bundle = os.path.join(tmp, "bin")
        os.mkdir(bundle)
        for p in programs:
            os.symlink(os.path.abspath(p), os.path.join(bundle, os.path.basename(p)))
        out_dir = os.path.join(tmp, "out")
        env = dict(os.environ, PATH=fake + os.pathsep + os.environ["PATH"],
                   GPU_CHECKS_OUT=out_dir)
        code, out = run(env, "--prebuilt", bundle)
        assert code == 1, (code, out)
        assert "1 GPU(s)" in out and "prebuilt programs in " + bundle in out, out
        failed = out[out.index("gpu_checks: FAILED:"):]
        for name in ["unit tests on the GPU (skipped a GPU check on a GPU machine)",
                     "CUDA MLP against the CPU, K = 1 (exit 77)",
                     "MPI backend, device buffers (2 ranks) (skipped",
                     "tessera run: two mlp_cuda jobs on one h100 GPU (exit 1)",
                     "refusal of a mismatched real GPU"]:
            assert name in failed, (name, failed)
        # The unit tests ran (the CLI ones through the bundled binary): only skips failed them.
        assert "All tests passed" in out, out
        assert "mlp_cuda needs a CUDA GPU" in out, out
        for f in ["cluster.toml", "jobs.toml", "summary.json", "wrong.toml"]:
            assert os.path.exists(os.path.join(out_dir, f)), f
        with open(os.path.join(out_dir, "wrong.toml")) as f:
            assert 'gpu_type = "v100"' in f.read()
    print("gpu_checks: no-GPU exit 77 and prebuilt plumbing checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
