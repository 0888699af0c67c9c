"""`Lease`: a training loop's view of the lease the node grants (docs/lease-protocol.md)."""

import itertools
import math
import os
import time

from . import _buffers
from ._channel import Channel, LeaseError

REPORT_INTERVAL = 0.2  # seconds between two reports while stepping (the protocol's "at most")
_EWMA = 0.25  # weight of the newest step in the moving average of the step time


class Averaged(list):
    """What `Lease.average` returns: the mean buffers (a list), plus
    `step`: the job's step after the merge (store it in the checkpoint) and
    `copies`: how many copies the mean is over."""

    def __init__(self, buffers, step, copies):
        super().__init__(buffers)
        self.step = step
        self.copies = copies


def _int_field(reply, name, low):
    value = reply.get(name)
    if type(value) is not int or value < low:
        raise LeaseError(f"the node's {reply.get('op')!r} reply has no valid {name!r}: {value!r}")
    return value


def _number_field(reply, name):
    value = reply.get(name)
    if type(value) not in (int, float) or not math.isfinite(value):
        raise LeaseError(f"the node's {reply.get('op')!r} reply has no valid {name!r}: {value!r}")
    return float(value)


class Lease:
    """The lease of one program process, wrapping the iterable its training loop runs over.

        lease = Lease(batches)          # says hello to the node (TESSERA_LEASE)
        for batch in lease:             # ends when `batches` ends or the lease expires
            train(batch)
        if lease.expired:               # the node wants the process back
            save_checkpoint()           # writer only; average first when lease.copies > 1
        else:
            lease.complete(loss=...)    # the job is finished

    Iterating yields the iterable's items (a new `iter()` of it each time a loop starts, so an
    outer epoch loop can iterate a data loader again; the lease carries on). Each item handed
    out is one step; it counts as made when the loop asks for the next item (or the program
    calls `average`/`complete` after leaving the loop with `break`). `iterable=None` yields
    0, 1, 2, ... until the lease ends.

    While stepping the client reports the steps made to the node at most every 0.2 s and on
    the last step, paces steps on a node declared slow (after a step of d seconds it sleeps
    d x (1/speed - 1)), and ends the loop when the lease's step cap is reached or its time is
    up. The last item is the one after which the cap is reached, or after which another step
    (at the moving average of the step time) would not end before the deadline;
    `should_checkpoint()` is true while that item is being processed. A node may shorten a
    lease in a reply (the job was stopped); the loop can then end with no item flagged, so
    checkpoint after the loop when `expired` is true, as above.

    `agree`: for a copy of several processes (torch.distributed), a function all of them call
    at every item with `[stop, last]` (two ints, 0 or 1) that returns the element-wise maximum
    over the processes (an all-reduce with MAX), so that every process of the copy takes the
    same number of steps. Not called when running standalone.

    `renew=True`: a warm lease. The process lives across rounds while the job stays where it
    is: at a lease's end the loop does not end but asks the node for the next lease, and goes
    on with it (the same model, data loader and CUDA context) when the job's next round keeps
    it on the same node and devices; else the loop ends, `expired` true. Such a program must
    checkpoint (and, forked, average) while `should_checkpoint()` is true, inside the loop:
    a lease's last item is flagged at the job's `checkpoint_every` cadence (every lease by
    default, and always for forked copies), and no code after the loop runs between renewed
    leases; and it must save after the loop when `should_checkpoint()` is false there (the
    node said exit after a lease that was not to be saved). Use `position` (the job's step after the item in progress) for the step to save,
    since `steps_made` counts from the latest renewal.

    Outside tessera (TESSERA_LEASE unset) a Lease is a pass-through: it yields every item,
    never expires, `average` returns its input unchanged and `complete`/`report` do nothing,
    so the same script runs on its own.

    Errors: a node's `error` reply, a broken channel or a malformed reply raise `LeaseError`
    (let it end the program: the job restarts from its last checkpoint). A node's `exit` reply
    ends the loop as an expiry; `average` then returns its input (copies = 1) and `complete`
    does nothing, so the program checkpoints and exits 0 as asked.
    """

    def __init__(self, iterable=None, step=None, agree=None, renew=False):
        self._iterable = itertools.count() if iterable is None else iterable
        self._agree = agree
        self._renew = bool(renew)
        self._renewable = False  # the node's lease says it may be renewed
        self._ends_job = False  # ... and that reaching its step cap finishes the job
        self._checkpoint = True  # ... and that its end is to be checkpointed
        self._ending = False  # a renewable lease's last item is done: renew at the loop's top
        self._own_step = None if step is None else int(step)  # NumPy integers too
        self._made = 0  # steps finished
        self.expired = False  #: True once the lease (not the iterable) ended the loop
        self._in_step = False
        self._last = False
        self._loss = None
        self._step_started = 0.0
        self._step_time = None  # moving average of one step's seconds, pacing included
        self._final_sent = False
        self._reported = 0  # steps finished at the latest report
        self._exited = False
        self._shared = None  # the last average's shared buffer, kept for the next one
        self._renewals = 0
        path = os.environ.get("TESSERA_LEASE", "")
        self._channel = None
        if not path:
            self._standalone_terms()
            return
        token = os.environ.get("TESSERA_LEASE_TOKEN", "")
        if not token:
            raise LeaseError("TESSERA_LEASE is set but TESSERA_LEASE_TOKEN is not")
        self._channel = Channel(path)
        sent = time.monotonic()
        reply = self._channel.request("hello", token=token, pid=os.getpid(), step=self._own_step,
                                      renew=True if self._renew else None)
        self._apply(reply, sent, first=True)
        self._last_report = time.monotonic()

    # ---- what a program reads ----
    @property
    def standalone(self):
        """True when running outside tessera (pass-through)."""
        return self._channel is None and not self._exited

    @property
    def checkpoint_dir(self):
        """TESSERA_CHECKPOINT_DIR (None when unset): where the job's checkpoint lives."""
        return os.environ.get("TESSERA_CHECKPOINT_DIR") or None

    @property
    def position(self):
        """The job's step after the item in progress: `step` (where this lease began, or the
        copies' merged step after `average`) plus `steps_made`. What a checkpoint records."""
        return self.step + self.steps_made

    @property
    def renewals(self):
        """Leases renewed in place so far (0 without `renew=True`)."""
        return self._renewals

    @property
    def steps_made(self):
        """Steps made since the lease began: the items handed out, the one in progress
        included (so after a `break` it counts the step the loop left in)."""
        return self._made + int(self._in_step)

    def _live(self):
        return self._channel is not None and not self._channel.closed

    def should_checkpoint(self):
        """True while the item being processed is the lease's last one and the node wants a
        checkpoint at its end. Under a warm lease the node may say not yet (the job's
        `checkpoint_every` is longer than a round): the process then goes on with its state in
        memory, and if the node later says exit the loop ends with this still false, so the
        code after the loop saves (`if not lease.should_checkpoint(): save()`)."""
        return self._last and (self._checkpoint or not self._renewable or self._job_ends())

    def _job_ends(self):
        """The item in progress (or the loop's last) reaches a step cap that ends the job."""
        return self._ends_job and 0 <= self._cap <= self._made + 1

    # ---- the loop ----
    def __iter__(self):
        it = iter(self._iterable)
        while True:
            self._finish_step()
            self._step_started = time.monotonic()  # a step: decision, agree, fetch, body
            stop = not self._may_step()
            last = not stop and self._is_last()
            if self._agree is not None and self._live():
                stop, last = (bool(x) for x in self._agree([int(stop), int(last)]))
            if stop and self._ending and self._renew_lease():
                continue  # the same process goes on under the next lease
            if stop:
                self._end_lease()
                return
            try:
                item = next(it)
            except StopIteration:
                if self._live():
                    self._send_report(final=False)  # the node counts steps from reports
                return
            self._last = last
            self._in_step = True
            yield item

    def _may_step(self):
        if self.expired or self._ending:
            return False
        if not self._live():
            return self._channel is None  # standalone: always; a broken channel: never
        if self._cap >= 0 and self._made >= self._cap:
            return False
        return self._deadline is None or time.monotonic() < self._deadline

    def _is_last(self):
        if not self._live():
            return False
        if self._cap >= 0 and self._made + 1 >= self._cap:
            return True
        if self._deadline is None or self._step_time is None:
            return False
        return time.monotonic() + 2 * self._step_time >= self._deadline

    def _finish_step(self):
        """Counts the item in progress as a step: paces it, reports when due."""
        if not self._in_step:
            return
        self._in_step = False
        self._made += 1
        if not self._live():
            return
        took = time.monotonic() - self._step_started
        if 0 < self.speed < 1:
            time.sleep(took * (1 / self.speed - 1))
        took = time.monotonic() - self._step_started
        self._step_time = took if self._step_time is None else \
            (1 - _EWMA) * self._step_time + _EWMA * took
        if self._last and self._renewable and not self._cap_ends_job():
            self._ending = True  # the loop's top asks for the next lease
            if self._made != self._reported:
                self._send_report(final=False)  # exact steps before an average
        elif self._last:
            self._end_lease()
        elif time.monotonic() - self._last_report >= REPORT_INTERVAL:
            self._send_report(final=False)

    def _cap_ends_job(self):
        """The lease ends by its step cap, and that finishes the job (complete, not renew)."""
        return self._ends_job and 0 <= self._cap <= self._made

    def _renew_lease(self):
        """Asks the node for the next lease (blocks until the job's next round is decided).
        True: a new lease runs, its steps counted afresh; False: the node said exit."""
        self._ending = False
        if not self._live():
            return False
        reply = self._channel.request("renew", steps=self._made, loss=self._finite_loss(None))
        self._apply(reply, time.monotonic())  # its seconds run from the answer, not the ask
        if self._exited:
            return False
        self.step = _int_field(reply, "step", 0)
        self._made = self._reported = 0
        self._final_sent = self._last = False
        self._renewals += 1
        self._last_report = time.monotonic()
        return True

    def _end_lease(self):
        self.expired = True
        if self._live() and not self._final_sent:
            self._send_report(final=True)

    # ---- messages ----
    def report(self, loss=None):
        """Records the latest training loss; sends a report now when the last one is 0.2 s old
        (call it during long work outside the loop to keep the node's liveness check happy)."""
        if loss is not None:
            self._loss = float(loss)
        if self._live() and time.monotonic() - self._last_report >= REPORT_INTERVAL:
            self._send_report(final=self._final_sent)

    def _finite_loss(self, loss):
        loss = self._loss if loss is None else float(loss)
        return loss if loss is not None and math.isfinite(loss) else None

    def _send_report(self, final):
        sent = time.monotonic()
        reply = self._channel.request("report", steps=self._made,
                                      loss=self._finite_loss(None), final=final or None)
        self._last_report = time.monotonic()
        self._reported = self._made
        self._final_sent = self._final_sent or final
        self._apply(reply, sent)

    def average(self, buffers):
        """Sends `buffers` (a list of float32 buffers, see _buffers for the kinds accepted and
        returned) to be averaged with the job's other copies; blocks until the node answers.
        Returns an `Averaged` list of the means, each of the kind its input was, with `.step`
        (the job's step after the merge) and `.copies`. Standalone: returns the inputs
        themselves, step = start step + steps made, copies = 1; so after the node said exit."""
        self._finish_step()
        buffers = list(buffers)
        if self._channel is None:  # standalone, or the node said exit
            return Averaged(buffers, self.step + self._made, 1)
        where = f"job {self.job} copy {self.copy}"
        need = 4 * sum(_buffers.count(b) for b in buffers)
        free = _buffers.available_memory()
        if free is not None and need > free:
            raise LeaseError(f"{where}: 'average' of {need // 4} float32 values ({need} bytes) "
                             f"does not fit in the {free} bytes of memory this machine has "
                             "available; average fewer or smaller buffers")
        try:
            shared = self._shared_for(need // 4)
            shared.fill(buffers)
        except OSError as e:
            raise LeaseError(f"{where}: cannot place {need // 4} float32 values for 'average' "
                             f"in shared memory: {e.strerror or e}") from e
        sizes = shared.sizes
        reply = self._channel.request("average", fd=shared.fd, sizes=sizes)
        if reply.get("op") != "averaged" or reply.get("sizes") != sizes:
            self._channel.close()
            raise LeaseError(f"the node answered 'average' with {reply.get('op')!r} "
                             f"of sizes {reply.get('sizes')!r} (sent {sizes})")
        means = [_buffers.like(b, m) for b, m in zip(buffers, shared.means())]
        shared.release_views()
        merged = Averaged(means, _int_field(reply, "step", 0), _int_field(reply, "copies", 1))
        self.step = merged.step - self._made  # so that `position` is the merged step
        return merged

    def _shared_for(self, total):
        """The shared buffer for an average of `total` values: the last one when it has that
        size (its pages are in place already), else a new one."""
        if self._shared is not None and self._shared.total != total:
            self._shared.close()
            self._shared = None
        if self._shared is None:
            self._shared = _buffers.SharedBuffers(total)
        return self._shared

    def complete(self, loss=None, accuracy=None):
        """Tells the node the job is finished (then exit 0). Does nothing standalone or after
        the node said exit."""
        self._finish_step()
        if self._channel is None:
            return
        acc = None if accuracy is None or not math.isfinite(float(accuracy)) else float(accuracy)
        reply = self._channel.request("complete", steps=self._made,
                                      loss=self._finite_loss(loss), accuracy=acc)
        if reply.get("op") != "exit":
            self._channel.close()
            raise LeaseError(f"the node answered 'complete' with {reply.get('op')!r}, not 'exit'")
        self._channel.close()
        self._channel = None
        self._exited = True
        self._drop_shared()

    def close(self):
        """Counts the step in progress, sends a last report if steps went unreported, closes
        the channel. For a program that leaves its loop with `break` and exits without
        `complete` (the node counts the steps it was told of)."""
        self._finish_step()
        self._drop_shared()
        if self._live():
            if self._made != self._reported:
                self._send_report(final=True)
            self._channel.close()

    def _drop_shared(self):
        if self._shared is not None:
            self._shared.close()
            self._shared = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- terms ----
    def _standalone_terms(self):
        job = os.environ.get("TESSERA_JOB_ID")
        self.job = int(job) if job else None
        self.copy = int(os.environ.get("TESSERA_COPY") or 0)
        self.copies = int(os.environ.get("TESSERA_COPIES") or 1)
        self.step = self._own_step or 0
        self.writer = os.environ.get("RANK", "0") in ("", "0")
        self.speed = 1.0
        self._cap, self._deadline = -1, None

    def _apply(self, reply, sent, first=False):
        """Takes the terms of a `lease` reply (sent at monotonic time `sent`), or the end of
        the lease for `exit`."""
        op = reply.get("op")
        if op == "exit":
            self._channel.close()
            self._channel = None
            self._exited = True
            self.expired = True
            if first:
                self._standalone_terms()
            return
        if op != "lease":
            self._channel.close()
            raise LeaseError(f"the node answered with {op!r} where a 'lease' was due")
        self.job = _int_field(reply, "job", 0)
        self.copy = _int_field(reply, "copy", 0)
        self.copies = _int_field(reply, "copies", 1)
        if first:
            node_step = _int_field(reply, "step", 0)
            self.step = node_step if self._own_step is None else self._own_step
        if type(reply.get("writer")) is not bool:
            raise LeaseError(f"the node's 'lease' reply has no valid 'writer': {reply!r}")
        self.writer = reply["writer"]
        self._renewable = self._renew and reply.get("renewable") is True
        self._ends_job = reply.get("ends_job") is True
        self._checkpoint = reply.get("checkpoint") is not False  # absent: an older node, save
        self._cap = _int_field(reply, "steps", -1)
        seconds = _number_field(reply, "seconds")
        self._deadline = None if seconds < 0 else sent + seconds
        self.speed = _number_field(reply, "speed")
        if self.speed <= 0:
            raise LeaseError(f"the node's 'lease' reply has speed {self.speed}")
