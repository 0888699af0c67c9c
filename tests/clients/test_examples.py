"""The examples (examples/numpy_elastic, examples/pytorch_elastic, examples/cpp_program) run
as a node would run them, one lease per process, against fake_node.FakeNode: preempted and
resumed they end as an uninterrupted run does, forked they continue from the mean.
Run: /usr/bin/python3 tests/clients/test_examples.py
(TESSERA_CPP_PROGRAM=path of example_cpp_program for the C++ program's cases)."""

import importlib.util
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from fake_node import FakeNode  # noqa: E402
from timescale import scaled  # noqa: E402

try:
    import numpy as np
    import sklearn  # noqa: F401
except ImportError:
    np = None
try:
    import torch
except ImportError:
    torch = None

NUMPY = [sys.executable, os.path.join(ROOT, "examples", "numpy_elastic", "train.py")]
TORCH = [sys.executable, os.path.join(ROOT, "examples", "pytorch_elastic", "train.py")]
CPP = [os.environ.get("TESSERA_CPP_PROGRAM", "")]


def f32(values):
    return list(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))


def sent_buffers(node):
    """The float32 values of the program's `average` request (in its shared memory)."""
    (msg,) = [m for _, m in node.received if m["op"] == "average"]
    assert len(node.sent_values) == sum(msg["sizes"])
    return node.sent_values


class ExampleTest(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.dir = self._dir.name

    def tearDown(self):
        self._dir.cleanup()

    def ckpt_dir(self, name):
        path = os.path.join(self.dir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def run_program(self, cmd, ckpt_dir, script=None):
        """Runs one process of the program; with `script`, under a fake node granting one
        lease. Returns (stdout, node)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TESSERA_", "RANK"))}
        env["TESSERA_CHECKPOINT_DIR"] = ckpt_dir
        node = None
        if script is not None:
            sock = os.path.join(self.dir, "lease.sock")
            node = FakeNode(sock, script).start()
            env.update(TESSERA_LEASE=sock, TESSERA_LEASE_TOKEN=node.token)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=scaled(120))
        self.assertEqual(done.returncode, 0, done.stderr)
        if node is not None:
            self.assertTrue(node.join(scaled(10)))
            self.assertIsNone(node.protocol_error)
        return done.stdout, node

    def run_forked(self, cmd, size, other, merged_step):
        """Runs one 20-step lease as copy 1 of 2, the other copy's `size` values all `other`;
        returns the checkpoint folder, the values the program sent and the mean it got."""
        pieces = self.ckpt_dir("pieces")
        _, node = self.run_program(cmd, pieces, {
            "terms": {"steps": 20, "copies": 2, "copy": 1}, "merged_step": merged_step,
            "others": [[other] * size]})
        own = sent_buffers(node)
        self.assertEqual(len(own), size)
        return pieces, own, f32([(x + other) / 2 for x in own])

    def run_leases(self, cmd, ckpt_dir, terms, most=20):
        """Runs the program lease after lease until it completes; returns its last stdout and
        the number of leases."""
        for n in range(1, most + 1):
            out, node = self.run_program(cmd, ckpt_dir, {"terms": terms})
            if any(m["op"] == "complete" for _, m in node.received):
                return out, n
        self.fail(f"not complete after {most} leases")


@unittest.skipIf(np is None, "NumPy and scikit-learn are not installed in this Python")
class TestNumpyExample(ExampleTest):
    def final(self, ckpt_dir):
        with open(os.path.join(ckpt_dir, "final.json")) as f:
            return json.load(f)

    def test_preempted_and_resumed_ends_bitwise_equal(self):
        cmd = NUMPY + ["--steps", "1200"]
        whole = self.ckpt_dir("whole")
        self.run_program(cmd, whole)
        pieces = self.ckpt_dir("pieces")
        out, node = self.run_program(cmd, pieces, {"terms": {"steps": 500}})
        with np.load(os.path.join(pieces, "params.npz")) as ckpt:
            self.assertEqual(int(ckpt["step"]), 500)
        self.assertFalse(os.path.exists(os.path.join(pieces, "final.json")))
        out, leases = self.run_leases(cmd, pieces, {"steps": 500})
        self.assertEqual(leases, 2)  # 500 more, then the last 200
        self.assertEqual(self.final(pieces), self.final(whole))
        self.assertGreater(self.final(whole)["accuracy"], 0.9)
        self.assertEqual(json.loads(out), self.final(whole))

    def test_time_leases_on_a_slow_node_end_bitwise_equal(self):
        cmd = NUMPY + ["--steps", "600"]
        whole, pieces = self.ckpt_dir("whole"), self.ckpt_dir("pieces")
        self.run_program(cmd, whole)
        _, leases = self.run_leases(cmd, pieces, {"seconds": 0.4, "speed": 0.05})
        self.assertGreater(leases, 1)
        self.assertEqual(self.final(pieces)["params_sha256"], self.final(whole)["params_sha256"])

    def test_a_forked_copy_continues_from_the_mean(self):
        pieces, _, mean = self.run_forked(NUMPY + ["--steps", "1200"], 64 * 10 + 10, 0.5, 120)
        with np.load(os.path.join(pieces, "params.npz")) as ckpt:
            self.assertEqual(int(ckpt["step"]), 120)
            self.assertEqual(list(ckpt["w"].ravel()) + list(ckpt["b"]), mean)


@unittest.skipIf(torch is None or np is None, "torch or scikit-learn is not installed")
class TestPytorchExample(ExampleTest):
    def test_preempted_and_resumed_completes_with_accuracy(self):
        cmd = TORCH + ["--steps", "150"]
        ckpt = self.ckpt_dir("ckpt")
        out, node = self.run_program(cmd, ckpt, {"terms": {"steps": 60}})
        self.assertEqual(torch.load(os.path.join(ckpt, "model.pt"))["step"], 60)
        self.assertEqual(out, "")
        out, leases = self.run_leases(cmd, ckpt, {"steps": 60})
        self.assertEqual(leases, 2)
        result = json.loads(out)
        self.assertEqual(result["step"], 150)
        self.assertGreater(result["accuracy"], 0.8)

    def test_target_accuracy_completes_early(self):
        out, _ = self.run_program(TORCH + ["--steps", "2000", "--target-accuracy", "0.9"],
                                  self.ckpt_dir("ckpt"))
        result = json.loads(out)
        self.assertLess(result["step"], 2000)
        self.assertGreaterEqual(result["accuracy"], 0.9)

    def test_a_forked_copy_continues_from_the_mean(self):
        spec = importlib.util.spec_from_file_location("pytorch_elastic", TORCH[1])
        example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(example)
        n = sum(p.numel() for p in example.Net().parameters())
        pieces, _, mean = self.run_forked(TORCH + ["--steps", "150"], n, 1.0, 40)
        state = torch.load(os.path.join(pieces, "model.pt"))
        self.assertEqual(state["step"], 40)
        self.assertEqual(torch.cat([t.flatten() for t in state["model"].values()]).tolist(), mean)


    def test_ddp_processes_of_a_copy_stop_at_the_same_step(self):
        with socket.socket() as s:  # a free port for the gloo rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ckpt = self.ckpt_dir("ckpt")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                   TESSERA_CHECKPOINT_DIR=ckpt)
        nodes, procs = [], []
        for rank, cap in ((0, 40), (1, 25)):  # leases of different length: agree stops both
            sock = os.path.join(self.dir, f"lease{rank}.sock")
            nodes.append(FakeNode(sock, {"terms": {"steps": cap, "writer": rank == 0}}).start())
            procs.append(subprocess.Popen(
                TORCH + ["--steps", "150"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True, env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank),
                                    TESSERA_LEASE=sock, TESSERA_LEASE_TOKEN=nodes[-1].token)))
        try:
            for p in procs:
                _, err = p.communicate(timeout=scaled(60))  # without agree: a hung all-reduce
                self.assertEqual(p.returncode, 0, err)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for node in nodes:
            self.assertTrue(node.join(scaled(10)))
            final = [m for _, m in node.received if m["op"] == "report" and m.get("final")]
            self.assertEqual([m["steps"] for m in final], [25])
        self.assertEqual(torch.load(os.path.join(ckpt, "model.pt"))["step"], 25)

@unittest.skipIf(not CPP[0], "TESSERA_CPP_PROGRAM (example_cpp_program) is not set")
class TestCppProgram(ExampleTest):
    def test_preempted_and_resumed_ends_bitwise_equal(self):
        cmd = CPP + ["--steps", "1000"]
        whole, pieces = self.ckpt_dir("whole"), self.ckpt_dir("pieces")
        out_whole, _ = self.run_program(cmd, whole)
        out, leases = self.run_leases(cmd, pieces, {"steps": 300})
        self.assertEqual(leases, 4)
        self.assertEqual(out, out_whole)
        with open(os.path.join(whole, "params.bin"), "rb") as a, \
                open(os.path.join(pieces, "params.bin"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertLess(json.loads(out)["weight_error"], 0.01)

    def test_a_forked_copy_continues_from_the_mean(self):
        pieces, _, mean = self.run_forked(CPP + ["--steps", "1000"], 16, 0.25, 70)
        with open(os.path.join(pieces, "params.bin"), "rb") as f:
            raw = f.read()
        self.assertEqual(struct.unpack("<q", raw[8:16])[0], 70)
        self.assertEqual(list(struct.unpack("<16f", raw[16:])), mean)


if __name__ == "__main__":
    unittest.main()
