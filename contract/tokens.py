"""Stop tokens, nested lists and beats: the three views of one stream.

*Tokens* are the abstract sequence of the semantics (section 2): elements interleaved with
:class:`Stop` tokens; ``Done`` is the end of the Python list. *Beats* are the wire encoding
``(data, has_data, stop, last)``. *Nested lists* are what a user writes: a rank-N stream is a list
of N-deep ragged nested lists (a rank-0 stream is a flat list of elements).

Emptiness is visible at two places only (spec section 2): an empty innermost fibre and a stream of
zero tensors. An empty list at a level above 1 therefore decodes as a list holding one empty list
(``[]`` of rank 2 encodes as ``S2`` and decodes as ``[[]]``); :func:`canonical` applies that rule
to a nested list so round trips can be compared.
"""

from typing import NamedTuple

import numpy as np

__all__ = ["Stop", "Beat", "stop", "is_stop", "from_nested", "to_nested", "canonical",
           "to_beats", "from_beats", "beat_index", "check_tokens", "format_tokens"]


class Stop:
    """The stop token ``S_level`` (``level >= 1``)."""
    __slots__ = ("level",)

    def __init__(self, level):
        self.level = level

    def __eq__(self, other):
        return isinstance(other, Stop) and other.level == self.level

    def __hash__(self):
        return hash((Stop, self.level))

    def __repr__(self):
        return f"S{self.level}"


_STOPS = [None] + [Stop(k) for k in range(1, 64)]


def stop(level):
    """The shared :class:`Stop` instance of ``level``."""
    return _STOPS[level] if level < 64 else Stop(level)


def is_stop(t):
    return type(t) is Stop


class Beat(NamedTuple):
    """One beat on the wire (spec section 2)."""
    data: object
    has_data: int
    stop: int
    last: int

    def __repr__(self):
        d = repr(self.data) if self.has_data else "-"
        return f"Beat({d}, stop={self.stop}{', last' if self.last else ''})"


def from_nested(tensors, rank):
    """The token sequence of a stream of ``rank`` holding the tensors ``tensors``."""
    out = []
    if rank == 0:
        return list(tensors)

    def enc(x, k):
        if k == 0:
            out.append(x)
            return
        if not isinstance(x, (list, tuple)):
            raise ValueError(f"expected a nested list {k} levels deep, got {x!r}")
        if len(x) == 0:
            out.append(stop(k))
            return
        for child in x:
            enc(child, k - 1)
        if k == 1:
            out.append(stop(1))
        else:
            out[-1] = stop(k)  # the last child ended with S_(k-1): raise it

    for t in tensors:
        enc(t, rank)
    return out


def to_nested(tokens, rank):
    """The tensors of a token sequence of ``rank`` (inverse of :func:`from_nested`)."""
    if rank == 0:
        for i, t in enumerate(tokens):
            if is_stop(t):
                raise ValueError(f"a rank-0 stream carries no stops, found {t!r} at token {i}")
        return list(tokens)
    tensors = []
    open_ = [None] + [[] for _ in range(rank)]  # open_[k]: the open list of level k
    for i, t in enumerate(tokens):
        if is_stop(t):
            if not 1 <= t.level <= rank:
                raise ValueError(f"stop {t!r} at token {i} is outside 1..{rank}")
            for k in range(1, t.level + 1):
                closed, open_[k] = open_[k], []
                (open_[k + 1] if k < rank else tensors).append(closed)
        else:
            open_[1].append(t)
    if any(open_[1:]):
        raise ValueError(f"the stream ends inside a tensor (no closing S{rank})")
    return tensors


def canonical(tensors, rank):
    """``tensors`` with every empty list above level 1 replaced by ``[[...[]]]`` (see module doc)."""
    def canon(x, k):
        if k == 0:
            return x
        if k >= 2 and len(x) == 0:
            return [canon([], k - 1)]
        return [canon(c, k - 1) for c in x]
    if rank == 0:
        return list(tensors)
    return [canon(t, rank) for t in tensors]


def to_beats(tokens):
    """The canonical beats of a token sequence: elements absorb the following stop and ``Done``."""
    beats = []
    n = len(tokens)
    i = 0
    while i < n:
        t = tokens[i]
        if is_stop(t):
            beats.append(Beat(None, 0, t.level, 0))
            i += 1
        else:
            if i + 1 < n and is_stop(tokens[i + 1]):
                beats.append(Beat(t, 1, tokens[i + 1].level, 0))
                i += 2
            else:
                beats.append(Beat(t, 1, 0, 0))
                i += 1
    if beats:
        beats[-1] = beats[-1]._replace(last=1)
    else:
        beats.append(Beat(None, 0, 0, 1))
    return beats


def from_beats(beats):
    """The token sequence of a beat sequence (any framing: a bare ``Done`` beat is allowed)."""
    tokens = []
    for i, b in enumerate(beats):
        if not (b.has_data or b.stop or b.last):
            raise ValueError(f"beat {i} carries nothing (has_data 0, stop 0, last 0)")
        if b.has_data:
            tokens.append(b.data)
        if b.stop:
            tokens.append(stop(b.stop))
        if b.last:
            if i != len(beats) - 1:
                raise ValueError(f"beat {i} has last set but {len(beats) - 1 - i} beats follow")
            return tokens
    raise ValueError("the beats end without a beat that has last set (no Done)")


def beat_index(tokens, i):
    """Index of the canonical beat that carries token ``tokens[i]``."""
    b = 0
    prev_elem = False
    for j in range(i + 1):
        t = tokens[j]
        if is_stop(t) and prev_elem:
            prev_elem = False  # absorbed by the element's beat
            continue
        if j < i:
            b += 1
        prev_elem = not is_stop(t)
    if is_stop(tokens[i]) and i > 0 and not is_stop(tokens[i - 1]):
        return b - 1 if b > 0 else 0
    return b


def check_tokens(tokens, rank, what="stream"):
    """Raise ``ValueError`` unless ``tokens`` is a well-formed stream of ``rank``."""
    to_nested(tokens, rank)


def format_tokens(tokens):
    """Tokens as the spec writes them: ``1 2 S1 3 S2 Done``."""
    return " ".join([repr(t) if is_stop(t) else _fmt(t) for t in tokens] + ["Done"])


def _fmt(x):
    try:
        if isinstance(x, np.ndarray):
            if x.size == 1:
                return repr(x.reshape(-1)[0].item())
            return f"tile{list(x.shape)}"
    except ImportError:  # pragma: no cover
        pass
    return repr(x)
