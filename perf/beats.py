"""A stream's beats as arrays, from the interpreter's tokens: what the timing model reads.

One beat per canonical beat (:func:`stepforge.contract.tokens.to_beats`): an element absorbs the
stop after it; a stop after a stop, or a stream with nothing in it, is a beat of its own.

A stream whose shape is all integers has the same beats whatever the data: :func:`shape_beats`
frames them from the shape alone, without the interpreter (:func:`static_shape`).
"""

from dataclasses import dataclass

import numpy as np

from ..contract.tokens import Stop
from .engine import filled

__all__ = ["Beats", "beats_of", "shape_beats", "static_shape", "mapping_in", "mapping_out",
           "fit"]


@dataclass
class Beats:
    """``has[j]``, ``stop[j]``: beat ``j`` carries an element, and its stop level (0: none);
    ``values``: the elements in order (for selectors and dynamic tile rows; None for beats framed
    from a shape)."""
    has: np.ndarray
    stop: np.ndarray
    values: list

    @property
    def n(self):
        return len(self.has)

    def rows(self):
        """The row count of each beat's element (its first dynamic tile), -1 without one."""
        out = np.full(self.n, -1, dtype=np.int64)
        k = 0
        where = np.nonzero(self.has)[0]
        for j, v in zip(where, self.values):
            while isinstance(v, tuple):
                v = v[0]
            shape = getattr(v, "shape", None)
            if shape is not None and len(shape) == 2:
                out[j] = shape[0]
            k += 1
        return out


def beats_of(tokens):
    """The :class:`Beats` of a token list (the same framing as ``to_beats``). One pass in
    Python: the streams are short, and per-token NumPy over three passes cost four times more."""
    if not tokens:
        return Beats(np.zeros(1, dtype=np.int8), np.zeros(1, dtype=np.int64), [])
    has, stop, values = [], [], []
    elem = False                    # the last beat holds an element without its stop yet
    for t in tokens:
        if type(t) is Stop:
            if elem:                # a stop right after an element is fused into its beat
                stop[-1] = t.level
                elem = False
            else:
                has.append(0)
                stop.append(t.level)
        else:
            values.append(t)
            has.append(1)
            stop.append(0)
            elem = True
    return Beats(np.array(has, dtype=np.int8), np.array(stop, dtype=np.int64), values)


def static_shape(stream):
    """``stream``'s shape as a tuple of positive ints, or None when a dimension is symbolic (or
    zero: an empty stream's framing is the interpreter's to tell)."""
    shape = stream.shape
    if all(type(d) is int and d > 0 for d in shape):
        return tuple(shape)
    return None


def shape_beats(shape):
    """The :class:`Beats` of a stream of static ``shape`` (outermost first, ``rank + 1`` positive
    ints): every element is a beat, and closes level ``k`` when the inner ``k`` dimensions wrap
    (the same beats as :func:`beats_of` of any run's tokens). Without values."""
    rank = len(shape) - 1
    n = 1
    for d in shape:
        n *= d
    stop = np.zeros(n, dtype=np.int64)
    inner = 1
    for k in range(1, rank + 1):        # an element closes level k when the inner k dims wrap
        inner *= shape[rank - k + 1]
        stop[inner - 1::inner] = k
    return Beats(np.ones(n, dtype=np.int8), stop, None)


def mapping_in(n, S):
    """Steps ``0..S-1`` consuming beats ``0..n-1`` spread evenly, each at its group's first
    step: an array of beat indices (-1: none)."""
    idx = filled(S, -1)
    if n == 0 or S == 0:
        return idx
    first = (np.arange(n, dtype=np.int64) * S + n - 1) // n      # ceil(j * S / n)
    idx[first] = np.arange(n)
    return idx


def mapping_out(n, S):
    """Steps producing beats ``0..n-1`` spread evenly, each at its group's last step."""
    idx = filled(S, -1)
    if n == 0 or S == 0:
        return idx
    last = ((np.arange(n, dtype=np.int64) + 1) * S + n - 1) // n - 1
    idx[last] = np.arange(n)
    return idx


def fit(emits, n, S):
    """Per-step beat indices for a port that emits (or consumes) at the steps where ``emits`` is
    true, made to cover exactly ``n`` beats: surplus emissions are dropped from the end, missing
    beats are given to the last steps that have none (a final bare ``Done``). Falls back to an
    even spread when the steps cannot hold them."""
    emits = np.asarray(emits, dtype=bool)
    k = int(emits.sum())
    if k > n:
        where = np.nonzero(emits)[0]
        emits = emits.copy()
        emits[where[n:]] = False
    elif k < n:
        free = np.nonzero(~emits)[0]
        later = free[free > (np.nonzero(emits)[0][-1] if k else -1)]
        if len(later) < n - k:
            return mapping_out(n, S)
        emits = emits.copy()
        emits[later[len(later) - (n - k):]] = True
    idx = filled(S, -1)
    idx[emits] = np.arange(n)
    return idx
