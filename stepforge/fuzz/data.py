"""Random host data for a generated program: tensor contents and host input streams.

:func:`random_data` fills every input (and inout) tensor with random integers of its dtype and
draws every host input stream (``Program.input``) with a random ragged structure within its
declared bounds: a static dimension has exactly its size, a symbolic one a size in ``0..bound``
drawn per fibre (so empty fibres and empty tensors occur). Element values follow the element
type, narrowed by the generator's *hints* where the program needs it (an address must name a
tile of its tensor, a selector may have to be one-hot).
"""

import zlib

import numpy as np

from ..compiler.types import Bool, Index, Select, Tile

__all__ = ["random_data", "HINT_KEYS"]

#: What a hint may say about one host input: ``below`` (Index values in ``0..below-1``),
#: ``onehot`` (a Select names exactly one target), ``nonempty`` (a Select names at least one),
#: ``count`` (a Select names exactly ``count`` targets), ``max_len`` (a cap on every symbolic
#: dimension's size, used when shrinking).
HINT_KEYS = ("below", "onehot", "nonempty", "count", "max_len")


def _tile(rng, t):
    dt = t.dtype
    if rng.random() < 0.5:
        lo, hi = dt.min, dt.max
    else:
        lo, hi = max(dt.min, -8), min(dt.max, 8)
    return rng.integers(lo, hi + 1, (t.rows, t.cols), dtype=np.int64).astype(dt.np)


def _select(rng, t, hint):
    n = t.n
    if hint.get("onehot"):
        return 1 << int(rng.integers(0, n))
    if "count" in hint:
        bits = rng.choice(n, size=hint["count"], replace=False)
        return sum(1 << int(b) for b in bits)
    lo = 1 if hint.get("nonempty") else 0
    return int(rng.integers(lo, 1 << n))


def _element(rng, t, hint):
    if isinstance(t, Tile):
        return _tile(rng, t)
    if isinstance(t, Select):
        return _select(rng, t, hint)
    if isinstance(t, Index):
        return int(rng.integers(0, hint.get("below", 16)))
    if isinstance(t, Bool):
        return bool(rng.integers(0, 2))
    raise TypeError(f"random_data: no host values of {t!r}")


def _size(rng, d, symbols, hint, regular):
    if isinstance(d, int):
        return d
    bound = symbols.bound(d)
    if bound is None:
        raise ValueError(f"random_data: dimension {d} has no bound")
    bound = min(bound, hint.get("max_len", bound))
    if d in regular:     # a dynamic-regular size is the same in every fibre of the stream
        return regular[d]
    n = int(rng.integers(0, bound + 1))
    if not symbols.is_ragged(d):
        regular[d] = n
    return n


def random_stream(rng, shape, elem, symbols, hint=None):
    """Nested lists (``len(shape)`` levels: the tensors, then their fibres) of random elements."""
    hint = hint or {}
    regular = {}

    def level(k):
        n = _size(rng, shape[k], symbols, hint, regular)
        if k == len(shape) - 1:
            return [_element(rng, elem, hint) for _ in range(n)]
        return [level(k + 1) for _ in range(n)]
    return level(0)


def random_data(program, seed=0, hints=None):
    """``{"tensors": ..., "inputs": ...}`` for ``program``, the same for the same ``seed``.

    Parameters
    ----------
    program : Program
    seed : int
    hints : dict of str to dict, optional
        Per host input name, the keys of :data:`HINT_KEYS`.
    """
    hints = hints or {}
    tensors = {}
    for name, t in program.tensors.items():
        if t.role in ("input", "inout"):
            tensors[name] = _tile(_rng(seed, name), Tile(t.dtype, *t.shape))
    inputs = {}
    for node in program.inputs:
        s = node.outputs[0]
        inputs[node.name] = random_stream(_rng(seed, node.name), s.shape, s.dtype,
                                          program.symbols, hints.get(node.name))
    return {"tensors": tensors, "inputs": inputs}


def _rng(seed, name):
    """One generator per tensor or input: its data does not change when shrinking removes
    another one."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])
