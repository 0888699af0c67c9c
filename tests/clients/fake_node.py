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
                      writer); `seconds` counts from the hello
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

import base64
import json
import math
import os
import socket
import struct
import sys
import threading
import time

OPS = ("hello", "report", "average", "complete")
DEFAULT_TERMS = {"job": 7, "copy": 0, "copies": 1, "step": 0, "steps": -1, "seconds": -1,
                 "speed": 1.0, "writer": True}


class ProtocolError(Exception):
    pass


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _decode_floats(text):
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as e:
        raise ProtocolError(f"data is not base64: {e}")
    if base64.b64encode(raw).decode("ascii") != text or len(raw) % 4:
        raise ProtocolError("data is not canonical base64 of float32 values")
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _check(msg, said_hello):
    """Raises ProtocolError for a message the node would refuse."""
    if not isinstance(msg, dict):
        raise ProtocolError("not a JSON object")
    if msg.get("v") != 1:
        raise ProtocolError(f"protocol version {msg.get('v')!r}, node speaks 1")
    op = msg.get("op")
    if op not in OPS:
        raise ProtocolError(f"unknown op {op!r}")
    if (op == "hello") == said_hello:
        raise ProtocolError("hello must come first, and once")
    ints = {"hello": ["pid"], "report": ["steps"], "complete": ["steps"], "average": []}[op]
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
        if type(msg.get("data")) is not str or \
                len(_decode_floats(msg["data"])) != sum(sizes):
            raise ProtocolError("average: data does not hold sum(sizes) float32 values")


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
        try:
            with conn:
                pending = b""
                while True:
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        return
                    pending += chunk
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        if not self._answer(conn, line):
                            return
        finally:
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
            self._send(conn, {"v": 1, "op": "error", "message": str(e)})
            return False
        op = msg["op"]
        if op == self.script.get("error_on"):
            message = self.script.get("error_message", f"scripted error on {op}")
            self._send(conn, {"v": 1, "op": "error", "message": message})
            return False
        if op == self.script.get("exit_on") or op == "complete":
            self._send(conn, {"v": 1, "op": "exit"})
            return True
        if op == "average":
            self._send(conn, self._averaged(msg))
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
        return dict({"v": 1, "op": "lease"}, **terms)

    def _averaged(self, msg):
        mine = _decode_floats(msg["data"])
        copies = [mine] + [list(map(_f32, o)) for o in self.script.get("others", [])]
        mean = [_f32(math.fsum(vals) / len(copies)) for vals in zip(*copies)]
        data = base64.b64encode(struct.pack(f"<{len(mean)}f", *mean)).decode("ascii")
        return {"v": 1, "op": "averaged", "sizes": msg["sizes"], "data": data,
                "copies": len(copies),
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
