"""Buffers for `Lease.average`: what a program passes in, the float32 values it shares with
its node (little-endian, in a sealed memfd: SharedBuffers), and the mean handed back in the
same kind of object it came in.

| passed in                                            | handed back                            |
|------------------------------------------------------|----------------------------------------|
| torch.Tensor (float32/float64, any device and shape) | a new tensor, same dtype, shape, device |
| NumPy array or other buffer object with a float32 or  | obj.copy() holding the mean (same type, |
| float64 item format and a .copy() method             | shape and dtype)                       |
| array.array('f') / array.array('d')                  | array.array of the same typecode       |
| bytes / bytearray (raw native float32 values)        | bytes / bytearray                      |
| any other buffer object (memoryview, integer arrays)  | array.array('f')                       |
| list, tuple or any other iterable of numbers         | list of float                          |

Values go over the wire as float32: float64 inputs are rounded to float32 first, so their mean
holds float32 values too. A torch tensor is detected by its `detach` and `numpy` methods, so
this module imports neither torch nor NumPy."""

import array
import sys

_FLOAT_FORMATS = ("f", "d")
_INT_FORMATS = tuple("bBhHiIlLqQ")


def _native_format(mv):
    """The struct format of a memoryview's items without a native byte-order prefix; raises
    TypeError for a format array.array cannot read."""
    fmt = mv.format
    if fmt[:1] in ("@", "="):
        fmt = fmt[1:]
    elif fmt[:1] in ("<", ">", "!"):
        native = "<" if sys.byteorder == "little" else ">"
        if fmt[0] != native:
            raise TypeError(f"buffer of non-native byte order {mv.format!r}: "
                            "convert it to native order first")
        fmt = fmt[1:]
    if fmt not in _FLOAT_FORMATS + _INT_FORMATS:
        raise TypeError(f"buffer item format {mv.format!r} is not a number")
    return fmt


def _is_tensor(buf):
    return callable(getattr(buf, "detach", None)) and callable(getattr(buf, "numpy", None))


def to_float32(buf):
    """The values of one buffer as array('f')."""
    if _is_tensor(buf):
        buf = buf.detach().cpu().numpy()
    if isinstance(buf, (bytes, bytearray)):
        if len(buf) % 4:
            raise TypeError(f"a bytes buffer of {len(buf)} bytes is not float32 values")
        out = array.array("f")
        out.frombytes(bytes(buf))
        return out
    try:
        mv = memoryview(buf)
    except TypeError:
        return array.array("f", (float(x) for x in buf))
    fmt = _native_format(mv)
    values = array.array(fmt)
    values.frombytes(mv.tobytes())  # C order, also for non-contiguous views
    return values if fmt == "f" else array.array("f", values)


def _fill_copy(buf, mean):
    """buf.copy() with `mean` written into it, or None when buf is not such an object."""
    try:
        mv = memoryview(buf)
    except TypeError:
        return None
    fmt = _native_format(mv)
    if fmt not in _FLOAT_FORMATS or not callable(getattr(buf, "copy", None)):
        return None
    out = buf.copy()
    dst = memoryview(out)
    if dst.readonly or not dst.c_contiguous or dst.nbytes != len(mean) * dst.itemsize:
        return None
    _assign(dst.cast("B").cast(fmt), fmt, mean)
    return out


def _assign(dst, fmt, mean):
    """dst[:] = mean, converting float32 values to `fmt` only when it is not 'f'."""
    if fmt == "f" and isinstance(mean, memoryview):
        dst[:] = mean
    else:
        dst[:] = array.array(fmt, mean)


def like(buf, mean):
    """The mean (array('f'), or a memoryview of format 'f') as the kind of object `buf` is
    (table above); always a new object, never a view of `mean`."""
    if _is_tensor(buf):
        host = buf.detach().cpu().clone().contiguous()
        view = memoryview(host.numpy())
        fmt = _native_format(view)
        if fmt not in _FLOAT_FORMATS:
            raise TypeError(f"tensor of dtype {buf.dtype} is not float32 or float64")
        _assign(view.cast("B").cast(fmt), fmt, mean)
        return host.to(buf.device)
    if isinstance(buf, bytes):
        return mean.tobytes()
    if isinstance(buf, bytearray):
        return bytearray(mean.tobytes())
    if isinstance(buf, array.array):
        return array.array(buf.typecode if buf.typecode in _FLOAT_FORMATS else "f", mean)
    try:
        memoryview(buf)
    except TypeError:
        return list(mean)
    filled = _fill_copy(buf, mean)
    return filled if filled is not None else array.array("f", mean)


class SharedBuffers:
    """The buffers of one `average` in shared memory, as protocol version 2 carries them: a
    memfd sealed against shrinking and growing, holding every buffer's float32 values
    (little-endian) end to end. The node reduces them in place; `means()` reads the result
    back. A lease keeps it for its next average of the same total size (its pages stay in
    place); close it (or use it as a context manager) when done: it holds memory the size of
    the buffers."""

    def __init__(self, total):
        import fcntl
        import mmap
        import os
        self.total = total
        self.sizes = []
        self.fd = os.memfd_create("tessera-average", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        self._map = None
        self._views = []  # views handed out by means(), released before the map closes
        try:
            os.ftruncate(self.fd, 4 * total)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            if total:
                flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
                self._map = mmap.mmap(self.fd, 4 * total, flags=flags)
        except BaseException:
            self.close()
            raise

    def fill(self, buffers):
        """Writes the buffers' values, end to end (they must hold `total` values)."""
        self.release_views()
        self.sizes = [count(b) for b in buffers]
        if sum(self.sizes) != self.total:
            raise ValueError(f"{sum(self.sizes)} values for a shared buffer of {self.total}")
        if not self.total:
            return
        view = memoryview(self._map).cast("f")
        at = 0
        for b, n in zip(buffers, self.sizes):
            _write(view[at:at + n], b)
            at += n
        view.release()

    def means(self):
        """The buffers' values now (after the node's reply: the mean): on a little-endian
        machine memoryviews of format 'f' into the shared memory, valid until close() (turn
        them into objects of your own first, as `like` does); elsewhere arrays('f')."""
        out, at = [], 0
        view = memoryview(self._map).cast("f") if self._map is not None else memoryview(
            array.array("f"))
        self._views.append(view)
        for n in self.sizes:
            part = view[at:at + n]
            self._views.append(part)
            if sys.byteorder != "little":
                part = array.array("f", part)
                part.byteswap()
            out.append(part)
            at += n
        return out

    def release_views(self):
        """Releases the views means() handed out (they may no longer be used)."""
        for v in reversed(self._views):
            v.release()
        self._views = []

    def close(self):
        import os
        self.release_views()
        if self._map is not None:
            self._map.close()
            self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def count(buf):
    """How many values `buf` holds (without converting it when it is a float32 buffer)."""
    if _is_tensor(buf):
        return int(buf.numel())
    if isinstance(buf, (bytes, bytearray)):
        if len(buf) % 4:
            raise TypeError(f"a bytes buffer of {len(buf)} bytes is not float32 values")
        return len(buf) // 4
    try:
        mv = memoryview(buf)
    except TypeError:
        return len(to_float32(buf))
    _native_format(mv)
    return mv.nbytes // mv.itemsize


def available_memory():
    """Bytes of memory the kernel says are available (MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _write(dst, buf):
    """Writes the values of `buf` into `dst` (a memoryview of format 'f'): straight from its
    memory when it is a C-contiguous native float32 buffer (a NumPy array or CPU tensor of
    float32: no intermediate copy), else through to_float32."""
    src = None
    if _is_tensor(buf):
        host = buf.detach()
        if getattr(host, "device", None) is not None and str(host.device) != "cpu":
            host = host.cpu()
        buf = host.contiguous().numpy()
    if sys.byteorder == "little" and not isinstance(buf, (list, tuple)):
        try:
            mv = memoryview(buf)
            if mv.c_contiguous and _native_format(mv) == "f":
                src = mv.cast("B").cast("f")
        except TypeError:
            src = None
    if src is None:
        values = to_float32(buf)
        if sys.byteorder != "little":
            values.byteswap()
        src = memoryview(values)
    dst[:] = src
