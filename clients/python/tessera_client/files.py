"""Writing a checkpoint atomically, as the lease protocol asks: into a temporary file in the
same folder, flushed to disk, then renamed over the checkpoint, so a process killed halfway
leaves the previous checkpoint whole."""

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_open(path):
    """A binary file to write `path` through; it replaces `path` when the block ends without
    an exception (and is removed otherwise).

        with atomic_open(os.path.join(lease.checkpoint_dir, "model.pt")) as f:
            torch.save(state, f)
    """
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
