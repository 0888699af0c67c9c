"""The lease channel's wire format (docs/lease-protocol.md): one JSON object per line over a
Unix-domain stream socket, each carrying the protocol version; an `average` line carries its
buffers' memfd with it (SCM_RIGHTS). No policy here: sending one request and reading its one
reply."""

import array
import json
import socket

PROTOCOL_VERSION = 2


class LeaseError(RuntimeError):
    """The node refused the program (an `error` reply), the channel broke, or a reply made no
    sense. The node treats the program as failed: let the exception end it (non-zero exit), the
    job restarts from its last checkpoint."""


class Channel:
    """One connection to the node's lease socket."""

    def __init__(self, path):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(path)
        except OSError as e:
            self._sock.close()
            raise LeaseError(f"cannot connect to the lease socket {path!r} "
                             f"(TESSERA_LEASE): {e.strerror or e}") from e
        self._pending = bytearray()  # bytes received after the last complete line
        self.closed = False

    def request(self, op, fd=None, **fields):
        """Sends one message (with descriptor `fd` attached, when given) and returns the reply
        (a dict). An `error` reply raises LeaseError with the node's message and closes the
        channel."""
        if self.closed:
            raise LeaseError(f"cannot send {op!r}: the lease channel is closed")
        msg = {"v": PROTOCOL_VERSION, "op": op}
        msg.update({k: v for k, v in fields.items() if v is not None})
        line = (json.dumps(msg, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
        try:
            if fd is None:
                self._sock.sendall(line)
            else:
                rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
                sent = self._sock.sendmsg([line], rights)
                self._sock.sendall(line[sent:])
            reply = self._read_line()
        except OSError as e:
            self.close()
            raise LeaseError(f"the lease channel broke during {op!r}: {e}") from e
        return self._check(op, reply)

    def _read_line(self):
        while True:
            end = self._pending.find(b"\n")
            if end >= 0:
                line = bytes(self._pending[:end])
                del self._pending[:end + 1]
                return line
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                self.close()
                raise LeaseError("the node closed the lease channel without a reply")
            self._pending += chunk

    def _check(self, op, line):
        try:
            reply = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            self.close()
            raise LeaseError(f"the node's reply to {op!r} is not JSON: {e}") from e
        if not isinstance(reply, dict):
            self.close()
            raise LeaseError(f"the node's reply to {op!r} is not a JSON object")
        if reply.get("op") == "error":
            self.close()
            raise LeaseError(f"the node refused {op!r}: {reply.get('message', '(no message)')}")
        if reply.get("v") != PROTOCOL_VERSION:
            self.close()
            raise LeaseError(f"the node speaks lease protocol version {reply.get('v')!r}, "
                             f"this client {PROTOCOL_VERSION}")
        return reply

    def close(self):
        if not self.closed:
            self.closed = True
            self._sock.close()
