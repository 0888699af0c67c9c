#!/usr/bin/env python3
"""A stand-in for a tessera node's lease socket (docs/lease-protocol.md), for testing the client
libraries without the node: it serves one program connection with scripted terms, checks every
message as strictly as the node does, and records what it received.

In a test (a thread of the test process):
    node = FakeNode(path, terms={"steps": 10}).start()
    ... run the client with TESSERA_LEASE=path, TESSERA_LEASE_TOKEN=node.token ...
    node.join(); node.received  # [(monotonic seconds, message dict), ...]

As a process (for the C++ client's tests):
    python3 fake_node.py SOCKET_PATH SCRIPT_JSON LOG_PATH
prints "ready" once listening, appends each message received to LOG_PATH as a JSON line
({"t": seconds since start, "msg": {...}}), and exits after the connection closes.

The script (a dict, all keys optional):
    terms:            the hello reply's terms (job, copy, copies, step, steps, seconds, speed,
                      writer, and for a warm lease renewable, ends_job, checkpoint); `seconds`
                      counts from the hello
    stop_after_steps: once a report says at least this many steps, the lease is stopped (later
                      replies grant the steps made and 0 seconds), as a cancelled job's is
    split:            send every reply in this many pieces, 20 ms apart
    others:           the other copies' buffers (list of lists of floats, one list per copy,
                      buffers concatenated) that an `average` is averaged with
    merged_step:      the step an `averaged` reply carries (default: the lease's step)
    error_on / exit_on: an op answered with `error` (then the connection closes) / `exit`
    error_message:    the scripted error's message (default "scripted error on <op>")
    token:            the token expected (default: 64 zeros)
"""

import array
import fcntl
import json
import math
import mmap
import os
import socket
import struct
import sys
import threading
import time

PROTOCOL_VERSION = 2

OPS = ("hello", "report", "average", "complete", "renew")
DEFAULT_TERMS = {"job": 7, "copy": 0, "copies": 1, "step": 0, "steps": -1, "seconds": -1,
                 "speed": 1.0, "writer": True}


class ProtocolError(Exception):
    pass


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _map_shared(fd, count):
    """The program's memfd for an average, checked as the node checks it; an mmap (None for no
    values)."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise ProtocolError("average: the descriptor is not a sealable memfd")
    if not seals & fcntl.F_SEAL_SHRINK:
        raise ProtocolError("average: the memfd is not sealed against shrinking")
    if os.fstat(fd).st_size < 4 * count:
        raise ProtocolError(f"average: the memfd holds {os.fstat(fd).st_size} bytes, "
                            f"sizes announce {4 * count}")
    return mmap.mmap(fd, 4 * count) if count else None


def _check(msg, said_hello):
    """Raises ProtocolError for a message the node would refuse."""
    if not isinstance(msg, dict):
        raise ProtocolError("not a JSON object")
    if msg.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {msg.get('v')!r}, node speaks {PROTOCOL_VERSION}")
    op = msg.get("op")
    if op not in OPS:
        raise ProtocolError(f"unknown op {op!r}")
    if (op == "hello") == said_hello:
        raise ProtocolError("hello must come first, and once")
    ints = {"hello": ["pid"], "report": ["steps"], "complete": ["steps"], "average": [],
            "renew": ["steps"]}[op]
    for name in ints + ([] if op != "hello" or "step" not in msg else ["step"]):
        if type(msg.get(name)) is not int or msg[name] < 0:
            raise ProtocolError(f"{op}: {name} must be a non-negative int")
    for name in ("loss", "accuracy"):
        if name in msg and (type(msg[name]) not in (int, float) or not math.isfinite(msg[name])):
            raise ProtocolError(f"{op}: {name} must be a finite number")
    if "final" in msg and type(msg["final"]) is not bool:
        raise ProtocolError("report: final must be a bool")
    if op == "hello" and type(msg.get("token")) is not str:
        raise ProtocolError("hello: token must be a string")
    if op == "average":
        sizes = msg.get("sizes")
        if not isinstance(sizes, list) or any(type(s) is not int or s < 0 for s in sizes):
            raise ProtocolError("average: sizes must be an array of non-negative ints")
        if "data" in msg:
            raise ProtocolError("average: data in the line is protocol version 1's")


class FakeNode:
    def __init__(self, path, script=None, log_path=None, **script_kw):
        self.path = path
        self.script = dict(script or {}, **script_kw)
        self.terms = dict(DEFAULT_TERMS, **self.script.get("terms", {}))
        self.token = self.script.get("token", "0" * 64)
        self.received = []  # (monotonic seconds, message)
        self.protocol_error = None
        self._log = open(log_path, "a") if log_path else None
        self._t0 = time.monotonic()
        self._deadline = None
        self._stopped_at = None  # steps granted once stopped
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(path):
            os.unlink(path)
        self._server.bind(path)
        self._server.listen(1)
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self.serve, daemon=True)
        self._thread.start()
        return self

    def join(self, timeout=10):
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def serve(self):
        """Serves one connection until it closes."""
        conn, _ = self._server.accept()
        self._server.close()
        self._fds = []  # descriptors received, oldest first, each for an average
        try:
            with conn:
                pending = b""
                while True:
                    chunk, fds, _, _ = socket.recv_fds(conn, 1 << 16, 4)
                    self._fds.extend(fds)
                    if not chunk:
                        return
                    pending += chunk
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        if not self._answer(conn, line):
                            return
        finally:
            for fd in self._fds:
                os.close(fd)
            if self._log:
                self._log.close()

    def _answer(self, conn, line):
        """Answers one line; False when the connection is to close."""
        try:
            msg = json.loads(line.decode("utf-8"))
        except ValueError:
            msg = None
        self.received.append((time.monotonic(), msg))
        if self._log:
            self._log.write(json.dumps({"t": time.monotonic() - self._t0, "msg": msg}) + "\n")
            self._log.flush()
        try:
            _check(msg, said_hello=len(self.received) > 1)
            if msg["op"] == "hello" and msg["token"] != self.token:
                raise ProtocolError("unknown token")
        except ProtocolError as e:
            self.protocol_error = str(e)
            self._send(conn, {"v": PROTOCOL_VERSION, "op": "error", "message": str(e)})
            return False
        op = msg["op"]
        if op == self.script.get("error_on"):
            message = self.script.get("error_message", f"scripted error on {op}")
            self._send(conn, {"v": PROTOCOL_VERSION, "op": "error", "message": message})
            return False
        if op == self.script.get("exit_on") or op == "complete":
            self._send(conn, {"v": PROTOCOL_VERSION, "op": "exit"})
            return True
        if op == "average":
            try:
                reply = self._averaged(msg)
            except ProtocolError as e:
                self.protocol_error = str(e)
                self._send(conn, {"v": PROTOCOL_VERSION, "op": "error", "message": str(e)})
                return False
            self._send(conn, reply)
            return True
        if op == "hello":
            seconds = self.terms["seconds"]
            self._deadline = None if seconds < 0 else time.monotonic() + seconds
        stop_after = self.script.get("stop_after_steps")
        if op == "report" and stop_after is not None and msg["steps"] >= stop_after \
                and self._stopped_at is None:
            self._stopped_at = msg["steps"]
        self._send(conn, self._lease())
        return True

    def _lease(self):
        terms = dict(self.terms)
        if self._deadline is not None:
            terms["seconds"] = max(0.0, self._deadline - time.monotonic())
        if self._stopped_at is not None:
            terms["steps"], terms["seconds"] = self._stopped_at, 0.0
        return dict({"v": PROTOCOL_VERSION, "op": "lease"}, **terms)

    def _averaged(self, msg):
        """Averages the program's shared buffers (in place, as the node does) with the
        scripted other copies'."""
        if not self._fds:
            raise ProtocolError("average: no memfd came with the line (SCM_RIGHTS)")
        fd = self._fds.pop(0)
        try:
            count = sum(msg["sizes"])
            shared = _map_shared(fd, count)
            self.sent_values = []  # the program's values (recorded up to a million of them)
            if shared is not None and count <= 1 << 20:
                view = memoryview(shared).cast("f")
                self.sent_values = list(view)
                view.release()
            if shared is not None and not self.script.get("others"):
                shared.close()  # one copy: the mean is the program's own values
            elif shared is not None:
                view = memoryview(shared).cast("f")
                mine = list(view)
                copies = [mine] + [list(map(_f32, o)) for o in self.script.get("others", [])]
                view[:] = array.array("f", [_f32(math.fsum(v) / len(copies))
                                            for v in zip(*copies)])
                view.release()
                shared.close()
            self.averaged_values = count
        finally:
            os.close(fd)
        return {"v": PROTOCOL_VERSION, "op": "averaged", "sizes": msg["sizes"],
                "copies": 1 + len(self.script.get("others", [])),
                "step": self.script.get("merged_step", self.terms["step"])}

    def _send(self, conn, reply):
        raw = (json.dumps(reply, separators=(",", ":")) + "\n").encode("utf-8")
        pieces = max(1, int(self.script.get("split", 1)))
        cut = [len(raw) * i // pieces for i in range(pieces + 1)]
        for i in range(pieces):
            if i:
                time.sleep(0.02)
            conn.sendall(raw[cut[i]:cut[i + 1]])


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    text = open(argv[2]).read() if os.path.exists(argv[2]) else argv[2]
    node = FakeNode(argv[1], json.loads(text), log_path=argv[3])
    print("ready", flush=True)
    node.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
