"""Meaning of the off-chip memory operators on token sequences (spec section 4).

Each operator is a pure function of token lists and a 2-D NumPy array (the tensor in memory),
usable on its own by the hardware unit tests, plus its registration with the interpreter, which
also accounts the traffic: ``bytes(tile)`` per tile moved, so the measured traffic equals the
symbolic ``cardinality x bytes(tile)`` after the trace is substituted.

Tiles are addressed by their *linear tile index* ``i * (cols / tc) + j`` (row-major over the tile
grid); see :mod:`stepforge.compiler.ops.offchip`.
"""

import numpy as np

from ...compiler.errors import StepRuntimeError
from ...compiler.ops.offchip import (LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad,
                                    RandomOffChipStore)
from ...contract.tokens import beat_index, from_nested, is_stop, stop
from .interpreter import semantics

__all__ = ["affine_walk", "tile_count", "read_tile", "write_tile", "replay_per_ref",
           "linear_load", "linear_store", "random_load", "random_store"]


def affine_walk(out_shape, stride, offset=0):
    """The indices ``offset + sum(idx_d * stride_d)`` of a walk over ``out_shape`` as nested lists.

    ``out_shape = ()`` gives the bare ``offset``.
    """
    def walk(d, base):
        if d == len(out_shape):
            return base
        return [walk(d + 1, base + i * stride[d]) for i in range(out_shape[d])]
    return walk(0, offset)


def _map_nested(fn, nested, depth):
    if depth == 0:
        return fn(nested)
    return [_map_nested(fn, x, depth - 1) for x in nested]


def tile_count(shape, tile):
    """Number of ``tile``-sized tiles of a 2-D ``shape``."""
    return (shape[0] // tile[0]) * (shape[1] // tile[1])


def read_tile(memory, tile, k):
    """A copy of tile ``k`` (linear tile index) of the 2-D array ``memory``."""
    tr, tc = tile
    per_row = memory.shape[1] // tc
    i, j = divmod(k, per_row)
    return memory[i * tr:(i + 1) * tr, j * tc:(j + 1) * tc].copy()


def write_tile(memory, tile, k, value):
    """Store ``value`` as tile ``k`` (linear tile index) of the 2-D array ``memory``, in place."""
    tr, tc = tile
    per_row = memory.shape[1] // tc
    i, j = divmod(k, per_row)
    memory[i * tr:(i + 1) * tr, j * tc:(j + 1) * tc] = value


def _closed(body, level):
    """``body`` (one replayed tensor) with its closing stop set to ``S_level``.

    A body whose last token is a stop has it replaced; otherwise (a rank-0 body) ``S_level`` is
    appended, nothing when ``level`` is 0.
    """
    out = list(body)
    if out and is_stop(out[-1]):
        out[-1] = stop(level)
    elif level:
        out.append(stop(level))
    return out


def replay_per_ref(ref, make_body, depth):
    """One ``make_body()`` per reference element, the reference's stops raised by ``depth``.

    ``make_body()`` returns the tokens of one rank-``depth`` tensor (closed by ``S_depth``, or no
    stop at depth 0). A reference element with stop ``r`` gets its body closed by
    ``S_(depth + r)``; a stop-only reference beat ``S_r`` becomes the stop ``S_(depth + r)``.
    """
    out = []
    pending = None  # the body of the last reference element, until its stop is known
    for t in ref:
        if is_stop(t):
            if pending is not None:
                out.extend(_closed(pending, depth + t.level))
                pending = None
            else:
                out.append(stop(depth + t.level))
        else:
            if pending is not None:
                out.extend(_closed(pending, depth))
            pending = make_body()
    if pending is not None:
        out.extend(_closed(pending, depth))
    return out


def _check_index(a, ntiles, op, tokens, i, what):
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
        b = beat_index(tokens, i)
        raise StepRuntimeError(f"{op}: {what} at beat {b} is {a!r}, not a tile index", op=op, beat=b)
    if not 0 <= a < ntiles:
        b = beat_index(tokens, i)
        raise StepRuntimeError(f"{op}: {what} {int(a)} at beat {b} is outside the tensor's "
                               f"{ntiles} tiles", op=op, beat=b)
    return int(a)


def linear_load(memory, tile, out_shape, stride, offset=0, ref=None, *, op="LinearOffChipLoad"):
    """The tokens of a LinearOffChipLoad of ``memory`` (see the operator).

    Without ``ref`` the result is ``from_nested([read], len(out_shape))``; with ``ref`` one read
    per reference element, stops as in :func:`replay_per_ref`.
    """
    ntiles = tile_count(memory.shape, tile)
    walk = affine_walk(out_shape, stride, offset)
    depth = len(out_shape)

    def check(k):
        if not 0 <= k < ntiles:
            raise StepRuntimeError(f"{op}: the walk reads tile {k}, outside the tensor's {ntiles} "
                                   f"tiles", op=op)
        return k
    _map_nested(check, walk, depth)

    def read():
        return from_nested([_map_nested(lambda k: read_tile(memory, tile, k), walk, depth)], depth)
    if ref is None:
        return read()
    return replay_per_ref(ref, read, depth)


def linear_store(tokens, memory, tile, *, op="LinearOffChipStore"):
    """Write the elements of ``tokens`` to tiles 0, 1, 2, ... of ``memory``; return the count."""
    ntiles = tile_count(memory.shape, tile)
    k = 0
    for i, t in enumerate(tokens):
        if is_stop(t):
            continue
        if k >= ntiles:
            b = beat_index(tokens, i)
            raise StepRuntimeError(f"{op}: tile {k} at beat {b} does not fit: the tensor holds "
                                   f"{ntiles} tiles", op=op, beat=b)
        _check_shape(t, tile, op, tokens, i)
        write_tile(memory, tile, k, t)
        k += 1
    return k


def _check_shape(t, tile, op, tokens, i):
    shape = getattr(t, "shape", None)
    if shape is None or tuple(shape) != tuple(tile):
        b = beat_index(tokens, i)
        raise StepRuntimeError(f"{op}: the element at beat {b} has shape "
                               f"{list(shape) if shape is not None else type(t).__name__}, not the "
                               f"tile {list(tile)}", op=op, beat=b)


def random_load(addr, memory, tile, *, op="RandomOffChipLoad"):
    """One tile per address of ``addr``; the stops are the address stream's."""
    ntiles = tile_count(memory.shape, tile)
    out = []
    for i, t in enumerate(addr):
        if is_stop(t):
            out.append(t)
        else:
            out.append(read_tile(memory, tile, _check_index(t, ntiles, op, addr, i, "address")))
    return out


def random_store(addr, data, memory, tile, *, op="RandomOffChipStore"):
    """Scatter: the ``k``-th data element goes to the ``k``-th address; return the ack tokens.

    The acknowledgement has the address stream's stops and ``True`` per element. The element
    counts of ``addr`` and ``data`` must match.
    """
    ntiles = tile_count(memory.shape, tile)
    elems = [(j, t) for j, t in enumerate(data) if not is_stop(t)]
    out = []
    k = 0
    for i, t in enumerate(addr):
        if is_stop(t):
            out.append(t)
            continue
        a = _check_index(t, ntiles, op, addr, i, "address")
        if k >= len(elems):
            b = beat_index(addr, i)
            raise StepRuntimeError(f"{op}: address at beat {b} has no data: the data stream holds "
                                   f"{len(elems)} elements", op=op, port="data", beat=b)
        j, value = elems[k]
        _check_shape(value, tile, op, data, j)
        write_tile(memory, tile, a, value)
        out.append(True)
        k += 1
    if k < len(elems):
        j = elems[k][0]
        b = beat_index(data, j)
        raise StepRuntimeError(f"{op}: data element at beat {b} has no address: the address stream "
                               f"holds {k} elements, the data {len(elems)}", op=op, port="data", beat=b)
    return out


def _count(tokens):
    return sum(1 for t in tokens if not is_stop(t))


# -- registration ------------------------------------------------------------------------------

@semantics(LinearOffChipLoad)
def _linear_load(node, ins, ctx):
    memory = ctx.memory[node.tensor.name]
    out = linear_load(memory, node.tile, node.out_shape, node.stride, node.offset,
                      ins[0] if node.ref is not None else None, op=node.name)
    ctx.read(node, _count(out) * int(node.tile_type.nbytes()))
    return [out]


@semantics(LinearOffChipStore)
def _linear_store(node, ins, ctx):
    n = linear_store(ins[0], ctx.memory[node.tensor.name], node.tile, op=node.name)
    ctx.write(node, n * int(node.tile_type.nbytes()))
    return []


@semantics(RandomOffChipLoad)
def _random_load(node, ins, ctx):
    out = random_load(ins[0], ctx.memory[node.tensor.name], node.tile, op=node.name)
    ctx.read(node, _count(out) * int(node.tile_type.nbytes()))
    return [out]


@semantics(RandomOffChipStore)
def _random_store(node, ins, ctx):
    out = random_store(ins[0], ins[1], ctx.memory[node.tensor.name], node.tile, op=node.name)
    ctx.write(node, _count(out) * int(node.tile_type.nbytes()))
    return [out]
