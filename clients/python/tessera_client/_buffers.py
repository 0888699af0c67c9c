"""Buffers for `Lease.average`: what a program passes in, the float32 values sent on the wire
(little-endian, base64), and the mean handed back in the same kind of object it came in.

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
import base64
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
    dst.cast("B").cast(fmt)[:] = array.array(fmt, mean)
    return out


def like(buf, mean):
    """The mean (array('f')) as the kind of object `buf` is (table above)."""
    if _is_tensor(buf):
        host = buf.detach().cpu().clone().contiguous()
        view = memoryview(host.numpy())
        fmt = _native_format(view)
        if fmt not in _FLOAT_FORMATS:
            raise TypeError(f"tensor of dtype {buf.dtype} is not float32 or float64")
        view.cast("B").cast(fmt)[:] = array.array(fmt, mean)
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
    return filled if filled is not None else mean


def encode(buffers):
    """(sizes, base64 text) of a list of buffers, as the `average` message carries them."""
    values = [to_float32(b) for b in buffers]
    sizes = [len(v) for v in values]
    joined = array.array("f")
    for v in values:
        joined.extend(v)
    if sys.byteorder != "little":
        joined.byteswap()
    return sizes, base64.b64encode(joined.tobytes()).decode("ascii")


def decode(sizes, data):
    """The buffers of an `averaged` reply, each an array('f'); ValueError when sizes and data
    disagree."""
    raw = base64.b64decode(data.encode("ascii"), validate=True)
    if len(raw) % 4 or len(raw) // 4 != sum(sizes) or any(s < 0 for s in sizes):
        raise ValueError(f"sizes {sum(sizes)} values but data holds {len(raw) / 4:g}")
    joined = array.array("f")
    joined.frombytes(raw)
    if sys.byteorder != "little":
        joined.byteswap()
    out, at = [], 0
    for s in sizes:
        out.append(joined[at:at + s])
        at += s
    return out
