"""Host-side helpers: tensors as memory bytes, and the simulator's zero-time back door."""

import numpy as np

__all__ = ["array_to_bytes", "array_from_bytes", "backdoor_read", "backdoor_write"]


def array_to_bytes(array, dtype):
    """The little-endian bytes of a 2-D array of ``dtype`` (row-major), as stored in memory.

    Parameters
    ----------
    array : array_like
        Values of ``dtype`` (floats are moved bit for bit).
    dtype : stepforge.compiler.types.DType

    Returns
    -------
    bytes
    """
    a = np.ascontiguousarray(np.asarray(array).astype(dtype.np, copy=False))
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def array_from_bytes(buf, shape, dtype):
    """The 2-D array of ``dtype`` and ``shape`` stored in the little-endian bytes ``buf``."""
    nbytes = shape[0] * shape[1] * dtype.nbytes
    raw = np.frombuffer(bytes(buf[:nbytes]), dtype=dtype.np.newbyteorder("<"))
    return raw.astype(dtype.np).reshape(shape)


def backdoor_write(ctx, model, word_addr, buf):
    """Write the bytes ``buf`` at ``word_addr`` of ``model`` in Amaranth's simulator, in zero time.

    ``ctx`` is a testbench context; ``len(buf)`` must be a whole number of words.
    """
    g = model.geometry
    nwords = g.words(len(buf), "a back-door write")
    if word_addr + nwords > g.rows * g.lanes:
        raise ValueError(f"a back-door write of {nwords} words at {word_addr} leaves the memory")
    for k in range(nwords):
        w = word_addr + k
        value = int.from_bytes(buf[k * g.word_bytes:(k + 1) * g.word_bytes], "little")
        ctx.set(model.lane_data[w % g.lanes][w // g.lanes], value)


def backdoor_read(ctx, model, word_addr, nwords):
    """``nwords`` words from ``word_addr`` of ``model`` in Amaranth's simulator, as bytes."""
    g = model.geometry
    if word_addr + nwords > g.rows * g.lanes:
        raise ValueError(f"a back-door read of {nwords} words at {word_addr} leaves the memory")
    out = bytearray()
    for k in range(nwords):
        w = word_addr + k
        out += int(ctx.get(model.lane_data[w % g.lanes][w // g.lanes])).to_bytes(
            g.word_bytes, "little")
    return bytes(out)
