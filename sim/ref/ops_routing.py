"""Meaning of the routing operators on token sequences (spec section 4, "Routing").

Each operator is a pure function from token lists to token lists, usable on its own by the
hardware unit tests, plus its registration with the interpreter. Selector values are ``int`` bit
masks (bit ``i`` names target ``i``).

A *chunk* at rank ``b`` is everything up to and including the first stop ``>= b``; at ``b = 0``
it is one element (with the stop it absorbs, if any). :func:`iter_chunks` splits a stream into
chunks; every operator here is written in terms of it.

Run-time errors are :class:`~stepforge.compiler.errors.StepRuntimeError` s whose message names the
operator instance and the beat index (canonical beats, counted from 0); ``.port`` and ``.beat``
say which input and beat the fault was detected on.
"""

from ...compiler.errors import StepRuntimeError
from ...compiler.ops.routing import Broadcast, EagerMerge, Parallelize, Partition, Reassemble
from ...contract.tokens import beat_index, is_stop, stop
from .interpreter import semantics

__all__ = ["Chunk", "iter_chunks", "chunk_tokens", "partition", "reassemble", "eager_merge",
           "broadcast", "parallelize"]


class Chunk(tuple):
    """One chunk of a stream: ``(body, level, first, last)``.

    ``body`` is the chunk's tokens without its terminating stop (``b = 0``: the one element as a
    one-item list; ``None`` for a stop-only beat, which is not a chunk at ``b = 0``); ``level`` the
    terminating stop's level (0: none); ``first`` and ``last`` the token indices it spans.
    """
    __slots__ = ()

    def __new__(cls, body, level, first, last):
        return super().__new__(cls, (body, level, first, last))

    body = property(lambda self: self[0])
    level = property(lambda self: self[1])
    first = property(lambda self: self[2])
    last = property(lambda self: self[3])


def _stop_name(level):
    return f"S{level}" if level else "no stop"


def _done_beat(tokens):
    """Index of the beat that carries ``Done`` in the canonical beats of ``tokens``."""
    return beat_index(tokens, len(tokens) - 1) if tokens else 0


def iter_chunks(tokens, b, *, rank=None, op="?", port="in0"):
    """Yield the rank-``b`` :class:`Chunk` s of a token stream, in order.

    At ``b >= 1`` every run up to the first stop ``>= b`` is a chunk; a stop-only beat there is
    an empty chunk. At ``b = 0`` each element is a chunk and a stop-only beat yields a chunk with
    ``body = None``. With ``rank`` given, a stop above it is an error; a stream that ends inside a
    chunk is an error. Errors are raised when the generator reaches them, in stream order.
    """
    n = len(tokens)
    i = 0
    while i < n:
        t = tokens[i]
        if is_stop(t) and rank is not None and t.level > rank:
            _above_rank(tokens, i, rank, op, port)
        if b == 0:
            if is_stop(t):
                yield Chunk(None, t.level, i, i)
                i += 1
                continue
            if i + 1 < n and is_stop(tokens[i + 1]):
                nxt = tokens[i + 1]
                if rank is not None and nxt.level > rank:
                    _above_rank(tokens, i + 1, rank, op, port)
                yield Chunk([t], nxt.level, i, i + 1)
                i += 2
            else:
                yield Chunk([t], 0, i, i)
                i += 1
            continue
        j = i
        while j < n and not (is_stop(tokens[j]) and tokens[j].level >= b):
            if is_stop(tokens[j]) and rank is not None and tokens[j].level > rank:
                _above_rank(tokens, j, rank, op, port)
            j += 1
        if j == n:
            bi = beat_index(tokens, n - 1)
            raise StepRuntimeError(f"{op}: {port} ends inside a chunk at beat {bi}: the chunk that "
                                   f"starts at beat {beat_index(tokens, i)} has no closing stop "
                                   f">= S{b}", op=op, port=port, beat=bi)
        if rank is not None and tokens[j].level > rank:
            _above_rank(tokens, j, rank, op, port)
        yield Chunk(tokens[i:j], tokens[j].level, i, j)
        i = j + 1


def _above_rank(tokens, i, rank, op, port):
    bi = beat_index(tokens, i)
    raise StepRuntimeError(f"{op}: stop S{tokens[i].level} at beat {bi} of {port} is above the "
                           f"stream's rank {rank}", op=op, port=port, beat=bi)


def chunk_tokens(chunk, b):
    """The tokens a chunk is forwarded as: its body closed by ``S_b`` (``b = 0``: the element)."""
    return list(chunk.body) if b == 0 else list(chunk.body) + [stop(b)]


def _selector_element(select, i, n, op, *, rank=None):
    """``(mask, k, width)`` of the selector element at token ``i``: its stop level ``k`` (0 if
    none) and how many tokens it spans."""
    mask = select[i]
    if not isinstance(mask, int) or isinstance(mask, bool) or not 0 <= mask < (1 << n):
        sb = beat_index(select, i)
        raise StepRuntimeError(f"{op}: selector element at beat {sb} is {mask!r}, not a mask of "
                               f"{n} bits", op=op, port="select", beat=sb)
    if i + 1 < len(select) and is_stop(select[i + 1]):
        k = select[i + 1].level
        if rank is not None and k > rank:
            _above_rank(select, i + 1, rank, op, "select")
        return mask, k, 2
    return mask, 0, 1


def _bits(mask, n):
    return [j for j in range(n) if mask >> j & 1]


def partition(data, select, n, b, *, op="Partition", rank=None, drop=True):
    """Route the rank-``b`` chunks of ``data`` to ``n`` outputs as ``select`` says.

    Parameters
    ----------
    data : list
        Tokens of the data stream (rank ``a``).
    select : list
        Tokens of the selector stream (rank ``a - b``): one ``int`` mask per chunk.
    n, b : int
        Number of outputs and chunk rank.
    rank : int, optional
        The data's rank ``a``; when given, stops above it (or above ``a - b`` on the selector)
        are errors.
    drop : bool
        Whether a mask with no bit set drops its chunk (else it is an error).

    Returns
    -------
    list of list
        The ``n`` output token streams (rank ``b``): each routed chunk closed by ``S_b``.

    Raises
    ------
    StepRuntimeError
        A selector stop ``S_k`` that does not meet a data stop ``S_(k+b)``; data that ends before
        the selector or goes on after it; a mask out of range; a stop above the rank.
    """
    outs = [[] for _ in range(n)]
    sel_rank = None if rank is None else rank - b
    chunks = iter_chunks(data, b, rank=rank, op=op, port="in0")
    i = 0
    while i < len(select):
        t = select[i]
        if is_stop(t):
            k, width, mask = t.level, 1, None
            if sel_rank is not None and k > sel_rank:
                _above_rank(select, i, sel_rank, op, "select")
        else:
            mask, k, width = _selector_element(select, i, n, op, rank=sel_rank)
        c = next(chunks, None)
        if c is None:
            sb, d = beat_index(select, i), _done_beat(data)
            what = "element" if mask is not None else f"stop-only S{k}"
            raise StepRuntimeError(f"{op}: the data stream ended early (Done at beat {d}): the "
                                   f"selector {what} at beat {sb} has no data chunk",
                                   op=op, port="in0", beat=d)
        if mask is None or c.body is None or c.level != k + b or mask == 0 and not drop:
            # the beats the messages below name (a walk from the streams' start: errors only)
            sb, db = beat_index(select, i), beat_index(data, c.last)
        if mask is None:
            # an empty selector fibre: the data must show a stop-only S_(k+b) here
            stop_only = c.body is None if b == 0 else not c.body
            if stop_only and c.level == k + b:
                i += width
                continue
            if stop_only:
                shown = f"a stop-only S{c.level}"
            elif b == 0:
                shown = f"an element with {_stop_name(c.level)}"
            else:
                shown = f"a chunk ending with {_stop_name(c.level)}"
            raise StepRuntimeError(f"{op}: stop mismatch at data beat {db}: the selector's "
                                   f"stop-only S{k} at beat {sb} (an empty fibre) needs a stop-only "
                                   f"S{k + b} on the data, but the data shows {shown}",
                                   op=op, port="in0", beat=db)
        if c.body is None:
            raise StepRuntimeError(f"{op}: stop mismatch at data beat {db}: the selector element at "
                                   f"beat {sb} needs a data element, but the data shows a "
                                   f"stop-only S{c.level}", op=op, port="in0", beat=db)
        if c.level != k + b:
            raise StepRuntimeError(f"{op}: stop mismatch at data beat {db}: the selector element at "
                                   f"beat {sb} carries {_stop_name(k)}, so its data chunk must end "
                                   f"with {_stop_name(k + b)}, but it ends with "
                                   f"{_stop_name(c.level)}", op=op, port="in0", beat=db)
        if mask == 0 and not drop:
            raise StepRuntimeError(f"{op}: the selector element at beat {sb} names no output and "
                                   f"drop=False (its chunk ends at data beat {db})",
                                   op=op, port="select", beat=sb)
        piece = chunk_tokens(c, b)
        for j in _bits(mask, n):
            outs[j].extend(piece)
        i += width
    c = next(chunks, None)
    if c is not None:
        db = beat_index(data, c.first)
        left = len(data) - c.first
        raise StepRuntimeError(f"{op}: the selector ended (Done at beat {_done_beat(select)}) but "
                               f"the data goes on at beat {db} ({left} token{'s' if left != 1 else ''} "
                               f"left)", op=op, port="in0", beat=db)
    return outs


def reassemble(streams, select, b, *, op="Reassemble", count=None, select_rank=None):
    """For each selector element, concatenate one chunk of each selected input (ascending index)
    and close a new dimension.

    Parameters
    ----------
    streams : list of list
        Tokens of the ``n`` rank-``b`` inputs.
    select : list
        Tokens of the selector stream (any rank): ``int`` masks over ``n`` inputs.
    b : int
        Chunk rank.
    count : int, optional
        Every mask must name exactly ``count`` inputs.
    select_rank : int, optional
        The selector's rank; when given, selector stops above it are errors.

    Returns
    -------
    list
        Tokens of the output (rank ``select_rank + b + 1``). A selector element with stop ``S_k``
        closes its group with ``S_(b+1+k)``; a stop-only ``S_k`` becomes a stop-only
        ``S_(b+1+k)``; a mask with no bit set gives an empty group.
    """
    n = len(streams)
    its = [iter_chunks(s, b, rank=b, op=op, port=f"in{j}") for j, s in enumerate(streams)]
    out = []
    i = 0
    while i < len(select):
        t = select[i]
        if is_stop(t):
            if select_rank is not None and t.level > select_rank:
                _above_rank(select, i, select_rank, op, "select")
            out.append(stop(b + 1 + t.level))
            i += 1
            continue
        mask, k, width = _selector_element(select, i, n, op, rank=select_rank)
        bits = _bits(mask, n)
        if count is not None and len(bits) != count:
            sb = beat_index(select, i)
            raise StepRuntimeError(f"{op}: the selector element at beat {sb} names {len(bits)} "
                                   f"inputs ({mask:#b}), but count={count}", op=op,
                                   port="select", beat=sb)
        group = []
        for j in bits:
            c = next(its[j], None)
            if c is None:
                sb = beat_index(select, i)
                d = _done_beat(streams[j])
                raise StepRuntimeError(f"{op}: in{j} ended early (Done at beat {d}): the selector "
                                       f"element at beat {sb} names in{j}, which has no chunk left",
                                       op=op, port=f"in{j}", beat=d)
            group.extend(chunk_tokens(c, b))
        if group and b > 0:
            group[-1] = stop(b + 1 + k)
        else:
            group.append(stop(b + 1 + k))
        out.extend(group)
        i += width
    for j, it in enumerate(its):
        c = next(it, None)
        if c is not None:
            db = beat_index(streams[j], c.first)
            raise StepRuntimeError(f"{op}: the selector ended (Done at beat {_done_beat(select)}) "
                                   f"but in{j} has chunks left from beat {db}", op=op,
                                   port=f"in{j}", beat=db)
    return out


def eager_merge(streams, b, *, op="EagerMerge", order=None):
    """Merge whole rank-``b`` chunks of ``streams`` and name each chunk's source.

    Parameters
    ----------
    streams : list of list
        Tokens of the ``n`` rank-``b`` inputs.
    b : int
        Chunk rank.
    order : sequence of int, optional
        The input index of every merged chunk, in output order (the arrival order a piece of
        hardware saw). By default: round-robin over the inputs that still have chunks,
        starting at input 0.

    Returns
    -------
    (list, list)
        The data tokens (rank ``b``, chunks unchanged) and the selector tokens (rank 0, one-hot
        ``int`` masks).
    """
    n = len(streams)
    pieces = [[chunk_tokens(c, b) for c in iter_chunks(s, b, rank=b, op=op, port=f"in{j}")]
              for j, s in enumerate(streams)]
    if order is None:
        order = []
        left = [len(p) for p in pieces]
        while any(left):
            for j in range(n):
                if left[j]:
                    order.append(j)
                    left[j] -= 1
    pos = [0] * n
    data, select = [], []
    for m, j in enumerate(order):
        if not (isinstance(j, int) and 0 <= j < n):
            raise ValueError(f"{op}: order[{m}] = {j!r} is not an input index in 0..{n - 1}")
        if pos[j] == len(pieces[j]):
            raise ValueError(f"{op}: order[{m}] takes chunk {pos[j]} of in{j}, which has "
                             f"{len(pieces[j])}")
        data.extend(pieces[j][pos[j]])
        select.append(1 << j)
        pos[j] += 1
    for j in range(n):
        if pos[j] != len(pieces[j]):
            raise ValueError(f"{op}: order takes {pos[j]} of the {len(pieces[j])} chunks of in{j}")
    return data, select


def broadcast(tokens, n):
    """``n`` copies of a stream (the element values are shared, not copied)."""
    return [list(tokens) for _ in range(n)]


def parallelize(tokens, n, b, *, op="Parallelize", rank=None):
    """Deal the rank-``b`` chunks of a stream round-robin over ``n`` outputs.

    Chunk ``j`` goes to output ``j mod n``, closed by ``S_b`` (``b = 0``: the bare element). At
    ``b = 0`` stop-only beats carry no chunk and vanish with the flattened structure.
    """
    outs = [[] for _ in range(n)]
    j = 0
    for c in iter_chunks(tokens, b, rank=rank, op=op, port="in0"):
        if c.body is None:
            continue
        outs[j % n].extend(chunk_tokens(c, b))
        j += 1
    return outs


# -- registration ------------------------------------------------------------------------------

@semantics(Partition)
def _partition(node, ins, ctx):
    return partition(ins[0], ins[1], node.n, node.b, op=node.name, rank=node.inputs[0].rank,
                     drop=node.drop)


@semantics(Reassemble)
def _reassemble(node, ins, ctx):
    return [reassemble(ins[:-1], ins[-1], node.b, op=node.name, count=node.count,
                       select_rank=node.inputs[-1].rank)]


@semantics(EagerMerge)
def _eager_merge(node, ins, ctx):
    return list(eager_merge(ins, node.b, op=node.name))


@semantics(Broadcast)
def _broadcast(node, ins, ctx):
    return broadcast(ins[0], node.n)


@semantics(Parallelize)
def _parallelize(node, ins, ctx):
    return parallelize(ins[0], node.n, node.b, op=node.name, rank=node.inputs[0].rank)
