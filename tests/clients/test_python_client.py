"""Tests of the Python lease client (clients/python/tessera_client) against fake_node.FakeNode.
Run: /usr/bin/python3 -m unittest discover -s tests/clients -p 'test_*.py'"""

import array
import os
import random
import struct
import sys
import tempfile
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
sys.path.insert(0, HERE)

import tessera_client  # noqa: E402
from tessera_client import lease as lease_module  # noqa: E402
from fake_node import FakeNode  # noqa: E402

try:
    import numpy as np
except ImportError:  # the pyenv Python: the NumPy cases are skipped
    np = None
try:
    import torch
except ImportError:
    torch = None


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


class NodeTest(unittest.TestCase):
    """Each test gets a socket path, and run_node() a fake node serving it."""

    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self._dir.name, "lease.sock")
        self._env = mock.patch.dict(os.environ, {"TESSERA_LEASE": self.path,
                                                 "TESSERA_LEASE_TOKEN": "0" * 64})
        self._env.start()
        self.node = None

    def tearDown(self):
        self._env.stop()
        if self.node is not None:
            self.node.join(5)
        self._dir.cleanup()

    def run_node(self, **script):
        self.node = FakeNode(self.path, script).start()
        return self.node

    def messages(self, op=None):
        self.assertTrue(self.node.join(5), "the fake node still serves")
        msgs = [m for _, m in self.node.received]
        return [m for m in msgs if op is None or m["op"] == op]

    def fast_reports(self):
        """Reports after every step (the 0.2 s interval off) for the duration of a test."""
        patch = mock.patch.object(lease_module, "REPORT_INTERVAL", 0.0)
        patch.start()
        self.addCleanup(patch.stop)


class TestLeaseLoop(NodeTest):
    def test_steps_cap_ends_the_loop_and_flags_the_last_item(self):
        self.run_node(terms={"steps": 5, "step": 40, "job": 3, "copy": 1, "copies": 2})
        lease = tessera_client.Lease(range(100))
        self.assertEqual((lease.job, lease.copy, lease.copies, lease.step), (3, 1, 2, 40))
        flags = [lease.should_checkpoint() for _ in lease]
        self.assertEqual(flags, [False, False, False, False, True])
        self.assertTrue(lease.expired)
        self.assertEqual(lease.steps_made, 5)
        lease.close()
        reports = self.messages("report")
        self.assertEqual(reports[-1]["steps"], 5)
        self.assertIs(reports[-1]["final"], True)
        self.assertEqual(sum(1 for r in reports if r.get("final")), 1)

    def test_a_warm_lease_flags_its_last_item_only_when_its_end_is_to_be_saved(self):
        # Not to be saved (the job's checkpoint_every is longer than a round): no item is
        # flagged, the process asks to renew, and told exit (a move) it saves after its loop.
        for checkpoint, flags_want in ((True, [False, False, True]), (False, [False] * 3)):
            with self.subTest(checkpoint=checkpoint):
                self.run_node(terms={"steps": 3, "renewable": True, "checkpoint": checkpoint},
                              exit_on="renew")
                lease = tessera_client.Lease(range(100), renew=True)
                flags = [lease.should_checkpoint() for _ in lease]
                self.assertEqual(flags, flags_want)
                self.assertTrue(lease.expired)
                self.assertEqual(lease.should_checkpoint(), checkpoint)  # False: save now
                self.assertEqual(lease.position, 3)
                self.assertEqual([m["op"] for m in self.messages()],
                                 ["hello", "report", "renew"])
                os.unlink(self.path)

    def test_a_lease_whose_cap_ends_the_job_is_saved_whatever_it_says(self):
        self.run_node(terms={"steps": 2, "renewable": True, "checkpoint": False,
                             "ends_job": True})
        lease = tessera_client.Lease(range(100), renew=True)
        flags = [lease.should_checkpoint() for _ in lease]
        self.assertEqual(flags, [False, True])
        lease.complete()

    def test_hello_carries_token_pid_and_own_step(self):
        self.run_node(terms={"steps": 1, "step": 40})
        lease = tessera_client.Lease(step=12)
        self.assertEqual(lease.step, 12)  # the program's own checkpoint wins
        lease.close()
        hello = self.messages("hello")[0]
        self.assertEqual((hello["token"], hello["pid"], hello["step"]), ("0" * 64, os.getpid(), 12))

    def test_replies_split_across_writes_are_reassembled(self):
        node = self.run_node(terms={"steps": 4}, split=4)
        lease = tessera_client.Lease(range(10))
        self.assertEqual(list(lease), [0, 1, 2, 3])
        means = lease.average([[1.5, 2.5]])
        self.assertEqual(list(means[0]), [1.5, 2.5])
        lease.complete()
        self.assertEqual([m["op"] for m in self.messages()][-2:], ["average", "complete"])
        self.assertIsNone(node.protocol_error)

    def test_iterable_end_is_not_expiry_and_complete_gets_exit(self):
        self.run_node(terms={"steps": 10})
        lease = tessera_client.Lease(range(3))
        self.assertEqual(list(lease), [0, 1, 2])
        self.assertFalse(lease.expired)
        lease.complete(loss=0.25, accuracy=0.9)
        complete = self.messages("complete")[0]
        self.assertEqual((complete["steps"], complete["loss"], complete["accuracy"]), (3, 0.25, 0.9))
        self.assertEqual(self.messages("report")[-1]["steps"], 3)  # reported when it ended

    def test_iterating_again_continues_the_same_lease(self):
        self.run_node(terms={"steps": 5})
        lease = tessera_client.Lease(range(3))
        self.assertEqual(list(lease), [0, 1, 2])
        self.assertEqual(list(lease), [0, 1])
        self.assertTrue(lease.expired)
        self.assertEqual(list(lease), [])
        lease.close()
        self.assertEqual(len(self.messages("hello")), 1)

    def test_a_shortened_lease_ends_the_loop_at_the_reply(self):
        self.fast_reports()
        self.run_node(terms={"steps": 100}, stop_after_steps=3)
        lease = tessera_client.Lease(range(100))
        flags = [lease.should_checkpoint() for _ in lease]
        self.assertEqual(len(flags), 3)
        self.assertFalse(any(flags))  # the node stopped it: no item was known to be last
        self.assertTrue(lease.expired)
        lease.close()
        self.assertEqual(self.messages("report")[-1], {"v": 2, "op": "report", "steps": 3,
                                                       "final": True})

    def test_deadline_ends_the_loop_by_the_measured_step_time(self):
        self.run_node(terms={"seconds": 0.6})
        lease = tessera_client.Lease()
        start = time.monotonic()
        flags = []
        for _ in lease:
            time.sleep(0.05)
            flags.append(lease.should_checkpoint())
        took = time.monotonic() - start
        lease.close()
        self.assertTrue(lease.expired)
        self.assertTrue(flags[-1])
        self.assertFalse(any(flags[:-1]))
        self.assertGreaterEqual(len(flags), 6)  # ~11 steps fit; a loaded host makes fewer
        self.assertLess(took, 0.6 + 0.15)  # ended before the next step would overrun

    def test_pacing_by_speed(self):
        def run(speed):
            self.run_node(terms={"steps": 10, "speed": speed})
            lease = tessera_client.Lease()
            start = time.monotonic()
            for _ in lease:
                time.sleep(0.02)
            took = time.monotonic() - start
            lease.close()
            self.node.join(5)
            return took

        full, half = run(1.0), run(0.5)
        self.assertGreaterEqual(half, 2 * 10 * 0.02)  # every step slept as long again
        self.assertLess(full, 10 * 0.02 * 2)
        self.assertGreater(half / full, 1.5)

    def test_reports_are_throttled_and_carry_the_finite_loss(self):
        self.run_node(terms={"steps": 30})
        lease = tessera_client.Lease()
        for i in lease:
            time.sleep(0.02)
            lease.report(loss=float("nan") if i == 29 else 1.0 / (i + 1))
        lease.close()
        reports = self.messages("report")
        self.assertLessEqual(len(reports), 5)  # ~0.6 s of steps: about 3, plus the final one
        self.assertTrue(all("loss" in r for r in reports if r["steps"] < 29))
        self.assertEqual(reports[-1]["steps"], 30)
        self.assertNotIn("loss", reports[-1])  # NaN is not sent (the node would refuse it)

    def test_agree_makes_every_process_stop_together(self):
        self.run_node(terms={"steps": 100})
        calls = []

        def agree(flags):  # another process of the copy says "last" at its third item
            calls.append(list(flags))
            return [flags[0], 1 if len(calls) == 3 else flags[1]]

        lease = tessera_client.Lease(range(100), agree=agree)
        flags = [lease.should_checkpoint() for _ in lease]
        lease.close()
        self.assertEqual(flags, [False, False, True])
        self.assertEqual(len(calls), 4)
        self.assertTrue(lease.expired)

    def test_break_then_complete_counts_the_step_in_progress(self):
        self.run_node(terms={"steps": 100})
        lease = tessera_client.Lease(range(100))
        for i in lease:
            self.assertEqual(lease.steps_made, i + 1)  # the step in progress counts
            if i == 4:
                break
        self.assertEqual(lease.steps_made, 5)
        lease.complete()
        self.assertEqual(self.messages("complete")[0]["steps"], 5)


    def test_break_then_close_reports_the_steps_made(self):
        self.run_node(terms={"steps": 100})
        with tessera_client.Lease(range(100)) as lease:
            for i in lease:
                if i == 6:
                    break
        self.assertEqual(self.messages("report")[-1], {"v": 2, "op": "report", "steps": 7,
                                                       "final": True})

    def test_after_close_the_lease_is_over_not_standalone(self):
        self.run_node(terms={"steps": 100})
        lease = tessera_client.Lease(range(100))
        for i in lease:
            if i == 2:
                break
        lease.close()
        self.assertFalse(lease.standalone)
        self.assertEqual(list(lease), [])
        with self.assertRaises(tessera_client.LeaseError):
            lease.average([[1.0]])
        with self.assertRaises(tessera_client.LeaseError):
            lease.complete()

    @unittest.skipIf(np is None, "NumPy is not installed in this Python")
    def test_a_numpy_integer_step_is_sent_as_a_number(self):
        self.run_node(terms={"steps": 1})
        lease = tessera_client.Lease(step=np.int64(7))
        lease.close()
        self.assertEqual(self.messages("hello")[0]["step"], 7)

class TestAverage(NodeTest):
    def test_round_trip_is_exact_for_float32_values(self):
        rng = random.Random(3)
        values = []
        while len(values) < 1000:
            x = struct.unpack("<f", rng.getrandbits(32).to_bytes(4, "little"))[0]
            if x == x:  # NaN compares unequal to itself: skip it
                values.append(x)
        self.run_node(terms={"steps": 1})
        lease = tessera_client.Lease()
        means = lease.average([array.array("f", values[:600]), values[600:]])
        lease.complete()
        self.assertEqual(means[0].tobytes(), array.array("f", values[:600]).tobytes())
        self.assertEqual(means[1], values[600:])
        self.assertEqual((means.copies, means.step), (1, 0))
        self.assertEqual(self.messages("average")[0]["sizes"], [600, 400])

    def test_buffers_travel_in_a_sealed_memfd_not_in_the_line(self):
        node = self.run_node(terms={"steps": 1})
        lease = tessera_client.Lease()
        lease.average([[1.0, 2.0, 3.0]])
        lease.complete()
        avg = self.messages("average")[0]
        self.assertNotIn("data", avg)  # protocol version 2: the values are in shared memory
        self.assertEqual(avg["sizes"], [3])
        self.assertEqual(node.averaged_values, 3)
        self.assertIsNone(node.protocol_error)

    def test_sixteen_million_floats_go_through_and_back(self):
        # 64 MB: version 1's base64 line broke the channel at this size ("Broken pipe").
        n = 16 << 20
        mine = array.array("f", bytes(4 * n))
        for i in range(0, n, 1 << 12):
            mine[i] = float(i % 1000) + 0.5
        self.run_node(terms={"steps": 1})
        lease = tessera_client.Lease()
        (mean,) = lease.average([mine])
        lease.complete()
        self.assertEqual(len(mean), n)
        self.assertEqual(mean.tobytes(), mine.tobytes())

    def test_an_average_larger_than_memory_is_refused_naming_job_copy_and_size(self):
        self.run_node(terms={"steps": 1, "job": 5, "copy": 2, "copies": 3})
        lease = tessera_client.Lease()
        with mock.patch.object(tessera_client._buffers, "available_memory", return_value=1000):
            with self.assertRaises(tessera_client.LeaseError) as caught:
                lease.average([[0.0] * 300])
        message = str(caught.exception)
        for part in ("job 5 copy 2", "300 float32 values", "1200 bytes", "1000 bytes"):
            self.assertIn(part, message)
        lease.close()

    def test_mean_with_other_copies_keeps_each_kind(self):
        mine = [[1.5, -2.0, 3.25], [1e-3], [0.0, 7.0]]
        other = [2.5, 4.0, -1.25, 3e-3, 1.0, -7.0]
        self.run_node(terms={"steps": 1, "copies": 2}, others=[other], merged_step=77)
        lease = tessera_client.Lease()
        means = lease.average([array.array("f", mine[0]), bytes(array.array("f", mine[1])),
                               tuple(mine[2])])
        lease.complete()
        flat = [f32((f32(a) + f32(b)) / 2) for a, b in zip(sum(mine, []), other)]
        self.assertIsInstance(means[0], array.array)
        self.assertEqual(list(means[0]), flat[:3])
        self.assertIsInstance(means[1], bytes)
        self.assertEqual(means[1], bytes(array.array("f", flat[3:4])))
        self.assertEqual(means[2], flat[4:])
        self.assertEqual((means.copies, means.step), (2, 77))

    @unittest.skipIf(np is None, "NumPy is not installed in this Python")
    def test_numpy_arrays_come_back_as_numpy_arrays(self):
        w = np.arange(12, dtype=np.float32).reshape(3, 4) / 8
        b = np.array([0.1, 0.2], dtype=np.float64)
        self.run_node(terms={"steps": 1, "copies": 2}, others=[[1.0] * 14])
        lease = tessera_client.Lease()
        mw, mb = lease.average([w, b.T])
        lease.complete()
        self.assertEqual((type(mw), mw.dtype, mw.shape), (np.ndarray, np.float32, (3, 4)))
        np.testing.assert_array_equal(mw, ((w.astype(np.float64) + 1) / 2).astype(np.float32))
        self.assertEqual(mb.dtype, np.float64)  # float64 in, float64 out, float32 precision
        np.testing.assert_array_equal(mb, ((b.astype(np.float32) + np.float32(1)) / 2))

    @unittest.skipIf(torch is None, "torch is not installed in this Python")
    def test_torch_tensors_come_back_as_tensors(self):
        t = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()  # not contiguous
        t.requires_grad_(False)
        self.run_node(terms={"steps": 1, "copies": 2}, others=[[0.0] * 6])
        lease = tessera_client.Lease()
        (m,) = lease.average([t])
        lease.complete()
        self.assertTrue(isinstance(m, torch.Tensor))
        self.assertEqual((m.shape, m.dtype), (t.shape, t.dtype))
        self.assertTrue(torch.equal(m, t / 2))


class TestErrorsAndExit(NodeTest):
    def test_error_reply_raises_with_the_node_message(self):
        self.fast_reports()
        self.run_node(terms={"steps": 10}, error_on="report")
        lease = tessera_client.Lease(range(10))
        with self.assertRaisesRegex(tessera_client.LeaseError, "scripted error on report"):
            for _ in lease:
                pass

    def test_wrong_token_is_refused_at_hello(self):
        self.run_node(token="f" * 64)
        with self.assertRaisesRegex(tessera_client.LeaseError, "refused 'hello': unknown token"):
            tessera_client.Lease()

    def test_unreachable_socket_names_the_path(self):
        with self.assertRaisesRegex(tessera_client.LeaseError, "lease.sock"):
            tessera_client.Lease()

    def test_exit_reply_ends_the_loop_as_an_expiry(self):
        self.fast_reports()
        self.run_node(terms={"steps": 10}, exit_on="report")
        lease = tessera_client.Lease(range(10))
        self.assertEqual(list(lease), [0])
        self.assertTrue(lease.expired)
        buffers = [[1.5]]
        means = lease.average(buffers)  # no copies to average with: the program's own values
        self.assertIs(means[0], buffers[0])
        self.assertEqual((means.step, means.copies), (1, 1))
        lease.complete()  # nothing to tell a node that said exit
        self.assertEqual([m["op"] for m in self.messages()], ["hello", "report"])


class TestStandalone(unittest.TestCase):
    def test_without_tessera_lease_everything_passes_through(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
        with mock.patch.dict(os.environ, env, clear=True):
            lease = tessera_client.Lease(range(1000), step=5)
            self.assertTrue(lease.standalone)
            seen = [lease.should_checkpoint() or i for i in lease]
            self.assertEqual(seen, list(range(1000)))
            self.assertFalse(lease.expired)
            buffers = [[1.0, 2.0], array.array("f", [3.0])]
            means = lease.average(buffers)
            self.assertIs(means[0], buffers[0])
            self.assertIs(means[1], buffers[1])
            self.assertEqual((means.step, means.copies), (1005, 1))
            self.assertEqual((lease.step, lease.copy, lease.copies, lease.writer), (5, 0, 1, True))
            lease.report(loss=1.0)
            lease.complete(loss=1.0)
            self.assertIsNone(lease.checkpoint_dir)



class TestAtomicOpen(unittest.TestCase):
    def test_replaces_on_success_and_keeps_the_old_file_on_error(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ckpt")
            with tessera_client.atomic_open(path) as f:
                f.write(b"first")
            with self.assertRaises(ZeroDivisionError):
                with tessera_client.atomic_open(path) as f:
                    f.write(b"half")
                    1 / 0
            with open(path, "rb") as f:
                self.assertEqual(f.read(), b"first")
            self.assertEqual(os.listdir(d), ["ckpt"])  # no temporary file left

if __name__ == "__main__":
    unittest.main()
